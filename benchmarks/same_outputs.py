"""Are the outputs of this checkout byte-identical to those of another revision?

For refactors that must not change a number: runs the same commands with the code of ``REV`` (a
git worktree in a temporary folder, put first on ``PYTHONPATH``) and with this checkout, then
compares every output file byte for byte, the version string aside (``version:X`` in
signatures, ``"cxreval_version"``). ``result.json``'s volatile fields (timings, created) are
left out, and its other differences are listed with their size in units in the last place.

Commands (IU X-ray text is read at run time from ../shared/data, CC BY-NC-ND, never copied):
- the README example: ``cxreval evaluate --example``;
- ``--pairs N`` pairs of IU X-ray reports (benchmarks/evaluate_scale.py's pairs, seed 0):
  ``cxreval evaluate --pairs FILE --meta-col site --workers 2`` (the streamed path), and the
  first 20,000 through ``Evaluator().evaluate(pairs).save(...)`` (the whole-list path);
- the ReXrank IU X-ray bench: ``cxreval bench benchmarks/configs/rexrank_iu_test.yaml``.

Run: python benchmarks/same_outputs.py REV [--pairs 100000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from evaluate_scale import write_pairs

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = re.compile(rb'version:\d+\.\d+\.\d+|"cxreval_version": "\d+\.\d+\.\d+"')
WHOLE_LIST = """
import sys
from cxreval import Evaluator
from cxreval.io import read_pairs
Evaluator().evaluate(read_pairs(sys.argv[1], meta_cols=["site"])[:20000]).save(sys.argv[2])
"""


def run_all(src: Path, out: Path, pairs: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(src), "CXREVAL_DATA_DIR": str(ROOT.parent / "shared" / "data")}
    cx = [sys.executable, "-m", "cxreval"]
    steps = [
        [*cx, "evaluate", "--example", "--out", str(out / "example")],
        [*cx, "evaluate", "--pairs", str(pairs), "--meta-col", "site", "--out", str(out / "pairs"), "--workers", "2"],
        [sys.executable, "-c", WHOLE_LIST, str(pairs), str(out / "whole-list")],
        [*cx, "bench", "benchmarks/configs/rexrank_iu_test.yaml", "--out", str(out / "bench"), "--no-progress"],
    ]
    for step in steps:
        subprocess.run(step, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def ulps(a: float, b: float) -> float:
    return abs(a - b) / math.ulp(max(abs(a), abs(b))) if a != b else 0.0


def json_diffs(a: object, b: object, path: str = "") -> list[str]:
    """Differences of two JSON documents, timings, creation time and version aside."""
    if path in ("/timings", "/created", "/cxreval_version"):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(a.keys() | b.keys())
            for d in (json_diffs(a.get(k), b.get(k), f"{path}/{k}") if k in a and k in b else [f"{path}/{k}: only one"])
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in json_diffs(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and a != b:
        return [f"{path}: {a!r} -> {b!r} ({ulps(a, b):.0f} ulp)"]
    return (
        []
        if a == b
        or (isinstance(a, str) and isinstance(b, str) and VOLATILE.sub(b"", a.encode()) == VOLATILE.sub(b"", b.encode()))
        else [f"{path}: {a!r} -> {b!r}"]
    )


def compare(before: Path, after: Path) -> int:
    differing = 0
    for path in sorted(p for p in before.rglob("*") if p.is_file()):
        rel = path.relative_to(before)
        if rel.name in ("cache.sqlite", "report.html") or rel.name.startswith(".cxreval-outputs"):
            continue  # the answer store, the page (it embeds result.json), the output manifests
        other = after / rel
        if rel.name == "result.json":
            diffs = json_diffs(json.loads(path.read_text()), json.loads(other.read_text()))
            print(f"{'same' if not diffs else 'DIFF'}  {rel}" + "".join(f"\n      {d}" for d in diffs))
        else:
            same = other.is_file() and VOLATILE.sub(b"", path.read_bytes()) == VOLATILE.sub(b"", other.read_bytes())
            print(f"{'same' if same else 'DIFF'}  {rel}")
            diffs = [] if same else [str(rel)]
        differing += bool(diffs)
    return differing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the revision to compare with (a commit, tag or branch)")
    ap.add_argument("--pairs", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(t / "base"), args.rev], cwd=ROOT, check=True, capture_output=True
        )
        try:
            write_pairs(t / "pairs.csv", args.pairs)
            run_all(t / "base" / "src", t / "before", t / "pairs.csv")
            run_all(ROOT / "src", t / "after", t / "pairs.csv")
            n = compare(t / "before", t / "after")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(t / "base")], cwd=ROOT, check=False)
    print(f"{n} file(s) differ from {args.rev}")


if __name__ == "__main__":
    main()
