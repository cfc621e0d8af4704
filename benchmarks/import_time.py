"""How long ``import cxreval`` and ``cxreval --version`` take, against a bare interpreter start.

Each command runs ``--repeat`` times in fresh processes (the median is printed), beside the
baseline ``python -c pass`` measured the same way in this run, so the ratio is fair on a busy
machine. Targets (issue 12): import under 0.3 s, ``--version`` under 0.5 s.

    python benchmarks/import_time.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    base = wall([py, "-c", "pass"], args.repeat)
    rows = [
        ("python -c pass (baseline)", base),
        ("python -c 'import cxreval'", wall([py, "-c", "import cxreval"], args.repeat)),
        ("cxreval --version", wall([py, "-m", "cxreval", "--version"], args.repeat)),
        ("import cxreval; cxreval.Evaluator (pandas)", wall([py, "-c", "import cxreval; cxreval.Evaluator"], args.repeat)),
    ]
    print(f"median of {args.repeat} fresh processes each")
    for name, t in rows:
        print(f"  {name:45s} {t:6.3f} s   {t / base:5.1f} x baseline   (+{t - base:.3f} s)")


if __name__ == "__main__":
    main()
