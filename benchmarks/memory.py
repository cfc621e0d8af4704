"""Memory on new text: the bounded caches (cxreval.caches) against no cache, in the same run.

What a model writes is new text: recombined sentences with new words in them. Two measurements:

1. ``--texts`` distinct reports (default 1,000,000) through ``Evaluator().extract`` in a loop that
   keeps no result, one child process each: with the package's caches (their default budgets),
   and the baseline, the same loop with the extractor's caches off (``cache_mib=0``): the memory of
   the reading itself. Prints each child's peak RSS (``ru_maxrss``), their difference (what the
   caches hold at most) and texts/s. Target: the cached run under 500 MiB.
2. ``--pairs`` pairs (default 200,000) whose candidates are all new texts, through the real command
   ``cxreval evaluate --workers W``; the process tree's resident memory (parent and workers) is
   sampled every 0.1 s from /proc. Prints the tree's peak, each worker's peak, and the bytes on
   disk per pair of the results folder. Target: each worker at most 250 MiB.

A text: three to six IU X-ray sentences (findings and impression, read at run time from
../shared/data, CC BY-NC-ND; nothing is written outside a temporary folder), shuffled, with a
unique token ("case 123456") put into one of them, so that sentence, its section and the report
are new while the other sentences repeat, as a model's do.

Run: python benchmarks/memory.py [--texts 1000000] [--pairs 200000] [--workers 2] [--skip-texts]
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _data import iu_reports, iu_text

MIB = 1024 * 1024


def sentences() -> list[str]:
    """The distinct sentences of the IU X-ray reports' findings and impressions."""
    out: dict[str, None] = {}
    for row in iu_reports():
        for part in ("findings", "impression"):
            for s in re.split(r"(?<=\.)\s+", (row.get(part) or "").strip()):
                if len(s) > 3:
                    out[s] = None
    return list(out)


def new_text(pool: list[str], rng: random.Random, i: int) -> str:
    """Three to six sentences of ``pool`` with a unique token in one of them."""
    picked = rng.sample(pool, rng.randint(3, 6))
    k = rng.randrange(len(picked))
    picked[k] = picked[k].rstrip(".") + f" case {i}."
    return "Findings: " + " ".join(picked)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _extract_loop(n: int, cache_mib: float | None, out: mp.Queue) -> None:
    """Child: ``n`` new texts through an evaluator's ``extract``, keeping no result."""
    from cxreval import Evaluator

    ev = Evaluator()
    if cache_mib is not None:  # the baseline: the same evaluator, its extractor's caches off
        from cxreval.extract.rules import RuleExtractor

        ev.judge_engine.extractor = RuleExtractor(ev.ontology, ev.judge_engine.extractor.rules, cache_mib=cache_mib)
    pool, rng = sentences(), random.Random(0)
    ev.extract(new_text(pool, rng, -1))
    start = _peak_mib()
    t0 = time.perf_counter()
    for i in range(n):
        ev.extract(new_text(pool, rng, i))
    out.put((start, _peak_mib(), n / (time.perf_counter() - t0)))


def extract_figures(n: int) -> None:
    ctx = mp.get_context("spawn")
    results = {}
    for name, cache_mib in (("caches on (default budgets)", None), ("caches off (baseline)", 0.0)):
        q: mp.Queue = ctx.Queue()
        p = ctx.Process(target=_extract_loop, args=(n, cache_mib, q))
        p.start()
        results[name] = q.get()
        p.join()
    for name, (start, peak, rate) in results.items():
        print(
            f"{n:,} new texts through Evaluator().extract, {name}: peak RSS {peak:,.0f} MiB "
            f"(after start-up {start:,.0f}), {rate:,.0f} texts/s"
        )
    on, off = results["caches on (default budgets)"], results["caches off (baseline)"]
    print(
        f"the caches hold at most {on[1] - off[1]:,.0f} MiB more than no cache (peak {on[1]:,.0f} MiB, "
        f"target < 500); speed with / without caches {on[2] / off[2]:.2f}x"
    )


def process_rss(pid: int) -> dict[int, int]:
    """Resident bytes of a process and each descendant (Linux /proc)."""
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        out[p] = int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", encoding="ascii") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return out


def evaluate_figures(n: int, workers: int) -> None:
    pool, rng = sentences(), random.Random(1)
    refs = [t for t in (iu_text(r) for r in iu_reports()) if t.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        pairs, out = Path(tmp) / "pairs.csv", Path(tmp) / "out"
        with pairs.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "reference", "candidate"])
            for i in range(n):
                w.writerow([f"p{i}", rng.choice(refs), new_text(pool, rng, i)])
        cmd = [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(pairs), "--out", str(out), "--workers", str(workers)]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        tree = 0
        each: dict[int, int] = {}
        while proc.poll() is None:
            rss = process_rss(proc.pid)
            tree = max(tree, sum(rss.values()))
            for p, b in rss.items():
                each[p] = max(each.get(p, 0), b)
            time.sleep(0.1)
        seconds = time.perf_counter() - t0
        if proc.returncode:
            sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        disk = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    parent = each.pop(proc.pid, 0)
    workers_peak = sorted(each.values(), reverse=True)
    print(
        f"cxreval evaluate, {n:,} pairs with all-new candidates, --workers {workers}: tree peak RSS "
        f"{tree / MIB:,.0f} MiB; parent {parent / MIB:,.0f} MiB; workers "
        f"{', '.join(f'{b / MIB:,.0f}' for b in workers_peak[:workers])} MiB (target <= 250 each); "
        f"{disk / n:,.0f} bytes on disk per pair; {n / seconds:,.0f} pairs/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-texts", action="store_true", help="only the evaluate measurement")
    ap.add_argument("--skip-pairs", action="store_true", help="only the extract loop")
    args = ap.parse_args()
    if not args.skip_texts:
        extract_figures(args.texts)
    if not args.skip_pairs:
        evaluate_figures(args.pairs, args.workers)


if __name__ == "__main__":
    main()
