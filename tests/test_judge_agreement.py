"""``cxreval meta judge-agreement``: the rule engine against an LLM engine, per entity, with the
disagreements listed and sampled into a review database."""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from cxreval.cli.meta import meta_app
from cxreval.evaluate_files import example_path
from cxreval.io import read_pairs
from cxreval.judge.models import EntityJudgement
from cxreval.meta.judge_agreement import disagreement_rows, entity_rows, judge_agreement
from cxreval.review.db import ReviewDB
from cxreval.scores.signature import Signature
from cxreval.testing.loopback import LoopbackServer


def _sig(engine: str) -> Signature:
    return Signature(metric="m", ontology="tiny", engine=engine, options={"uncertain": "positive"})


def _row(pair: str, entity: str, presence: str, **kw: str) -> EntityJudgement:
    return EntityJudgement(pair_id=pair, entity=entity, presence=presence, **kw)  # type: ignore[arg-type]


def test_agreement_counts_presence_errors_and_kappa_per_entity(tiny):
    first = [_row("a", "effusion", "TP", location="aligned"), _row("b", "effusion", "FN"), _row("c", "pneumothorax", "FP")]
    second = [_row("a", "effusion", "TP", location="not-aligned"), _row("b", "effusion", "FN"), _row("d", "pneumothorax", "FN")]
    result = judge_agreement(
        first, second, ["a", "b", "c", "d"], tiny, names=("rules", "llm"), signatures=(_sig("rules@1"), _sig("llm@1"))
    )
    by = {e.entity: e for e in result.entities}
    assert (by["effusion"].listed, by["effusion"].presence_agree, by["effusion"].errors_agree) == (2, 2, 1)
    assert (by["pneumothorax"].listed, by["pneumothorax"].presence_agree) == (2, 0)
    assert by["effusion"].kappa == 1.0  # presence verdicts over a, b, c, d: TP FN TN TN on both sides
    assert [(d.pair_id, d.entity) for d in result.disagreements] == [
        ("a", "effusion"),
        ("c", "pneumothorax"),
        ("d", "pneumothorax"),
    ]
    assert result.disagreeing_pairs == ["a", "c", "d"] and result.signature.startswith(
        "metric:judge-agreement|ontology:tiny@0.1|engine:rules@1~llm@1|"
    )
    assert "llm.uncertain:positive" in result.signature
    assert entity_rows(result)[1][:5] == ["effusion", "Pleural effusion", 2, 2, 1.0]
    head = disagreement_rows(result)[0]
    assert head[:4] == ["pair_id", "entity", "rules_presence", "rules_location"] and "llm_candidate_evidence" in head


def test_the_command_on_the_example_with_the_loopback_server(tmp_path: Path):
    out, db = tmp_path / "agree", tmp_path / "review.db"
    with LoopbackServer() as srv:
        args = ["judge-agreement", "--example", "--out", str(out), "--base-url", srv.base_url, "--model", "loopback"]
        args += ["--local-only", "--cache", str(tmp_path / "c.sqlite"), "--review-db", str(db), "--review-n", "3"]
        res = CliRunner().invoke(meta_app, args)
    assert res.exit_code == 0, res.output
    assert "rules against llm-pairwise on 20 pairs" in res.output and "signature:" in res.output
    for name in ("rules/scores.json", "llm-pairwise/scores.json", "agreement.csv", "disagreements.csv"):
        assert (out / name).is_file(), name
    with (out / "disagreements.csv").open(encoding="utf-8") as fh:
        disagreements = list(csv.DictReader(fh))
    with (out / "agreement.csv").open(encoding="utf-8") as fh:
        entities = list(csv.DictReader(fh))
    assert entities and all(int(e["presence_agree"]) <= int(e["pairs_listed"]) for e in entities)
    # the loopback server answers with the rule engine's flat reading (entity by entity), the rule
    # engine judges by the finding hierarchy: where the two differ, the rows show it
    example_ids = {p.pair_id for p in read_pairs(example_path())}
    assert disagreements and {d["pair_id"] for d in disagreements} <= example_ids
    assert all(
        d["rules_presence"] != d["llm-pairwise_presence"]
        or d["rules_specificity"] != d["llm-pairwise_specificity"]
        or d["rules_location"] != d["llm-pairwise_location"]
        or d["rules_severity"] != d["llm-pairwise_severity"]
        or d["rules_comparison"] != d["llm-pairwise_comparison"]
        for d in disagreements
    )
    assert f"{len(disagreements)} disagreements" in res.output
    with ReviewDB.open(db) as review:
        sampled = {p["pair_id"] for p in review.conn.execute("SELECT pair_id FROM pairs")}
    assert 0 < len(sampled) <= 3 and sampled <= {d["pair_id"] for d in disagreements}


def test_the_command_needs_a_model_and_one_input(tmp_path: Path):
    res = CliRunner().invoke(meta_app, ["judge-agreement", "--example", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "needs --llm-config or --base-url and --model" in res.output
    res = CliRunner().invoke(
        meta_app, ["judge-agreement", "--out", str(tmp_path / "o"), "--model", "m", "--base-url", "http://x"]
    )
    assert res.exit_code == 2 and "give a PAIRS file or --example" in res.output


def test_the_rule_engine_judges_by_the_other_engines_rule(tmp_path: Path):
    """A dense pairwise answer is SPEC-CXR's flat rule: the rule engine is set against it flat too,
    so no disagreement comes from the rules alone."""
    out = tmp_path / "dense"
    with LoopbackServer() as srv:
        args = ["judge-agreement", "--example", "--out", str(out), "--base-url", srv.base_url, "--model", "loopback"]
        res = CliRunner().invoke(meta_app, [*args, "--local-only", "--cache", str(tmp_path / "c.sqlite"), "--schema", "dense"])
    assert res.exit_code == 0, res.output
    with (out / "agreement.csv").open(encoding="utf-8") as fh:
        signature = next(csv.DictReader(fh))["signature"]
    assert "rules.hierarchy:flat" in signature and "llm-pairwise.hierarchy:flat" in signature
    assert "0 disagreements on 0 pairs" in res.output  # the loopback answers with the flat reading
