"""Where ``cxreval evaluate``'s CPU goes: the parent's and the workers' CPU per pair, the speed-up it
allows at more workers, and ``--workers 2`` against ``--workers 1``.

Pairs: IU X-ray reports paired at random (read at run time from ../shared/data, CC BY-NC-ND; the
CSV goes to a temporary folder), ``--pairs`` of them (default 100,000). Each run is the real
command, ``cxreval evaluate --pairs FILE --out DIR --workers W``, in a child process that reports
its own CPU time (the parent: reading, checking, writing) and its reaped children's (the workers)
from ``getrusage``.

1. Three alternating rounds of ``--workers 1`` and ``--workers 2``: wall times, and the median of
   their ratio (target >= 1.7 on this 2-core machine).
2. From the ``--workers 2`` runs, the parent's and the workers' CPU per pair (and the parent's in a
   run with ``--no-parquet``, as the core install runs: the Parquet twin is encoded in the parent
   when the run ends), and the speed-up over
   one worker they allow at 4, 8, 16 and 64 workers: one worker takes its CPU per pair; W workers
   take the longer of the parent's CPU per pair and the workers' divided by W. Per pair means the
   slope: the CPU of a run of a tenth of the pairs (the median of as many runs as rounds) is taken
   off, and with it the start-up (imports, the engine, the pool), which a pair does not cost.
3. The baseline, in the same run: the path of cxreval 0.7.0 before the file was cut into chunks
   workers read (the file checked whole in the parent, then read again there and sent to the
   workers pair by pair: :meth:`PairStream.check` and :func:`cxreval.streaming.evaluate_stream`),
   ``--workers 2``: its parent CPU per pair. The files of both paths must hold the same content
   (``judgements.jsonl.gz`` by its rows: the two paths cut it into gzip members differently).

Run: python benchmarks/evaluate_cpu.py [--pairs 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import write_random_pairs

from cxreval.testing.results import differing

#: The child: the command (or the in-order path), then its CPU time and its workers' as JSON.
CHILD = """
import json, resource, sys
mode, args = sys.argv[1], sys.argv[2:]
if mode == "command":
    from cxreval.cli import app
    try:
        app(args, standalone_mode=False)
    except SystemExit:
        pass
else:  # the in-order path: check the file whole, then read it again and send the pairs out
    from pathlib import Path
    from cxreval import Evaluator
    from cxreval.io import PairStream
    from cxreval.streaming import evaluate_stream
    pairs, out, workers = args[0], Path(args[1]), int(args[2])
    engine = Evaluator(workers=workers).judge_engine
    stream = PairStream(pairs)
    stream.check()
    evaluate_stream(engine, stream, out, workers=workers, total=stream.n_pairs, expected=stream.systems,
                    check_unique=False)
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"parent": me.ru_utime + me.ru_stime, "workers": kids.ru_utime + kids.ru_stime}))
"""


def slope(big: dict[str, float], small: dict[str, float], pairs: int) -> dict[str, float]:
    """CPU microseconds per pair between a run and one of fewer pairs (``pairs`` fewer)."""
    return {k: (big[k] - small[k]) * 1e6 / pairs for k in big}


def run(mode: str, args: list[str]) -> tuple[float, dict[str, float]]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{mode} {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.pairs
    with tempfile.TemporaryDirectory() as tmp:
        pairs, tenth = Path(tmp) / "pairs.csv", Path(tmp) / "tenth.csv"
        write_random_pairs(pairs, n)
        write_random_pairs(tenth, n // 10, seed=1)
        smalls = [
            run("command", ["evaluate", "--pairs", str(tenth), "--out", str(Path(tmp) / f"tenth-{r}"), "--workers", "2"])[1]
            for r in range(args.rounds)
        ]
        small = {k: statistics.median(c[k] for c in smalls) for k in smalls[0]}
        small_baselines = [
            run("in-order", [str(tenth), str(Path(tmp) / f"tenth-baseline-{r}"), "2"])[1] for r in range(args.rounds)
        ]
        small_baseline = {k: statistics.median(c[k] for c in small_baselines) for k in small_baselines[0]}
        walls: dict[int, list[float]] = {1: [], 2: []}
        cpu: dict[int, list[dict[str, float]]] = {1: [], 2: []}
        for r in range(args.rounds):
            for workers in (1, 2):
                out = Path(tmp) / f"out-{workers}-{r}"
                wall, used = run("command", ["evaluate", "--pairs", str(pairs), "--out", str(out), "--workers", str(workers)])
                walls[workers].append(wall)
                cpu[workers].append(used)
        # the core install (no pyarrow) writes no judgements.parquet: the parent's CPU without it
        bare = slope(
            run(
                "command", ["evaluate", "--pairs", str(pairs), "--out", str(Path(tmp) / "bare"), "--workers", "2", "--no-parquet"]
            )[1],
            run(
                "command",
                ["evaluate", "--pairs", str(tenth), "--out", str(Path(tmp) / "bare-tenth"), "--workers", "2", "--no-parquet"],
            )[1],
            n - n // 10,
        )
        b_wall, b_cpu = run("in-order", [str(pairs), str(Path(tmp) / "baseline"), "2"])
        same = not differing(Path(tmp) / "out-2-0", Path(tmp) / "baseline") and not differing(
            Path(tmp) / "out-1-0", Path(tmp) / "baseline"
        )
    us, fewer = 1e6 / n, n - n // 10
    ratios = [a / b for a, b in zip(walls[1], walls[2])]
    print(f"{n:,} random IU X-ray pairs; {args.rounds} alternating rounds")
    for w in (1, 2):
        print(
            f"  --workers {w}: {', '.join(f'{x:.1f}' for x in walls[w])} s "
            f"({', '.join(f'{n / x:,.0f}' for x in walls[w])} pairs/s)"
        )
    print(
        f"--workers 2 / --workers 1: median {statistics.median(ratios):.2f}x "
        f"({', '.join(f'{x:.2f}' for x in ratios)}; target >= 1.7)"
    )
    one = statistics.median(c["parent"] + c["workers"] for c in cpu[1]) * us
    per = [slope(c, small, fewer) for c in cpu[2]]
    parent = statistics.median(c["parent"] for c in per)
    workers = statistics.median(c["workers"] for c in per)
    print(
        f"CPU per pair: one worker {one:.0f} us (start-up included); with 2 workers the parent {parent:.1f} us "
        f"(target <= 5) and the workers {workers:.0f} us in all"
    )
    print(
        f"  the parent without judgements.parquet (--no-parquet, as the core install runs): {bare['parent']:.1f} us "
        f"(the Parquet twin is encoded in the parent when the run ends)"
    )
    print(
        "projected speed-up over one worker: "
        + ", ".join(f"{w} workers {one / max(parent, workers / w):.1f}x" for w in (4, 8, 16, 64))
        + f" (the parent alone would allow {one / parent:.0f}x)"
    )
    base = slope(b_cpu, small_baseline, fewer)
    print(
        f"baseline, the in-order path of 0.7.0 (checked whole, read and sent out by the parent), --workers 2: "
        f"{b_wall:.1f} s ({n / b_wall:,.0f} pairs/s); parent {base['parent']:.1f} us per pair, workers "
        f"{base['workers']:.0f} us; parent CPU now / then {parent / base['parent']:.2f}x; files identical to the "
        f"command's: {same}"
    )


if __name__ == "__main__":
    main()
