"""``cxreval baseline``: a built-in baseline's reports as a candidates file evaluate reads."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxreval.cli import app
from cxreval.datasets.baselines import baseline_reports
from tests.conftest import shared_data_path

DATA = shared_data_path()
IU_TEST = DATA / "rexrank-iu" / "ReXRank_IUXray_test.json"
needs_data = pytest.mark.skipif(not (DATA / "iu-xray" / "indiana_reports.csv").exists(), reason="../shared/data not available")


@needs_data
def test_the_file_holds_the_baselines_reports_for_every_study(tmp_path: Path) -> None:
    out = tmp_path / "oracle.csv"
    args = ["baseline", "retrieval-oracle", "--refs", str(IU_TEST), "--data-dir", str(DATA), "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--noise", "0.3", "--seed", "2"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    ids = list(json.loads(IU_TEST.read_text(encoding="utf-8")))
    assert [r["id"] for r in rows] == ids
    made = baseline_reports("retrieval-oracle", ids, DATA, seed=2, noise=0.3)
    assert [r["report"] for r in rows] == made.texts
    assert str(made.signature) in res.output
    # and evaluate reads it as any system's file
    res = CliRunner().invoke(
        app,
        ["evaluate", "--refs", str(IU_TEST), "--section", "findings", "--cands", str(out), "--candidate-col", "report"]
        + ["--out", str(tmp_path / "scored"), "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "scored" / "scores.json").read_text())["n_pairs"] == len(ids)


def test_bad_kind_and_missing_data_stop_with_a_message(tmp_path: Path) -> None:
    refs = tmp_path / "r.csv"
    refs.write_text("id,report\n1,Clear lungs.\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["baseline", "nearest", "--refs", str(refs), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "unknown baseline 'nearest'" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(
        app, ["baseline", "random-train", "--refs", str(refs), "--data-dir", str(empty), "--out", str(tmp_path / "o.csv")]
    )
    assert res.exit_code == 2 and "iu-xray/indiana_reports.csv" in res.output
    assert not (tmp_path / "o.csv").exists()


@needs_data
def test_ids_the_baselines_cannot_serve_and_a_bad_out_are_refused(tmp_path: Path) -> None:
    mimic = tmp_path / "mimic.csv"
    mimic.write_text("id,report\ns50000001,Clear.\n", encoding="utf-8")
    args = ["baseline", "retrieval-oracle", "--data-dir", str(DATA)]
    res = CliRunner().invoke(app, [*args, "--refs", str(mimic), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "1 of 1 ids" in res.output and "no IU X-ray study" in res.output
    res = CliRunner().invoke(app, [*args, "--refs", str(IU_TEST), "--out", str(tmp_path / "missing" / "o.csv")])
    assert res.exit_code == 2 and "existing folder" in res.output
    twice = tmp_path / "twice.csv"
    twice.write_text("study,report\nCXR1_IM-0001,a\nCXR1_IM-0001,b\n", encoding="utf-8")
    res = CliRunner().invoke(app, [*args, "--refs", str(twice), "--id-col", "study", "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "ids given twice" in res.output
