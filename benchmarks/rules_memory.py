"""Peak memory of the rule engine on a report with no full stop, against a normal workload.

One child process (so the figures are the engine's alone), started from this script:
1. loads the engine and reads one short report: the process's starting peak RSS;
2. baseline: extracts every IU X-ray report (findings + impression, 3,826 with text), keeping
   the extractions, as an evaluation's cache does: the peak RSS of a normal workload;
3. extracts one report of ``--size`` characters (default 1 MB) with no full stop: the IU reports
   joined, with every "." "!" "?" (and ":", so that no section title splits it) turned into ",":
   one section whose one "sentence" runs the whole report.
Peak RSS (``ru_maxrss``) only grows, which is why the baseline runs first. The result: the peak
after step 3 in MiB, its ratio to the baseline's peak, and what step 3 added, per MB of text.

``--limit-mib`` caps the child's address space: an engine that copies the sentence into every
mention (cxreval before the offset-based evidence) then fails with MemoryError instead of
swapping or taking the machine down.

Run: python benchmarks/rules_memory.py [--size 1000000] [--limit-mib 4096]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import resource
import time

from _data import iu_reports, iu_text
from iu_throughput import _child, _peak_mib


def run(texts: list[str], size: int, limit_mib: int, out: mp.Queue) -> None:
    if limit_mib:
        limit = limit_mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from cxreval.extract.rules import RuleExtractor

    extractor = RuleExtractor()
    extractor.extract("Findings: No pleural effusion.")
    start = _peak_mib()
    kept = [extractor.extract(t) for t in texts]
    baseline = _peak_mib()
    joined = re.sub(r"[.!?:]", ",", " ".join(texts))
    report = "Findings: " + (joined * (size // len(joined) + 1))[:size]
    del joined
    t0 = time.perf_counter()
    try:
        extraction = extractor.extract(report)
    except MemoryError:
        extraction = None  # reported once the exception's frames (and their memory) are gone
    if extraction is None:
        out.put({"start": start, "baseline": baseline, "reports": len(kept), "error": "MemoryError"})
        return
    elapsed = time.perf_counter() - t0
    longest = max((len(m.sentence) for m in extraction.mentions), default=0)
    out.put(
        {
            "start": start,
            "baseline": baseline,
            "reports": len(kept),
            "peak": _peak_mib(),
            "seconds": elapsed,
            "mentions": len(extraction.mentions),
            "longest": longest,
            "chars": len(report),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000, help="characters of the report with no full stop")
    ap.add_argument("--limit-mib", type=int, default=0, help="cap the child's address space (0: none)")
    args = ap.parse_args()
    texts = [t for t in (iu_text(r) for r in iu_reports()) if t]
    r = _child(run, texts, args.size, args.limit_mib)
    print(f"engine loaded: peak RSS {r['start']:.0f} MiB")
    print(
        f"baseline: {r['reports']} IU X-ray reports extracted and kept: peak RSS {r['baseline']:.0f} MiB "
        f"(+{r['baseline'] - r['start']:.0f} MiB)"
    )
    if "error" in r:
        print(f"report of {args.size:,} characters, no full stop: {r['error']} under a {args.limit_mib} MiB limit")
        return
    added = r["peak"] - r["baseline"]
    print(
        f"report of {r['chars']:,} characters, no full stop: {r['mentions']:,} mentions in {r['seconds']:.2f} s, "
        f"longest evidence {r['longest']} characters"
    )
    print(
        f"peak RSS {r['peak']:.0f} MiB = {r['peak'] / r['baseline']:.2f}x the baseline's peak; "
        f"+{added:.0f} MiB over it = {added / (r['chars'] / 1e6):.0f} MiB per MB of text (target: peak < 500 MiB)"
    )


if __name__ == "__main__":
    main()
