"""``evaluate --workers``: the rule engine in several processes gives the very same results
(issue 14, item 2), through the pool design bench uses (:mod:`cxreval.parallel`)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import cxreval
from cxreval.cli import example_path
from cxreval.engines import PARALLEL_MIN_PAIRS
from cxreval.io import ReportPair, read_pairs
from cxreval.testing.results import differing


def _pairs(n: int) -> list[ReportPair]:
    ex = read_pairs(example_path())
    return [
        ReportPair(pair_id=f"p{i}", reference=ex[i % len(ex)].reference, candidate=ex[(i * 7 + i // len(ex)) % len(ex)].candidate)
        for i in range(n)
    ]


def test_two_workers_give_the_same_rows_and_scores() -> None:
    pairs = _pairs(PARALLEL_MIN_PAIRS + 150)
    one = cxreval.evaluate(pairs, workers=1)
    two = cxreval.evaluate(pairs, workers=2)
    assert [r.model_dump() for r in two.judgements] == [r.model_dump() for r in one.judgements]
    assert two.to_dict() == one.to_dict() and str(two.signature) == str(one.signature)
    assert two.errors.equals(one.errors)


def test_cli_workers_writes_identical_outputs(tmp_path: Path) -> None:
    pairs = _pairs(PARALLEL_MIN_PAIRS + 10)
    src = tmp_path / "pairs.csv"
    with src.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate"])
        w.writerows((p.pair_id, p.reference, p.candidate) for p in pairs)
    outs = {}
    for n in ("1", "2"):
        out = tmp_path / f"w{n}"
        done = subprocess.run(
            [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(src), "--out", str(out), "--workers", n, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        outs[n] = out
    assert not differing(outs["1"], outs["2"], ("judgements.jsonl.gz", "errors.csv", "judgements.parquet"))
    s1, s2 = (json.loads((outs[n] / "scores.json").read_text()) for n in ("1", "2"))
    assert s1 == s2


def test_bad_workers_are_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="workers"):
        cxreval.Evaluator(workers=0)


def _no_setup() -> None:
    return None


def _sigterm_disposition(_: object) -> object:
    import signal

    return signal.getsignal(signal.SIGTERM)


def test_workers_die_on_sigterm_even_under_a_parents_handler() -> None:
    """A stream installs a SIGTERM handler (cleanup, then SystemExit); pool workers forked under it
    inherited it, so Pool.terminate's SIGTERM could leave a worker blocked on the task queue's lock
    and the parent waiting for it forever. Workers keep the default: SIGTERM kills them."""
    import signal

    from cxreval.parallel import worker_pool

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with worker_pool(2, _no_setup, ()) as pool:  # worker_pool itself sees to it, whatever the initializer
            assert pool.map(_sigterm_disposition, range(4)) == [signal.SIG_DFL] * 4
        assert signal.getsignal(signal.SIGTERM) is stop  # the parent's own handler is left as it was
    finally:
        signal.signal(signal.SIGTERM, previous)
