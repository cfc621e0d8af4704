"""Graded certainty: the rule engine's grades, their aggregation, and the policies that map them."""

from __future__ import annotations

import pytest

from cxreval.extract import default_extractor
from cxreval.extract.models import (
    CERTAINTY_POLICIES,
    HEDGE_GRADES,
    EntityState,
    Extraction,
    Mention,
)
from cxreval.extract.rules import RuleExtractor, RulesError
from cxreval.judge.compare import compare_extractions, is_positive
from cxreval.meta.extraction_accuracy import counts_as_positive
from cxreval.ontology import load_ontology


@pytest.fixture(scope="module")
def ex() -> RuleExtractor:
    return default_extractor()


def grade(ex: RuleExtractor, text: str, entity: str) -> tuple[str, str] | None:
    s = ex.extract(text).states().get(entity)
    return None if s is None else (s.status, s.certainty)


# -- the engine's grades -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, entity, expected",
    [
        ("Left basilar atelectasis.", "atelectasis", ("present", "definite")),
        ("No atelectasis.", "atelectasis", ("absent", "negated")),
        ("Likely left basilar atelectasis.", "atelectasis", ("uncertain", "probable")),
        ("Probable left basilar atelectasis.", "atelectasis", ("uncertain", "probable")),
        ("Atelectasis is likely.", "atelectasis", ("uncertain", "probable")),
        ("Opacity favored to represent atelectasis.", "atelectasis", ("uncertain", "probable")),
        ("Possible left basilar atelectasis.", "atelectasis", ("uncertain", "possible")),
        ("This may represent atelectasis.", "atelectasis", ("uncertain", "possible")),
        ("Pneumonia cannot be excluded.", "pneumonia", ("uncertain", "possible")),
        ("Cannot exclude pneumonia.", "pneumonia", ("uncertain", "possible")),
        ("Questionable left basilar atelectasis.", "atelectasis", ("uncertain", "possible")),
        ("Findings suggestive of pneumonia.", "pneumonia", ("uncertain", "possible")),
        ("There may be atelectasis.", "atelectasis", ("uncertain", "possible")),
        ("Atelectasis or scarring at the left base.", "atelectasis", ("uncertain", "alternative")),
        ("Atelectasis or scarring at the left base.", "scarring", ("uncertain", "alternative")),
        ("Atelectasis versus scarring.", "atelectasis", ("uncertain", "alternative")),
        ("Atelectasis versus scarring.", "scarring", ("uncertain", "alternative")),
        ("Atelectasis vs scarring.", "scarring", ("uncertain", "alternative")),
        # a differential list raises each item as a possibility (cues c10; pyConText AMBIVALENT_EXISTENCE)
        ("Differential includes pneumonia.", "pneumonia", ("uncertain", "possible")),
        ("Opacity, differential diagnosis includes pneumonia.", "pneumonia", ("uncertain", "possible")),
        ("Edema, considerations include pneumonia.", "pneumonia", ("uncertain", "possible")),
        # the superlative of a concern cue leans towards the finding (cues c10)
        ("Opacities most suggestive of pulmonary edema.", "pulmonary_edema", ("uncertain", "probable")),
        ("Findings highly suggestive of pneumonia.", "pneumonia", ("uncertain", "probable")),
        # a hedge before an alternative covers both: its grade wins
        ("Possible atelectasis or scarring.", "scarring", ("uncertain", "possible")),
        # a negation before an alternative denies both
        ("No effusion or pneumothorax.", "pneumothorax", ("absent", "negated")),
        ("History of pneumonia.", "pneumonia", None),
    ],
)
def test_grades(ex, text, entity, expected):
    assert grade(ex, text, entity) == expected


def test_every_mention_grade_agrees_with_its_status(ex):
    text = (
        "Findings: Likely atelectasis. Possible effusion. Scarring versus pneumonia. No pneumothorax. "
        "Cardiomegaly. Impression: No acute cardiopulmonary process."
    )
    implied = {"present": {"definite"}, "absent": {"negated"}, "uncertain": set(HEDGE_GRADES)}
    mentions = ex.extract(text).mentions
    assert mentions
    for m in mentions:
        assert m.certainty in implied[m.status], m


def test_signature_is_bumped(ex):
    assert ex.signature.startswith("rules@32.c32.")


# -- the cue file ------------------------------------------------------------------------------
def _hedge_rules(tmp_path, fields: str):
    from cxreval.extract.rules import load_rules

    path = tmp_path / "hedges.yaml"
    path.write_text("rules:\n  - {id: local.maybe, kind: cue, doc: d, phrases: [maybe], " + fields + "}\n", encoding="utf-8")
    return load_rules(load_ontology(), path)


def test_a_hedge_without_a_grade_is_possible(tmp_path):
    rules = _hedge_rules(tmp_path, "category: uncertain_pre")
    e = RuleExtractor(load_ontology(), rules).extract("Maybe atelectasis.")
    assert [(m.status, m.certainty, m.rules.status) for m in e.mentions] == [("uncertain", "possible", "local.maybe")]


def test_graded_hedge(tmp_path):
    rules = _hedge_rules(tmp_path, "category: uncertain_pre, grade: probable")
    e = RuleExtractor(load_ontology(), rules).extract("Maybe atelectasis.")
    assert [(m.status, m.certainty) for m in e.mentions] == [("uncertain", "probable")]


def test_unknown_grade_is_rejected(tmp_path):
    with pytest.raises(RulesError, match="hedges.yaml:2: .*grade"):
        _hedge_rules(tmp_path, "category: uncertain_pre, grade: sure")


def test_only_hedges_have_a_grade(tmp_path):
    with pytest.raises(RulesError, match="hedges.yaml:2: .*only hedges"):
        _hedge_rules(tmp_path, "category: negation_pre, grade: probable")


# -- defaults and aggregation ----------------------------------------------------------------------
def test_certainty_defaults_from_status():
    assert Mention(entity="x", status="present").certainty == "definite"
    assert Mention(entity="x", status="absent").certainty == "negated"
    assert Mention(entity="x", status="uncertain").certainty == "possible"  # an engine that gives no grade
    assert EntityState(entity="x", status="uncertain").certainty == "possible"
    assert Mention(entity="x", status="uncertain", certainty="probable").certainty == "probable"


def test_certainty_survives_json():
    e = Extraction(engine="t", mentions=(Mention(entity="x", status="uncertain", certainty="alternative"),))
    back = Extraction.model_validate_json(e.model_dump_json())
    assert back.mentions[0].certainty == "alternative"
    assert back.states()["x"].certainty == "alternative"


def _states(*mentions: Mention) -> dict[str, EntityState]:
    return Extraction(engine="t", mentions=mentions).states()


@pytest.mark.parametrize(
    "grades, expected",
    [
        (("alternative", "possible"), "possible"),
        (("possible", "probable"), "probable"),
        (("alternative", "probable", "possible"), "probable"),
        (("alternative", "alternative"), "alternative"),
    ],
)
def test_strongest_hedge_wins(grades, expected):
    mentions = [Mention(entity="x", status="uncertain", certainty=g, cue=g, sentence=f"{g} x") for g in grades]
    s = _states(*mentions)["x"]
    assert (s.status, s.certainty) == ("uncertain", expected)
    assert s.cue == expected and s.evidence == f"{expected} x"  # the evidence explains the grade


def test_present_beats_any_hedge():
    s = _states(Mention(entity="x", status="uncertain", certainty="probable"), Mention(entity="x", status="present"))
    assert (s["x"].status, s["x"].certainty) == ("present", "definite")
    s = _states(Mention(entity="x", status="absent"), Mention(entity="x", status="uncertain", certainty="alternative"))
    assert (s["x"].status, s["x"].certainty) == ("uncertain", "alternative")


def test_engine_aggregates_grades_across_sentences(ex):
    text = "Atelectasis or scarring at the left base. This may represent atelectasis. Likely atelectasis."
    assert grade(ex, text, "atelectasis") == ("uncertain", "probable")
    assert grade(ex, text, "scarring") == ("uncertain", "alternative")


# -- policies -------------------------------------------------------------------------------
EXPECTED = {
    # policy: positive for definite, probable, possible, alternative, negated
    "positive": (True, True, True, True, False),
    "negative": (True, False, False, False, False),
    "probable": (True, True, False, False, False),
    "probable-alternative": (True, True, False, True, False),
}
GRADES = ("definite", "probable", "possible", "alternative", "negated")
STATUS = {"definite": "present", "negated": "absent"}


def _state(g: str) -> EntityState:
    return EntityState(entity="x", status=STATUS.get(g, "uncertain"), certainty=g)


def test_policies_are_named():
    assert set(EXPECTED) == set(CERTAINTY_POLICIES)


@pytest.mark.parametrize("policy", list(EXPECTED))
@pytest.mark.parametrize("i, g", list(enumerate(GRADES)))
def test_is_positive_per_grade(policy, i, g):
    assert is_positive(_state(g), policy) is EXPECTED[policy][i]
    # the IU benchmark's gold-side policies read the grades the same way
    assert counts_as_positive(_state(g), policy) is EXPECTED[policy][i]
    assert counts_as_positive(_state(g), CERTAINTY_POLICIES[policy]) is EXPECTED[policy][i]


def test_is_positive_none():
    assert not any(is_positive(None, p) for p in EXPECTED)


def test_grade_only_matters_for_hedges():
    # a present / absent state has one grade (definite / negated); a hedge grade on it is refused
    assert is_positive(EntityState(entity="x", status="present"), "negative")
    assert not is_positive(EntityState(entity="x", status="absent"), "positive")
    with pytest.raises(ValueError, match="does not fit"):
        EntityState(entity="x", status="present", certainty="possible")


def test_compare_under_graded_policy(tiny, ex):
    ref = Extraction(engine="t", mentions=(Mention(entity="pneumonia", status="present"),))
    likely = Extraction(engine="t", mentions=(Mention(entity="pneumonia", status="uncertain", certainty="probable"),))
    maybe = Extraction(engine="t", mentions=(Mention(entity="pneumonia", status="uncertain", certainty="possible"),))
    presence = lambda cand, pol: compare_extractions("p", ref, cand, tiny, pol)[0].presence
    assert presence(likely, "probable") == "TP"
    assert presence(maybe, "probable") == "FN"
    assert presence(maybe, "positive") == "TP"
    assert presence(likely, "negative") == "FN"


def test_llm_extract_refuses_graded_policies_and_the_pairwise_judge_is_told_the_grades() -> None:
    from cxreval.engines import get_engine
    from cxreval.llm import LLMConfig
    from cxreval.ontology import load_ontology

    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", local_only=True)
    with pytest.raises(ValueError, match="does not grade"):
        get_engine("llm-extract", load_ontology(), "probable", llm=cfg)
    judge = get_engine("llm-pairwise", load_ontology(), "probable-alternative", llm=cfg)
    system = judge.calls.messages("a", "b")[0]["content"]  # type: ignore[union-attr]
    assert "graded (policy probable-alternative): probable hedges (probable, probably" in system
    assert "possible hedges (suspected" in system and "count as absent; alternative hedges" in system
    assert "uncertain:probable-alternative" in str(judge.signature)
    assert get_engine("rules", load_ontology(), "probable-alternative") is not None


# -- label projections follow the same named policies (scores/labels.py) -----------------------------
# value per grade of a hedged mention, definite and negated aside, by label set and policy
PROJECTED = {
    # CheXpert-14 keeps what the policy does not affirm as its "u" label, -1
    "chexpert14": {"negative": (-1, -1, -1), "probable": (1, -1, -1), "probable-alternative": (1, -1, 1), "positive": (1, 1, 1)},
    # ChestX-ray14 rules hedges out by definition (hedged: negative): 0; but NegBio does not call
    # alternatives uncertain (affirms: [alternative], ontology 1.8.0): 1 under every policy
    "chestxray14": {"negative": (0, 0, 1), "probable": (1, 0, 1), "probable-alternative": (1, 0, 1), "positive": (1, 1, 1)},
}
SENTENCES = {  # hand-written, one per hedge grade: probable, possible, alternative
    "probable": "Likely left basilar atelectasis.",
    "possible": "This may represent atelectasis.",
    "alternative": "Atelectasis or scarring at the left base.",
}


@pytest.mark.parametrize("labelset", list(PROJECTED))
@pytest.mark.parametrize("policy", list(EXPECTED))
def test_projection_maps_grades_by_policy(ex, labelset, policy):
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    for i, g in enumerate(HEDGE_GRADES):
        x = ex.extract(SENTENCES[g])
        assert x.states()["atelectasis"].certainty == g
        got = project_extraction(x, onto, labelset, certainty=policy)["Atelectasis"]
        assert got == PROJECTED[labelset][policy][i], (g, got)
    # definite and negated do not depend on the policy
    assert project_extraction(ex.extract("Left basilar atelectasis."), onto, labelset, certainty=policy)["Atelectasis"] == 1
    assert project_extraction(ex.extract("No atelectasis."), onto, labelset, certainty=policy)["Atelectasis"] == 0


def test_the_registered_label_metrics_take_the_certainty_policy_and_sign_it() -> None:
    """bench's label metrics project hedges by a named policy (default: the labelers' negative)."""
    from cxreval.metrics import get_metric

    refs = ["Likely right lower lobe pneumonia.", "Atelectasis or scarring at the left base."]
    cands = ["Right lower lobe pneumonia.", "Left basilar atelectasis."]
    default = get_metric("labels-chexpert14")
    leaning = get_metric("labels-chexpert14", certainty="probable-alternative")
    assert "certainty:negative" in str(default.signature)
    assert "certainty:probable-alternative" in str(leaning.signature)
    # a probable ("likely") and an alternative ("X or Y") hedge: -1 under the default, 1 when counted
    assert list(default.score_pairs(refs, cands)) == [0.0, 0.0]
    assert list(leaning.score_pairs(refs, cands)) == [1.0, 0.5]
    with pytest.raises(ValueError, match="certainty must be one of"):
        get_metric("labels-chexpert14", certainty="maybe")
    # the label set's own affirmed grades are part of its signature
    cx14 = str(get_metric("labels-chestxray14").signature)
    assert "hedged:negative" in cx14 and "affirms:alternative" in cx14, cx14
    assert "affirms" not in str(default.signature)


def test_label_metrics_sign_the_label_sets_own_rules_as_the_metric_class_does() -> None:
    """One signature for one number: the functional label metrics over projected tables name the
    label set's own rules (ChestX-ray14 rules hedges out and affirms alternatives) exactly as the
    registered metric does, and tables projected under different label-set rules do not mix."""
    from cxreval.metrics import get_metric
    from cxreval.scores.labels import label_metrics, project_extractions

    onto = load_ontology()
    ex = RuleExtractor(onto)
    texts = {"a": "Atelectasis or scarring at the left base.", "b": "Possible small left effusion."}
    table = project_extractions({k: ex.extract(t) for k, t in texts.items()}, onto, "chestxray14")
    functional = label_metrics(table, table, labelset="chestxray14")
    cx14 = get_metric("labels-chestxray14").signature
    assert functional.signature.options["affirms"] == cx14.options["affirms"] == "alternative"
    assert functional.signature.options["hedged"] == cx14.options["hedged"] == "negative"
    assert table.loc["a", "Atelectasis"] == 1.0 and table.loc["b", "Effusion"] == 0.0
    chexpert = project_extractions({k: ex.extract(t) for k, t in texts.items()}, onto, "chexpert14")
    assert "affirms" not in label_metrics(chexpert, chexpert, labelset="chexpert14").signature.options
    other = table.copy()
    other.attrs = {**table.attrs, "labelset_rules": {}}
    with pytest.raises(ValueError, match="different label-set rules"):
        label_metrics(table, other, labelset="chestxray14")


def test_label_metrics_take_the_label_set_the_tables_were_projected_onto() -> None:
    """A table projected onto ChestX-ray14 cannot be signed as another label set (its rules would
    sign the wrong one); without a name, label_metrics takes the tables' own."""
    from cxreval.scores.labels import label_metrics, project_extractions

    onto = load_ontology()
    ex = RuleExtractor(onto)
    table = project_extractions({"a": ex.extract("Atelectasis or scarring.")}, onto, "chestxray14")
    assert label_metrics(table, table).labelset == "chestxray14"
    assert label_metrics(table, table).signature.metric == "labels-chestxray14"
    with pytest.raises(ValueError, match="projected onto 'chestxray14', not 'custom'"):
        label_metrics(table, table, labelset="custom")
    other = project_extractions({"a": ex.extract("Atelectasis or scarring.")}, onto, "chexpert14")
    with pytest.raises(ValueError, match="different label sets"):
        label_metrics(table, other)
