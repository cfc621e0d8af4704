"""The finding hierarchy's judgement rule (issue 31) and device tips, sizes and sides (issue 32):
pairs of tests/pair_cases/*.yaml, the rule's signature and option, and the reward order it gives.

The reward order for one finding (issue 31): the reference's own reading > a specificity or
attribute error > leaving it out >= denying it > adding a critical finding in its place. No shape
may invert it; ``graded`` orders it strictly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cxreval
from cxreval.io import ReportPair
from cxreval.reward import SHAPES, ClinicalReward
from cxreval.yaml_files import safe_load

#: Every pair case file: hierarchy.yaml (issue 31), positions.yaml (device tips, sizes, sides; issue 32).
CASES = [safe_load(path.read_text(encoding="utf-8")) for path in sorted((Path(__file__).parent / "pair_cases").glob("*.yaml"))]
PAIRS = [(g["why"], p) for doc in CASES for g in doc["groups"] for p in g["pairs"]]


@pytest.fixture(scope="module")
def evaluators() -> dict[str, cxreval.Evaluator]:
    return {"is-a": cxreval.Evaluator(), "flat": cxreval.Evaluator(hierarchy=False)}


@pytest.mark.parametrize(("why", "case"), PAIRS, ids=[p["reference"] + " | " + p["candidate"] for _, p in PAIRS])
def test_pair_cases(why: str, case: dict, evaluators: dict[str, cxreval.Evaluator]) -> None:
    pair = [ReportPair(pair_id="1", reference=case["reference"], candidate=case["candidate"])]
    result = evaluators["is-a"].evaluate(pair)
    rows = {r.entity: r for r in result.judgements}
    assert int(result.errors.loc["1", "errors"]) == case["errors"], (why, [r.model_dump() for r in rows.values()])
    for entity, (presence, specificity) in case["rows"].items():
        assert (rows[entity].presence, rows[entity].specificity) == (presence, specificity), (why, entity)
    for entity, severity in case.get("severity", {}).items():
        assert rows[entity].severity == severity, (why, entity)
    for entity, location in case.get("location", {}).items():
        assert rows[entity].location == location, (why, entity)
    for entity, comparison in case.get("comparison", {}).items():
        assert rows[entity].comparison == comparison, (why, entity)
    assert not set(case.get("absent", ())) & rows.keys(), (why, sorted(rows))
    for entity, text in case.get("candidate_evidence", {}).items():
        assert rows[entity].candidate == text
    flat = evaluators["flat"].evaluate(pair)
    assert int(flat.errors.loc["1", "errors"]) == case["flat_errors"], why
    assert all(r.specificity == "exact" for r in flat.judgements)


def test_the_rule_is_in_the_signature_and_flat_is_an_option(evaluators: dict[str, cxreval.Evaluator]) -> None:
    assert evaluators["is-a"].signature.options["hierarchy"] == "is-a"
    assert evaluators["flat"].signature.options["hierarchy"] == "flat"
    sig = str(evaluators["is-a"].signature)
    assert "hierarchy:is-a" in sig and f"ontology:{cxreval.load_ontology().signature}" in sig


def test_specificity_errors_are_their_own_kind_counted_shown_and_resampled(evaluators) -> None:
    from cxreval.metrics.intervals import bootstrap_evaluation

    pairs = [ReportPair(pair_id=str(i), reference=p["reference"], candidate=p["candidate"]) for i, (_, p) in enumerate(PAIRS)]
    result = evaluators["is-a"].evaluate(pairs)
    assert {"less_specific", "more_specific"} <= set(result.errors.columns)
    n_specific = int(result.errors[["less_specific", "more_specific"]].to_numpy().sum())
    assert n_specific == sum(spec in ("less-specific", "more-specific") for _, p in PAIRS for _, spec in p["rows"].values())
    boot = bootstrap_evaluation(result, resamples=20)
    assert boot.get("specificity_errors_per_report_mean").estimate == pytest.approx(n_specific / len(pairs))


#: One finding per chain, best first: the reference's own reading, a specificity or attribute error,
#: leaving it out, denying it, adding a critical finding in its place (issue 31's example classes).
CHAINS = {
    "tension pneumothorax named as its parent": (
        "Left tension pneumothorax.",
        "Left pneumothorax.",
        "The heart is normal in size.",
        "No tension pneumothorax.",
        "Pneumomediastinum.",
    ),
    "pneumonia named as consolidation": (
        "Right upper lobe pneumonia.",
        "Right upper lobe consolidation.",
        "The heart is normal in size.",
        "No pneumonia.",
        "Large right pneumothorax.",
    ),
    "a moderate effusion called small": (
        "Moderate left pleural effusion.",
        "Small left pleural effusion.",
        "The heart is normal in size.",
        "No pleural effusion.",
        "Large right pneumothorax.",
    ),
    "a new pneumothorax without its change": (
        "New small right pneumothorax.",
        "Small right pneumothorax.",
        "The heart is normal in size.",
        "No pneumothorax.",
        "Pneumomediastinum.",
    ),
    "a mass called a nodule": (
        "Right upper lobe mass.",
        "Right upper lobe nodule.",
        "The heart is normal in size.",
        "No mass.",
        "Large right pneumothorax.",
    ),
    "consolidation over-specified as pneumonia": (
        "Right lower lobe consolidation.",
        "Right lower lobe pneumonia.",
        "The heart is normal in size.",
        "No consolidation.",
        "Large right pneumothorax.",
    ),
}
STEPS = ("reading", "specificity or attribute", "omission", "denial", "added critical")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_no_shape_inverts_the_order_and_graded_has_no_tie(shape: str, chain: str) -> None:
    reward = ClinicalReward(shape)
    reference, *_ = CHAINS[chain]
    values = [reward.score_one(reference, cand) for cand in CHAINS[chain]]
    for (a, va), (b, vb) in zip(zip(STEPS, values), zip(STEPS[1:], values[1:])):
        assert va >= vb, f"{shape}, {chain}: {a} ({va}) below {b} ({vb})"
        if shape == "graded" and (a, b) != ("omission", "denial"):
            assert va > vb, f"graded, {chain}: ties {a} and {b} at {va}"
    if shape == "graded":
        assert values[2] > values[3], "graded: a denial costs more than an omission"


def test_the_pairwise_judge_follows_the_hierarchy_or_spec_cxrs_flat_rule() -> None:
    from cxreval.engines import get_engine
    from cxreval.llm import LLMConfig
    from cxreval.ontology import load_ontology

    onto = load_ontology()

    def judge(style: str, hierarchy: bool):  # noqa: ANN202
        cfg = LLMConfig(model="m", base_url="http://127.0.0.1:1/v1", local_only=True, schema_style=style)  # type: ignore[arg-type]
        return get_engine("llm-pairwise", onto, "positive", llm=cfg, hierarchy=hierarchy)

    sparse, flat, dense = judge("sparse", True), judge("sparse", False), judge("dense", True)
    assert "specificity less-specific" in sparse.calls.messages("a", "b")[0]["content"]  # type: ignore[union-attr]
    for engine in (flat, dense):  # the flat rule: SPEC-CXR's, entity by entity (dense answers cannot say how specific)
        assert "FN for tension_pneumothorax and FP for pneumothorax" in engine.calls.messages("a", "b")[0]["content"]  # type: ignore[union-attr]
    assert [str(e.signature).count("hierarchy:is-a") for e in (sparse, flat, dense)] == [1, 0, 0]
    assert "hierarchy:flat" in str(flat.signature) and "hierarchy:flat" in str(dense.signature)
    # the worked pair that teaches the hierarchy is not shown to the flat judge
    assert len(sparse.calls.messages("a", "b")) == 8 and len(flat.calls.messages("a", "b")) == 6  # type: ignore[union-attr]
