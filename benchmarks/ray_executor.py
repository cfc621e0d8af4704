"""``cxreval evaluate --executor ray`` against ``--workers 2`` (local processes) on the same pairs.

Pairs: IU X-ray reports (read at run time, CC BY-NC-ND) paired at random, N of them (default
20,000). Both runs take the path the command takes (:func:`cxreval.streaming.evaluate_to`),
each with a fresh evaluator. The Ray run starts a local cluster of 2 CPUs in this process first
(its start-up is timed apart, and also reported with the run, as a one-off command pays it);
then the chunks go to 2 actors. Prints both wall times, the throughput ratio (Ray over local)
and checks that both runs wrote byte-identical files. Needs the extra: pip install 'cxreval[ray]'.

Run: python benchmarks/ray_executor.py [--pairs N] [--workers 2]
"""

from __future__ import annotations

import argparse
import logging
import random
import tempfile
import time
from pathlib import Path

from _data import iu_reports, iu_text

from cxreval import Evaluator
from cxreval.io import ReportPair
from cxreval.streaming import FILES, evaluate_to


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    import ray

    texts = [t for t in (iu_text(r) for r in iu_reports()) if t.strip()]
    rng = random.Random(0)
    pairs = [ReportPair(pair_id=str(i), reference=rng.choice(texts), candidate=rng.choice(texts)) for i in range(args.pairs)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        evaluate_to(Evaluator(workers=args.workers), Path(tmp) / "local", pairs, total=len(pairs))
        local = time.perf_counter() - t0
        t0 = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            evaluate_to(Evaluator(workers=args.workers), Path(tmp) / "ray", pairs, total=len(pairs), executor="ray")
            on_ray = time.perf_counter() - t0
        finally:
            ray.shutdown()
        same = all((Path(tmp) / "local" / f).read_bytes() == (Path(tmp) / "ray" / f).read_bytes() for f in FILES)
    assert same, "the two runs wrote different files"
    n = args.pairs
    print(
        f"{n:,} IU X-ray pairs, {args.workers} workers: local processes {local:.1f} s ({n / local:,.0f} pairs/s); "
        f"Ray actors {on_ray:.1f} s ({n / on_ray:,.0f} pairs/s) after a {start:.1f} s cluster start; "
        f"throughput Ray / local {local / on_ray:.2f}x ({local / (on_ray + start):.2f}x counting the start); "
        "files identical"
    )


if __name__ == "__main__":
    main()
