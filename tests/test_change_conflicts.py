"""Change conflicts (issue 13, item 3): both reports state a change from a prior for one entity and
the directions disagree -> ``conflicting-comparison``, an error; ``spec_compat`` maps it to other."""

from __future__ import annotations

import json
from typing import get_args

import pandas as pd
import pytest
from typer.testing import CliRunner

from cxreval import Evaluator, ReportPair
from cxreval.cli import app
from cxreval.extract.models import ComparisonChange
from cxreval.judge.compare import CHANGE_DIRECTION
from cxreval.judge.models import COMPARISON_VALUES, ERROR_KINDS, SPEC_COMPARISON_VALUES
from cxreval.scores.report_errors import ERROR_COLUMNS


def _pair(reference: str, candidate: str, pair_id: str = "p"):
    return ReportPair(pair_id=pair_id, reference=reference, candidate=candidate)


def _row(ev: Evaluator, reference: str, candidate: str, entity: str):
    (row,) = [r for r in ev.judge(_pair(reference, candidate)) if r.entity == entity]
    return row


@pytest.fixture(scope="module")
def default() -> Evaluator:
    return Evaluator()


@pytest.fixture(scope="module")
def spec() -> Evaluator:
    return Evaluator(spec_compat=True)


def test_value_sets():
    assert "conflicting-comparison" in COMPARISON_VALUES
    assert "conflicting-comparison" not in SPEC_COMPARISON_VALUES
    assert ERROR_KINDS["conflicting_comparison"] == ("comparison", frozenset({"conflicting-comparison"}))
    assert "conflicting_comparison" in ERROR_COLUMNS
    # every extracted change has a direction (a new change word must be given one)
    assert set(CHANGE_DIRECTION) == set(get_args(ComparisonChange))
    assert set(CHANGE_DIRECTION.values()) == {"worse", "better", "same"}


def test_stable_vs_increased_is_a_conflict(default, spec):
    ref, cand = "Stable small left pleural effusion.", "Increased small left pleural effusion."
    row = _row(default, ref, cand, "pleural_effusion")
    assert (row.presence, row.location, row.severity) == ("TP", "aligned", "aligned")
    assert row.comparison == "conflicting-comparison" and row.error_count == 1
    result = default.evaluate([_pair(ref, cand)])
    assert result.errors.loc["p", "errors"] == 1 and result.errors.loc["p", "conflicting_comparison"] == 1
    assert result.averages.comparison.accuracy == 0.0

    compat = _row(spec, ref, cand, "pleural_effusion")
    assert compat.comparison == "other" and compat.error_count == 0
    result = spec.evaluate([_pair(ref, cand)])
    assert result.errors.loc["p", "errors"] == 0 and result.errors.loc["p", "conflicting_comparison"] == 0
    assert result.averages.comparison.accuracy == 1.0
    assert default.signature != spec.signature
    assert default.signature.options["comparison"] == "conflicts"
    assert spec.signature.options["comparison"] == "spec"


def test_same_direction_agrees(default):
    # new and increased are both "worse": no conflict
    assert _row(default, "New right pneumothorax.", "Right pneumothorax, increased.", "pneumothorax").comparison == "other"


def test_new_vs_decreased_conflicts_both_ways(default):
    for ref, cand in (
        ("New right pneumothorax.", "Right pneumothorax, decreased."),
        ("Right pneumothorax, decreased.", "New right pneumothorax."),
    ):
        assert _row(default, ref, cand, "pneumothorax").comparison == "conflicting-comparison"


def test_one_sided_change_is_unchanged_behaviour(default, spec):
    ref, cand = "Increased small left pleural effusion.", "Small left pleural effusion."
    for ev in (default, spec):
        assert _row(ev, ref, cand, "pleural_effusion").comparison == "missing-mentioned-comparison"
        assert _row(ev, cand, ref, "pleural_effusion").comparison == "adding-unmentioned-comparison"


def test_cli_spec_compat_in_signature(tmp_path):
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame(
        {
            "id": ["a"],
            "reference": ["Stable small left pleural effusion."],
            "candidate": ["Increased small left pleural effusion."],
        }
    ).to_csv(pairs, index=False)
    runner = CliRunner()
    for flag, comparison, errors in (([], "conflicts", 1), (["--spec-compat"], "spec", 0)):
        out = tmp_path / comparison
        res = runner.invoke(app, ["evaluate", "--pairs", str(pairs), "--out", str(out), "--json", *flag])
        assert res.exit_code == 0, res.output
        scores = json.loads((out / "scores.json").read_text(encoding="utf-8"))
        assert f"|comparison:{comparison}|" in scores["signature"]
        assert all(f"|comparison:{comparison}|" in m["signature"] for m in scores["metrics"])
        frame = pd.read_csv(out / "errors.csv", dtype={"pair_id": str}).set_index("pair_id")
        assert frame.loc["a", "errors"] == errors == frame.loc["a", "conflicting_comparison"]


def test_cli_meta_col_cannot_shadow_the_new_column(tmp_path):
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame({"id": ["a"], "reference": ["x"], "candidate": ["y"], "conflicting_comparison": ["z"]}).to_csv(
        pairs, index=False
    )
    res = CliRunner().invoke(
        app, ["evaluate", "--pairs", str(pairs), "--out", str(tmp_path / "o"), "--meta-col", "conflicting_comparison"]
    )
    assert res.exit_code == 2


def test_bench_workers_and_config_follow_spec_compat():
    from cxreval.bench import runner as bench_runner
    from cxreval.bench.config import EngineConfig

    assert EngineConfig().spec_compat is False and EngineConfig(spec_compat=True).spec_compat is True
    ref, cand = "Stable small left pleural effusion.", "Increased small left pleural effusion."
    seen = {}
    for compat in (False, True):
        engine = Evaluator(spec_compat=compat).judge_engine
        ((_, rows),) = bench_runner._judge_chunk(engine, [("k", ref, cand)])
        seen[compat] = json.loads(rows)[0][4]
    assert seen == {False: "conflicting-comparison", True: "other"}
