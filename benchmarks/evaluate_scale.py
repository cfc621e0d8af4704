"""Peak memory and speed of ``cxreval evaluate`` on many pairs: the streamed path against the
whole-list path it replaced, measured in the same run.

Pairs: IU X-ray reports (read at run time from ../shared/data, CC BY-NC-ND; the pairs file goes to
a temporary folder and is deleted) paired at random with a kept column. Each run is the real
command, ``cxreval evaluate --pairs FILE --out DIR --workers W``, in a child process whose
process tree's resident memory (parent and workers together) is sampled every 0.1 s.

Baseline: the whole-list path, ``read_pairs`` + ``Evaluator.evaluate`` + ``save`` in one child
process (what ``evaluate`` did before issue 14), on ``--baseline-pairs`` pairs (its memory grows
with the pairs, so it cannot run at a million). Prints peak RSS, RSS per pair and pairs/s of each,
and the ratio of their bytes per pair.

Run: python benchmarks/evaluate_scale.py [--pairs 1000000] [--workers 1] [--baseline-pairs 50000]
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import iu_reports, iu_text
from memory import process_rss

from cxreval.testing.results import differing

BASELINE = """
import sys
from cxreval import Evaluator
from cxreval.io import read_pairs
pairs = read_pairs(sys.argv[1], meta_cols=["site"])
Evaluator(workers=1).evaluate(pairs).save(sys.argv[2])
"""


def write_pairs(path: Path, n: int, seed: int = 0) -> None:
    texts = [t for t in (iu_text(r) for r in iu_reports()) if t.strip()]
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "site"])
        for i in range(n):
            w.writerow([f"p{i}", rng.choice(texts), rng.choice(texts), rng.choice(("a", "b", "c"))])


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (Linux /proc)."""
    return sum(process_rss(pid).values())


def run(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak process-tree RSS of a command (which must succeed)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.1)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return seconds, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--baseline-pairs", type=int, default=50_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "pairs.csv", Path(tmp) / "baseline.csv"
        write_pairs(big, args.pairs)
        write_pairs(small, args.baseline_pairs)
        cli = [sys.executable, "-m", "cxreval", "evaluate", "--meta-col", "site", "--workers", str(args.workers)]
        b_sec, b_rss = run([sys.executable, "-c", BASELINE, str(small), str(Path(tmp) / "baseline-out")])
        s_small_sec, s_small_rss = run([*cli, "--pairs", str(small), "--out", str(Path(tmp) / "small-out")])
        s_sec, s_rss = run([*cli, "--pairs", str(big), "--out", str(Path(tmp) / "out")])
        same = not differing(Path(tmp) / "baseline-out", Path(tmp) / "small-out")
    mib = 1024 * 1024
    print(
        f"whole-list path (baseline), {args.baseline_pairs:,} pairs: peak RSS {b_rss / mib:,.0f} MiB "
        f"({b_rss / args.baseline_pairs / 1024:.1f} KiB/pair), {args.baseline_pairs / b_sec:,.0f} pairs/s"
    )
    print(
        f"streamed, {args.baseline_pairs:,} pairs, --workers {args.workers}: peak RSS {s_small_rss / mib:,.0f} MiB, "
        f"{args.baseline_pairs / s_small_sec:,.0f} pairs/s; files identical to the baseline's: {same}"
    )
    print(
        f"streamed, {args.pairs:,} pairs, --workers {args.workers}: peak RSS {s_rss / mib:,.0f} MiB "
        f"(target < 2,048 MiB), {args.pairs / s_sec:,.0f} pairs/s, {s_sec:,.0f} s"
    )
    print(
        f"ratio of peak RSS, baseline at {args.baseline_pairs:,} pairs / streamed at {args.pairs:,} pairs: "
        f"{b_rss / s_rss:.2f}x with {args.pairs / args.baseline_pairs:.0f}x the pairs"
    )


if __name__ == "__main__":
    main()
