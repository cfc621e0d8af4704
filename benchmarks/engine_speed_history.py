"""Reports per second of the rule engine at other git revisions, against the working tree's, same run.

A throughput target such as issue 13's "the rule engine stays >= 4,000 reports/s" was set on the
day it was filed, on that day's machine. This 2-core box runs the same code 25-50 % faster or
slower from one hour to the next, so an absolute figure measured today says little about whether
the engine got slower. This script answers that question directly: it extracts ``src/`` of each
given revision (``git archive``, into a temporary folder), then reads the findings + impression of
every IU X-ray report (``../shared/data``, CC BY-NC-ND, read at run time) with each engine in a
fresh child process (a fresh process is the cold start a user gets: empty caches, no warm heap),
one engine after the other in rounds, and prints each one's best and median rate over the rounds
and its ratio to the working tree's in the same rounds.

Each child builds a default ``RuleExtractor()`` (as ``iu_throughput.py`` does) and times one pass
over the reports, counting mentions (so every extraction is used).

Run: python benchmarks/engine_speed_history.py 7cca7e8 [REV ...] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import sys, time
sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})
from _data import iu_reports, iu_text
texts = [t for t in (iu_text(r) for r in iu_reports()) if t]
from cxreval.extract.rules import RuleExtractor
ex = RuleExtractor()
t0 = time.perf_counter()
n = sum(len(ex.extract(t).mentions) for t in texts)
print(len(texts) / (time.perf_counter() - t0), len(texts), ex.signature)
"""


def export_src(rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev`` unpacked under ``into``; returns the folder to import from."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "src"], check=True, capture_output=True).stdout
    dest = into / rev
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"


def one_pass(src: Path) -> tuple[float, str]:
    code = _CHILD.format(src=str(src), bench=str(REPO / "benchmarks"))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    rate, _, signature = out.strip().splitlines()[-1].split(" ", 2)
    return float(rate), signature


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("revisions", nargs="+", help="git revisions whose engine to time (e.g. 7cca7e8)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engines = {"working tree": REPO / "src"}
        for rev in args.revisions:
            engines[rev] = export_src(rev, Path(tmp))
        rates: dict[str, list[float]] = {name: [] for name in engines}
        signatures: dict[str, str] = {}
        for _ in range(args.rounds):
            for name, src in engines.items():
                rate, signatures[name] = one_pass(src)
                rates[name].append(rate)
    ours = rates["working tree"]
    print(f"IU X-ray findings + impression, one pass per fresh process, {args.rounds} rounds (engines alternate)")
    for name, values in rates.items():
        ratio = statistics.median(o / v for o, v in zip(ours, values))
        print(
            f"  {name:14s} {signatures[name]:24s} best {max(values):7,.0f} median {statistics.median(values):7,.0f} "
            f"reports/s; working tree / this, median of rounds: {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
