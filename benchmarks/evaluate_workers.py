"""``cxreval evaluate --workers 2`` against ``--workers 1`` on the same pairs, in one process.

Pairs: IU X-ray reports (read at run time, CC BY-NC-ND) paired at random, N of them (default
20,000; the issue's figure is for 100,000: ``--pairs 100000``). Prints both wall times and the
ratio (issue 14 target >= 1.7 on 100k pairs), and checks that both runs give the same scores.

Run: python benchmarks/evaluate_workers.py [--pairs N]
"""

from __future__ import annotations

import argparse
import random
import time

from _data import iu_reports, iu_text

import cxreval
from cxreval.io import ReportPair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20_000)
    args = ap.parse_args()
    texts = [iu_text(r) for r in iu_reports()]
    rng = random.Random(0)
    pairs = [ReportPair(pair_id=str(i), reference=rng.choice(texts), candidate=rng.choice(texts))
             for i in range(args.pairs)]
    seconds = {}
    scores = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        result = cxreval.evaluate(pairs, workers=workers)
        seconds[workers] = time.perf_counter() - t0
        scores[workers] = result.to_dict()
    assert scores[1] == scores[2], "the two runs differ"
    print(f"{args.pairs:,} IU X-ray pairs: --workers 1 {seconds[1]:.1f} s ({args.pairs / seconds[1]:,.0f} pairs/s), "
          f"--workers 2 {seconds[2]:.1f} s ({args.pairs / seconds[2]:,.0f} pairs/s): ratio {seconds[1] / seconds[2]:.2f}x "
          "(target >= 1.7 at 100k pairs); scores identical")


if __name__ == "__main__":
    main()
