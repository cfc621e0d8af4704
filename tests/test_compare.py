"""Deterministic judgement: extraction pairs -> SPEC-CXR rows."""

from __future__ import annotations

from cxreval.extract.models import Extraction, Mention
from cxreval.judge import compare_extractions


def X(*mentions: Mention) -> Extraction:
    return Extraction(engine="test", mentions=mentions)


def M(entity, status="present", **kw) -> Mention:
    return Mention(entity=entity, status=status, **kw)


def rows_by_entity(rows):
    return {r.entity: r for r in rows}


def test_presence_quadrants(tiny):
    ref = X(M("effusion"), M("pneumothorax"), M("consolidation", "absent"))
    cand = X(M("effusion"), M("consolidation", "absent"), M("pneumonia"))
    rows = rows_by_entity(compare_extractions("p", ref, cand, tiny))
    assert rows["effusion"].presence == "TP"
    assert rows["pneumothorax"].presence == "FN"
    assert rows["pneumonia"].presence == "FP"
    assert rows["consolidation"].presence == "TN"
    assert [r.entity for r in compare_extractions("p", ref, cand, tiny)] == [
        "effusion",
        "pneumothorax",
        "consolidation",
        "pneumonia",
    ]  # ontology order


def test_unmentioned_entities_have_no_row(tiny):
    assert compare_extractions("p", X(), X(), tiny) == []


def test_uncertain_policy(tiny):
    ref = X(M("pneumonia", "uncertain"))
    cand = X()
    assert compare_extractions("p", ref, cand, tiny)[0].presence == "FN"
    assert compare_extractions("p", ref, cand, tiny, uncertain="negative")[0].presence == "TN"


def test_location_alignment(tiny):
    def loc(ref_kw, cand_kw):
        rows = compare_extractions("p", X(M("effusion", **ref_kw)), X(M("effusion", **cand_kw)), tiny)
        return rows[0].location

    assert loc({"side": "left"}, {"side": "left"}) == "aligned"
    assert loc({"side": "left"}, {"side": "right"}) == "not-aligned"
    assert loc({"side": "left"}, {"side": "bilateral"}) == "not-aligned"
    assert loc({"side": "left"}, {}) == "not-available"
    assert loc({}, {}) == "not-available"
    assert loc({"side": "right", "zones": ("lower",)}, {"side": "right", "zones": ("upper",)}) == "not-aligned"
    assert loc({"zones": ("lower",)}, {"zones": ("lower", "retrocardiac")}) == "aligned"
    assert loc({"side": "right"}, {"zones": ("lower",)}) == "not-available"


def test_severity_and_comparison(tiny):
    def row(ref_kw, cand_kw, entity="effusion"):
        return compare_extractions("p", X(M(entity, **ref_kw)), X(M(entity, **cand_kw)), tiny)[0]

    assert row({"severity": "mild"}, {"severity": "mild"}).severity == "aligned"
    assert row({"severity": "mild"}, {"severity": "severe"}).severity == "not-aligned"
    assert row({"severity": "mild"}, {}).severity == "not-available"
    assert row({"comparison": "increased"}, {}).comparison == "missing-mentioned-comparison"
    assert row({}, {"comparison": "new"}).comparison == "adding-unmentioned-comparison"
    assert row({"comparison": "new"}, {"comparison": "increased"}).comparison == "other"
    # consolidation has no severity attribute in the tiny ontology: never judged
    assert row({"severity": "mild"}, {"severity": "severe"}, "consolidation").severity == "not-available"


def test_attributes_only_on_tp(tiny):
    rows = compare_extractions("p", X(M("effusion", side="left", comparison="new")), X(), tiny)
    assert rows[0].presence == "FN"
    assert (rows[0].location, rows[0].severity, rows[0].comparison) == ("not-available", "not-available", "other")


def test_aggregation_across_mentions(tiny):
    # Denied in findings but affirmed in impression: affirmed wins; two sides make it bilateral.
    ref = X(M("effusion", "absent"), M("effusion", side="left", sentence="Left effusion."), M("effusion", side="right"))
    state = ref.states()["effusion"]
    assert state.status == "present" and state.side == "bilateral"
    assert state.evidence == "Left effusion."
    # Historical mentions never make an entity present; implied absences lose to explicit text.
    hist = X(M("pneumonia", historical=True)).states()
    assert "pneumonia" not in hist
    implied = X(M("effusion", "absent", implied=True), M("effusion", "uncertain")).states()
    assert implied["effusion"].status == "uncertain"


def test_evidence_sentences_are_kept(tiny):
    rows = compare_extractions(
        "p", X(M("effusion", sentence="Small left effusion.")), X(M("effusion", sentence="Effusion.")), tiny
    )
    assert rows[0].reference == "Small left effusion." and rows[0].candidate == "Effusion."
