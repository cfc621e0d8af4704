"""Output folders shared by commands and by runs (found by a review of the whole-run change):
each tool replaces only what it wrote, and two runs never write into one folder at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.io import ReportPair
from cxreval.io.writers import OutputError, OutputRun

PAIRS = [ReportPair(pair_id="a", reference="Small left pleural effusion.", candidate="No pleural effusion.")]


def test_evaluate_results_and_bench_results_share_a_folder(tmp_path: Path) -> None:
    """bench's files (its own manifest) survive an evaluate save into the same folder, and the
    other way round: each command removes only entries of its own earlier run."""
    with OutputRun("bench") as run:
        folder = run.folder(tmp_path)
        folder.write_text("result.json", "{}\n", last=True)
        folder.write_text("leaderboards.csv", "x\n")
    Evaluator().evaluate(PAIRS).save(tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"result.json", "leaderboards.csv", "errors.csv", "judgements.jsonl.gz", "scores.json"} <= names
    with OutputRun("bench") as run:  # a bench rerun writes only result.json: its own leaderboards.csv goes
        run.folder(tmp_path).write_text("result.json", "{}\n", last=True)
    names = {p.name for p in tmp_path.iterdir()}
    assert "leaderboards.csv" not in names and {"errors.csv", "scores.json", "result.json"} <= names
    assert json.loads((tmp_path / ".cxreval-outputs-bench.json").read_text())["entries"] == ["result.json"]


def test_a_second_run_into_a_folder_in_use_is_refused(tmp_path: Path) -> None:
    with OutputRun() as first:
        first.folder(tmp_path).write_text("a.txt", "first\n")
        with pytest.raises(OutputError, match="another cxreval run is writing into this folder"):
            with OutputRun() as second:
                second.folder(tmp_path).write_text("a.txt", "second\n")
    assert (tmp_path / "a.txt").read_text() == "first\n"
    assert not (tmp_path / OutputRun.LOCK).exists()  # the claim ends with the run


def test_the_claim_of_a_process_that_died_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True, timeout=600
    ).stdout.strip()
    (tmp_path / OutputRun.LOCK).write_text(dead)  # left by a run killed with SIGKILL
    with OutputRun() as run:
        run.folder(tmp_path).write_text("a.txt", "taken over\n")
    assert (tmp_path / "a.txt").read_text() == "taken over\n"
