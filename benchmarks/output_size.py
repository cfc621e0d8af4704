"""Bytes on disk per pair of a results folder: compact rows, the Parquet twin, full rows, and the
uncompressed ``judgements.jsonl`` of cxreval 0.7 as the baseline, from the same run.

Pairs: IU X-ray reports paired at random (read at run time from ../shared/data, CC BY-NC-ND; the
CSV goes to a temporary folder), ``--pairs`` of them (default 20,000). Each style is the real
command, ``cxreval evaluate --pairs FILE --out DIR --workers 2`` with ``--no-parquet`` (the core
install), the default (the Parquet twin, pyarrow installed) and ``--rows full --no-parquet``. The
baseline is the full rows decompressed: the bytes ``judgements.jsonl`` held up to 0.7. Target: at
most 300 bytes a pair in all, by default in the core install.

Run: python benchmarks/output_size.py [--pairs 20000]
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path

from _data import write_random_pairs

STYLES = {
    "compact (core install)": ["--no-parquet"],
    "compact + judgements.parquet": [],
    "full rows": ["--rows", "full", "--no-parquet"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20_000)
    args = ap.parse_args()
    n = args.pairs
    with tempfile.TemporaryDirectory() as tmp:
        pairs = Path(tmp) / "pairs.csv"
        write_random_pairs(pairs, n, prefix="iu-")
        sizes: dict[str, dict[str, int]] = {}
        for k, (style, extra) in enumerate(STYLES.items()):
            out = Path(tmp) / f"out-{k}"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cxreval",
                    "evaluate",
                    "--pairs",
                    str(pairs),
                    "--out",
                    str(out),
                    "--json",
                    "--workers",
                    "2",
                    *extra,
                ],
                check=True,
                capture_output=True,
            )
            sizes[style] = {p.name: p.stat().st_size for p in out.iterdir() if not p.name.startswith(".")}
        full = Path(tmp) / f"out-{list(STYLES).index('full rows')}"
        legacy = len(gzip.decompress((full / "judgements.jsonl.gz").read_bytes()))
        legacy_total = legacy + sizes["full rows"]["errors.csv"] + sizes["full rows"]["scores.json"]
    print(f"{n:,} random IU X-ray pairs, bytes on disk per pair")
    for style, files in sizes.items():
        total = sum(files.values())
        parts = ", ".join(f"{name} {size / n:,.0f}" for name, size in sorted(files.items()))
        print(f"  {style}: {total / n:,.0f} in all ({parts}); {total / legacy_total:.3f}x the baseline")
    print(
        f"  baseline, cxreval 0.7's uncompressed judgements.jsonl (full rows) with the same errors.csv and "
        f"scores.json: {legacy_total / n:,.0f} (judgements.jsonl {legacy / n:,.0f}); target <= 300 by default"
    )


if __name__ == "__main__":
    main()
