"""End to end: API, output files and the command line on the shipped example."""

from __future__ import annotations

import csv
import gzip
import json
import socket
import subprocess
import sys

import pytest
import yaml

import cxreval
from cxreval import Evaluator, ReportPair, read_pairs
from cxreval.cli import example_path
from tests.conftest import TINY, shared_data_dir


@pytest.fixture(scope="module")
def example_result():
    return cxreval.evaluate(read_pairs(example_path(), meta_cols=["model"]))


def test_example_ships_with_the_package():
    pairs = read_pairs(example_path(), meta_cols=["model"])
    assert len(pairs) == 20 and {p.meta["model"] for p in pairs} == {"demo-a", "demo-b"}


def test_outputs_agree_with_each_other(example_result, tmp_path):
    paths = example_result.save(tmp_path)
    # the compact rows: fields that hold their default are left out, TN rows without error too
    rows = [json.loads(line) for line in gzip.decompress(paths["judgements"].read_bytes()).splitlines()]
    assert rows and set(rows[0]) >= {"pair_id", "entity", "presence"}
    assert all(r["presence"] != "TN" for r in rows)
    with paths["errors"].open() as fh:
        errors = {r["pair_id"]: int(r["errors"]) for r in csv.DictReader(fh)}
    assert len(errors) == 20  # every pair listed, error-free ones included
    recount: dict[str, int] = {pid: 0 for pid in errors}
    for r in rows:
        recount[r["pair_id"]] += (
            (r["presence"] in ("FP", "FN"))
            + (r.get("location", "not-available") == "not-aligned")
            + (r.get("severity", "not-available") == "not-aligned")
            + (r.get("comparison", "other") != "other")
            + (r.get("specificity", "exact") in ("less-specific", "more-specific"))  # the finding hierarchy
        )
    assert recount == errors
    scores = json.loads(paths["scores"].read_text())
    assert scores["n_pairs"] == 20
    for metric in scores["metrics"]:
        assert {"name", "value", "higher_is_better", "signature"} <= set(metric)
        assert "ontology:cxreval-cxr@" in metric["signature"] and "engine:rules@" in metric["signature"]
    assert scores["report_level"]["mean"] == pytest.approx(sum(errors.values()) / 20)
    tp = sum(r["presence"] == "TP" for r in rows)
    assert scores["averages"]["micro"]["tp"] == tp


def test_known_errors_in_the_example(example_result):
    by_pair: dict[str, dict[str, dict]] = {}
    for j in example_result.judgements:
        by_pair.setdefault(j.pair_id, {})[j.entity] = j
    # ex02: the candidate puts the effusion on the wrong side
    assert by_pair["ex02"]["pleural_effusion"].presence == "TP"
    assert by_pair["ex02"]["pleural_effusion"].location == "not-aligned"
    # ex04: the candidate misses the pneumothorax the reference reports
    assert by_pair["ex04"]["pneumothorax"].presence == "FN"
    # ex10: large vs moderate effusion
    assert by_pair["ex10"]["pleural_effusion"].severity == "not-aligned"
    # ex06: the reference says the opacity increased; the candidate gives no comparison
    assert by_pair["ex06"]["lung_opacity"].comparison == "missing-mentioned-comparison"
    # ex01: two normal reports agree: no errors
    assert example_result.errors.loc["ex01", "errors"] == 0


def test_identical_reports_have_no_errors(example_result):
    pairs = [
        ReportPair(pair_id=str(i), reference=t, candidate=t)
        for i, t in enumerate({j.reference for j in example_result.judgements if j.reference})
    ]
    result = Evaluator().evaluate(pairs)
    assert result.error_summary.max == 0
    assert all(e.presence.f1 in (None, 1.0) for e in result.entities)


def test_reference_shared_by_many_candidates_is_read_once():
    ev = Evaluator()
    ref = "Small left pleural effusion."
    ev.evaluate([ReportPair(pair_id=str(i), reference=ref, candidate=f"Pneumothorax {i}.") for i in range(5)])
    assert len(ev.extractor._reports) == 1 + 5
    assert ev.extract(ref) is ev.extract(ref)  # from the extractor's bounded report cache


def test_user_ontology_works_end_to_end(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(TINY))
    result = Evaluator(path).evaluate([ReportPair(pair_id="a", reference="Left effusion.", candidate="Right effusion.")])
    assert result.signature.ontology == "tiny@0.1"
    assert [(j.entity, j.presence, j.location) for j in result.judgements] == [("effusion", "TP", "not-aligned")]


def test_no_network_is_touched(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("cxreval tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    result = cxreval.evaluate(read_pairs(example_path()))
    assert result.n_pairs == 20


# -- the command line, as a user runs it -----------------------------------------------------
def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cxreval", *args], capture_output=True, text=True, timeout=120)


def test_cli_example(tmp_path):
    proc = run_cli("evaluate", "--example", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    for needle in ("presence_macro_f1", "By group", "Report level", "signature:", "engine:rules@"):
        assert needle in proc.stdout
    assert {p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")} == {
        "judgements.jsonl.gz",
        "judgements.parquet",
        "errors.csv",
        "scores.json",
    }


def test_cli_json_summary(tmp_path):
    proc = run_cli("evaluate", "--example", "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert {m["name"] for m in metrics} >= {"presence_macro_f1", "errors_per_report_mean"}


def test_cli_bad_input_names_file_row_and_field(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,reference,candidate\n1,Small effusion.,\n")
    proc = run_cli("evaluate", "--pairs", str(bad), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "bad.csv" in proc.stderr and "line 2" in proc.stderr and "candidate" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_cli_requires_one_input(tmp_path):
    proc = run_cli("evaluate", "--out", str(tmp_path))
    assert proc.returncode == 2 and "exactly one input" in proc.stderr


def test_cli_ontology_summary():
    proc = run_cli("ontology")
    assert proc.returncode == 0
    assert "findings" in proc.stdout and "differential" in proc.stdout


def test_cli_extract_shows_mentions():
    proc = run_cli("extract", "No pneumothorax. Small left pleural effusion.")
    assert proc.returncode == 0
    assert "pleural_effusion" in proc.stdout and "absent" in proc.stdout


@pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")
def test_cli_rexrank_references_against_themselves(tmp_path):
    refs = shared_data_dir() / "rexrank-iu" / "ReXRank_IUXray_test.json"
    studies = json.loads(refs.read_text())
    cands = tmp_path / "cands.jsonl"
    with cands.open("w") as fh:
        for sid, study in studies.items():
            fh.write(json.dumps({"id": sid, "candidate": study["section_findings"]}) + "\n")
    proc = run_cli(
        "evaluate", "--refs", str(refs), "--cands", str(cands), "--section", "findings", "--out", str(tmp_path / "o"), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((tmp_path / "o" / "scores.json").read_text())
    assert scores["n_pairs"] == 590
    assert scores["report_level"]["max"] == 0
