"""Instructions the rule engine executes, at other git revisions against the working tree's.

Wall-clock rates on this shared 2-core box move 25-50 % from one hour to the next
(``engine_speed_history.py`` alternates engines within one run to cancel that out); an
instruction count does not move. For each engine (the working tree's ``src/`` and ``src/`` of each
given revision, unpacked with ``git archive``) this runs two child processes under valgrind's
cachegrind: one that builds ``RuleExtractor()`` and loads the IU X-ray texts (``start``), and one
that also reads every report's findings + impression once (``start + pass``). Their difference is
the reading pass alone. It prints each count and the working tree's ratio to each revision's.

Needs valgrind (Debian: ``apt-get install valgrind``); each child takes one to three minutes under it.
IU X-ray text (CC BY-NC-ND) is read at run time from ``../shared/data``.

Run: python benchmarks/engine_instructions.py HEAD [REV ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine_speed_history import REPO, export_src

_CHILD = r"""
import sys
sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})
from _data import iu_reports, iu_text
texts = [t for t in (iu_text(r) for r in iu_reports()) if t]
from cxreval.extract.rules import RuleExtractor
ex = RuleExtractor()
n = sum(len(ex.extract(t).mentions) for t in texts) if {read} else 0
print(n, ex.signature)
"""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(src: Path, read: bool, out: Path) -> int:
    """Instructions of one child process under cachegrind (``read``: with the reading pass)."""
    code = _CHILD.format(src=str(src), bench=str(REPO / "benchmarks"), read=read)
    # one string hash seed for every child, and no address randomisation where setarch can turn it
    # off (objects hashed by address): set and dict orders, and so the work, are the same each run
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    fixed = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
    done = subprocess.run(
        [*fixed, "valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    found = _REFS.search(done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("revisions", nargs="+", help="git revisions whose engine to count (e.g. HEAD)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        engines = {"working tree": REPO / "src"}
        engines.update({rev: export_src(rev, Path(tmp)) for rev in args.revisions})
        jobs = [(name, read) for name in engines for read in (False, True)]
        with ThreadPoolExecutor(max_workers=2) as pool:  # two children at a time: this box has two cores
            counts = dict(
                zip(
                    jobs,
                    pool.map(lambda job: instructions(engines[job[0]], job[1], Path(tmp) / f"cg.{len(job[0])}.{job[1]}"), jobs),
                )
            )
    start = {name: counts[(name, False)] for name in engines}
    passes = {name: counts[(name, True)] - start[name] for name in engines}
    ours = "working tree"
    print(
        "Instructions (valgrind cachegrind): RuleExtractor() + loading the texts, then one pass over the "
        "findings + impression of every IU X-ray report"
    )
    for name in engines:
        print(
            f"  {name:14s} start {start[name] / 1e9:6.3f} G  pass {passes[name] / 1e9:6.3f} G  "
            f"working tree / this: start {start[ours] / start[name]:.3f}x, pass {passes[ours] / passes[name]:.3f}x, "
            f"both {counts[(ours, True)] / counts[(name, True)]:.3f}x"
        )


if __name__ == "__main__":
    main()
