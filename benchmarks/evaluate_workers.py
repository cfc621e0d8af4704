"""``cxreval evaluate --workers 2`` against ``--workers 1`` on the same pairs, in one process.

Pairs: IU X-ray reports (read at run time, CC BY-NC-ND) paired at random, N of them (default
20,000; the issue's figure is for 100,000: ``--pairs 100000``). Both runs take the path the
command takes (:func:`cxreval.streaming.evaluate_to`: chunks judged and written as they come),
each with a fresh evaluator so neither starts with the other's extractions. Prints both wall
times and the ratio (issue 14 target >= 1.7 on 100k pairs), and checks that both runs wrote
byte-identical files. ``--cpu-baseline`` also times a pure-CPU task (no cxreval) on 1 and 2
processes, the most this machine can give.

Run: python benchmarks/evaluate_workers.py [--pairs N] [--cpu-baseline]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

from _data import iu_reports, iu_text

from cxreval import Evaluator
from cxreval.io import ReportPair
from cxreval.streaming import FILES, evaluate_to


def _spin(n: int) -> int:
    return sum(i * i for i in range(n))


def cpu_ratio() -> float:
    """Wall time of 8 pure-Python tasks on 1 process over that on 2."""
    seconds = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        with Pool(workers) as pool:
            pool.map(_spin, [3_000_000] * 8)
        seconds[workers] = time.perf_counter() - t0
    return seconds[1] / seconds[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--cpu-baseline", action="store_true")
    args = ap.parse_args()
    texts = [t for t in (iu_text(r) for r in iu_reports()) if t.strip()]
    rng = random.Random(0)
    pairs = [ReportPair(pair_id=str(i), reference=rng.choice(texts), candidate=rng.choice(texts)) for i in range(args.pairs)]
    seconds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2):
            t0 = time.perf_counter()
            evaluate_to(Evaluator(workers=workers), Path(tmp) / str(workers), pairs, total=len(pairs))
            seconds[workers] = time.perf_counter() - t0
        same = all((Path(tmp) / "1" / f).read_bytes() == (Path(tmp) / "2" / f).read_bytes() for f in FILES)
    assert same, "the two runs wrote different files"
    print(
        f"{args.pairs:,} IU X-ray pairs: --workers 1 {seconds[1]:.1f} s ({args.pairs / seconds[1]:,.0f} pairs/s), "
        f"--workers 2 {seconds[2]:.1f} s ({args.pairs / seconds[2]:,.0f} pairs/s): ratio {seconds[1] / seconds[2]:.2f}x "
        "(target >= 1.7 at 100k pairs); files identical"
    )
    if args.cpu_baseline:
        print(f"pure-CPU task on this machine, 2 processes vs 1: {cpu_ratio():.2f}x (the ceiling for any program)")


if __name__ == "__main__":
    main()
