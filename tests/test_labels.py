"""Projection of entities onto label sets, and label metrics against hand-computed values."""

from __future__ import annotations

import copy
import math
from importlib import resources

import numpy as np
import pandas as pd
import pytest
import yaml

import cxreval
from cxreval.extract.models import Extraction, Mention
from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import OntologyError, load_ontology, parse_ontology
from cxreval.scores.labels import (
    binarize,
    label_cache,
    label_entities,
    label_metrics,
    project_extractions,
    project_pairs,
    project_states,
    ran_score,
)
from cxreval.scores.resampling import bootstrap
from tests.conftest import TINY

NAN = float("nan")


@pytest.fixture
def onto():
    """TINY plus a device entity and a label set with No Finding and Support Devices."""
    data = copy.deepcopy(TINY)
    data["labelsets"]["mine"] = {"name": "Mine", "labels": ["No Finding", "Fluid", "Air", "Support Devices"]}
    data["entities"].append(
        {
            "id": "tube",
            "name": "Tube",
            "kind": "finding",
            "category": "lung",
            "group": "parenchyma",
            "mappings": {"mine": ["Support Devices"]},
        }
    )
    maps = {"effusion": ["Fluid"], "pneumothorax": ["Air"], "consolidation": ["Fluid"]}
    for e in data["entities"]:
        if e["id"] in maps:
            e["mappings"]["mine"] = maps[e["id"]]
    return parse_ontology(data, "tiny+")


def X(*mentions: tuple[str, str] | tuple[str, str, bool]) -> Extraction:
    ms = []
    for m in mentions:
        ms.append(Mention(entity=m[0], status=m[1], implied=bool(m[2]) if len(m) > 2 else False))  # type: ignore[misc]
    return Extraction(engine="test", mentions=tuple(ms))


def proj(onto, *mentions):
    return project_states(X(*mentions).states(), onto, "mine")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


def test_label_entities_follows_mappings(onto):
    idx = label_entities(onto, "mine")
    assert idx == {"No Finding": [], "Fluid": ["effusion", "consolidation"], "Air": ["pneumothorax"], "Support Devices": ["tube"]}
    with pytest.raises(KeyError, match="no label set"):
        label_entities(onto, "nope")


def test_projection_precedence_present_uncertain_absent_blank(onto):
    assert same(
        proj(onto, ("effusion", "absent"), ("consolidation", "uncertain")),
        {"No Finding": NAN, "Fluid": -1.0, "Air": NAN, "Support Devices": NAN},
    )
    assert same(
        proj(onto, ("effusion", "present"), ("consolidation", "uncertain"), ("pneumothorax", "absent")),
        {"No Finding": NAN, "Fluid": 1.0, "Air": 0.0, "Support Devices": NAN},
    )
    # an absence implied by a normal statement is an absence
    assert same(
        proj(onto, ("pneumothorax", "absent", True)), {"No Finding": 1.0, "Fluid": NAN, "Air": 0.0, "Support Devices": NAN}
    )


def test_no_finding_follows_the_chexpert_rule(onto):
    # nothing mentioned: No Finding positive, everything else blank
    assert same(proj(onto), {"No Finding": 1.0, "Fluid": NAN, "Air": NAN, "Support Devices": NAN})
    # a device alone does not make a finding
    assert proj(onto, ("tube", "present"))["No Finding"] == 1.0
    # an uncertain finding is a finding
    assert math.isnan(proj(onto, ("pneumothorax", "uncertain"))["No Finding"])
    # an entity outside the label set (pneumonia) does not block No Finding
    assert proj(onto, ("pneumonia", "present"))["No Finding"] == 1.0
    # turned off
    off = project_states(X().states(), onto, "mine", no_finding=None)
    assert math.isnan(off["No Finding"])


def test_binarize_policies():
    frame = pd.DataFrame({"a": [1.0, 0.0, -1.0, NAN]})
    assert binarize(frame, "negative")["a"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert binarize(frame, "positive")["a"].tolist() == [1.0, 0.0, 1.0, 0.0]
    excl = binarize(frame, "exclude")["a"].tolist()
    assert excl[:2] == [1.0, 0.0] and math.isnan(excl[2]) and excl[3] == 0.0


def test_label_metrics_hand_computed():
    ref = pd.DataFrame({"A": [1, 1, 0, 0, -1], "B": [0, 0, 0, 0, 0]}, index=list("abcde"), dtype=float)
    cand = pd.DataFrame({"A": [1, 0, 1, 0, 1], "B": [0, 0, 0, 0, NAN]}, index=list("abcde"), dtype=float)
    m = label_metrics(ref, cand, uncertain="negative")
    a = m.get("A")
    assert (a.tp, a.fp, a.fn, a.tn) == (1, 2, 1, 1)  # e: ref uncertain -> 0, cand 1 -> FP
    assert a.precision == pytest.approx(1 / 3) and a.recall == 0.5 and a.f1 == pytest.approx(0.4)
    assert a.accuracy == pytest.approx(0.4)
    b = m.get("B")
    assert b.f1 is None and b.accuracy == 1.0
    assert m.macro_f1 == pytest.approx(0.4) and m.n_labels_f1_defined == 1
    assert m.macro_accuracy == pytest.approx(0.7)
    assert (m.micro.tp, m.micro.fp, m.micro.fn, m.micro.tn) == (1, 2, 1, 6)
    assert m.micro.f1 == pytest.approx(2 / 5)
    # undefined counted as zero (scikit-learn zero_division=0)
    assert label_metrics(ref, cand, undefined="zero").macro_f1 == pytest.approx(0.2)
    # uncertain positive: e becomes TP
    pos = label_metrics(ref, cand, uncertain="positive").get("A")
    assert (pos.tp, pos.fp) == (2, 1)
    # exclude: e left out of A
    ex = label_metrics(ref, cand, uncertain="exclude").get("A")
    assert (ex.n, ex.excluded, ex.fp) == (4, 1, 1)


def test_label_metrics_match_sklearn_style_reference():
    rng = np.random.default_rng(4)
    ref = pd.DataFrame(rng.integers(0, 2, (60, 5)).astype(float), columns=list("vwxyz"))
    cand = pd.DataFrame(np.where(rng.random((60, 5)) < 0.8, ref, 1 - ref), columns=list("vwxyz"))
    m = label_metrics(ref, cand)
    f1s = []
    for col in ref:
        r, c = ref[col].to_numpy() == 1, cand[col].to_numpy() == 1
        tp, fp, fn = (r & c).sum(), (~r & c).sum(), (r & ~c).sum()
        f1s.append(2 * tp / (2 * tp + fp + fn))
    assert m.macro_f1 == pytest.approx(np.mean(f1s))


def test_signature_names_the_variant():
    ref = pd.DataFrame({"A": [1.0, 0.0]})
    m = label_metrics(ref, ref, labelset="ran21", uncertain="exclude")
    s = str(m.signature)
    assert m.signature.metric == "ran-score"
    assert "uncertain:exclude" in s and "labelset:ran21" in s and "no-finding:chexpert-rule" in s
    assert "blank:negative" in s and "undefined:skip" in s


def test_mismatched_tables_are_refused():
    a = pd.DataFrame({"A": [1.0]}, index=["x"])
    with pytest.raises(ValueError, match="different reports"):
        label_metrics(a, pd.DataFrame({"A": [1.0]}, index=["y"]))
    with pytest.raises(ValueError, match="different labels"):
        label_metrics(a, pd.DataFrame({"B": [1.0]}, index=["x"]))


def test_packaged_ontology_projects_onto_all_three_label_sets():
    onto = load_ontology()
    ex = RuleExtractor(onto)
    reports = {
        "normal": "The lungs are clear. No acute cardiopulmonary process.",
        "effusion": "No pneumothorax. Small left pleural effusion.",
        "hedge": "Possible pneumonia. Endotracheal tube in place.",
    }
    xs = {k: ex.extract(v) for k, v in reports.items()}
    chex = project_extractions(xs, onto, "chexpert14")
    assert list(chex.columns) == onto.labelsets["chexpert14"].labels
    assert chex.loc["normal", "No Finding"] == 1.0 and chex.loc["normal", "Pneumothorax"] == 0.0
    assert chex.loc["effusion", "Pleural Effusion"] == 1.0 and chex.loc["effusion", "Pneumothorax"] == 0.0
    assert math.isnan(chex.loc["effusion", "No Finding"])
    assert chex.loc["hedge", "Pneumonia"] == -1.0 and chex.loc["hedge", "Support Devices"] == 1.0
    assert math.isnan(chex.loc["hedge", "No Finding"])
    ran = project_extractions(xs, onto, "ran21")
    assert ran.shape == (3, 21)
    cx14 = project_extractions(xs, onto, "chestxray14")
    assert cx14.loc["effusion", "Effusion"] == 1.0 and "No Finding" not in cx14.columns


def test_ran_score_on_the_example_pairs():
    from cxreval.cli import example_path

    ev = cxreval.Evaluator()
    pairs = cxreval.read_pairs(example_path(), meta_cols=["model"])
    m = ran_score(ev, pairs, ev.ontology, signature=ev.signature)
    ref, cand = project_pairs(ev, pairs, ev.ontology, "ran21")
    assert m.n_reports == len(pairs) and len(m.labels) == 21
    assert m.macro_f1 == pytest.approx(label_metrics(ref, cand).macro_f1)
    assert m.signature.engine == ev.signature.engine and m.signature.options["uncertain"] == "negative"
    assert "judge-uncertain" not in m.signature.options  # the judge's policy plays no part
    assert 0.0 <= m.macro_f1 <= 1.0


def test_label_cache_estimate_equals_label_metrics_and_bootstraps():
    rng = np.random.default_rng(9)
    ref = pd.DataFrame(rng.choice([1.0, 0.0, -1.0, NAN], (50, 4)), columns=list("abcd"))
    cand = pd.DataFrame(rng.choice([1.0, 0.0, -1.0, NAN], (50, 4)), columns=list("abcd"))
    for unc in ("negative", "positive", "exclude"):
        m = label_metrics(ref, cand, uncertain=unc)
        cache = label_cache(ref, cand, uncertain=unc)
        est = dict(zip(cache.names, cache.estimate()))
        assert est["macro_f1"] == pytest.approx(m.macro_f1)
        assert est["micro_accuracy"] == pytest.approx(m.micro.accuracy)
        assert est["b/recall"] == pytest.approx(m.get("b").recall)
    res = bootstrap(label_cache(ref, cand), resamples=200, seed=0)
    e = res.get("macro_f1")
    assert e.low <= e.estimate <= e.high


def test_ran_score_is_signed_with_engine_and_ontology():
    import cxreval
    from cxreval.cli import example_path
    from cxreval.scores import ran_score

    ev = cxreval.Evaluator()
    result = ran_score(ev, cxreval.read_pairs(example_path()), ev.ontology)
    sig = str(result.signature)
    assert result.signature.ontology == ev.ontology.signature
    assert result.signature.engine == ev.signature.engine
    assert "metric:ran-score" in sig and "labelset:ran21" in sig and "uncertain:negative" in sig


def test_ran_score_is_computed_by_the_engine_its_signature_names(tmp_path):
    """Regression (issue 12): llm-extract labels were read by the rule engine but signed llm-extract."""
    import pytest

    from cxreval import Evaluator
    from cxreval.cli import example_path
    from cxreval.io import read_pairs
    from cxreval.scores import ran_score
    from cxreval.testing.loopback import LoopbackServer

    from .llm_support import loop_config

    pairs = read_pairs(example_path())[:6]
    rules = Evaluator()
    by_rules = ran_score(rules, pairs, rules.ontology)
    assert "engine:rules@" in str(by_rules.signature)
    with LoopbackServer() as srv:
        llm = Evaluator(engine="llm-extract", llm=loop_config(srv.base_url, tmp_path / "c.sqlite"))
        by_llm = ran_score(llm, pairs, llm.ontology)
        distinct = {t for p in pairs for t in (p.reference, p.candidate)}
        assert len({e["request"] for e in srv.log}) == len(distinct)  # the LLM read every report
        assert "engine:llm-extract@" in str(by_llm.signature) and "model:openai:loopback" in str(by_llm.signature)
        # the loopback server answers with what the rule engine reads: same labels, other signature
        assert by_llm.macro_f1 == by_rules.macro_f1
        pairwise = Evaluator(engine="llm-pairwise", llm=loop_config(srv.base_url, tmp_path / "c.sqlite"))
        with pytest.raises(ValueError, match="makes no extraction"):
            ran_score(pairwise, pairs, pairwise.ontology)


# --- Label sets as their authors define them (issue 13) -----------------------------------------


def _cx14(text: str) -> dict[str, float]:
    from cxreval.extract.rules import RuleExtractor
    from cxreval.ontology import load_ontology
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    return project_extraction(RuleExtractor(onto).extract(text), onto, "chestxray14")


@pytest.mark.parametrize(
    "text,label,value",
    [
        ("Patchy right basilar infiltrate.", "Infiltration", 1.0),
        ("Patchy right basilar airspace disease.", "Infiltration", None),  # airspace disease is not the word
        ("No infiltrate.", "Infiltration", 0.0),
        ("Right lower lobe pneumonia.", "Pneumonia", 1.0),
        ("Findings compatible with infection.", "Pneumonia", None),  # infection is not pneumonia
        ("Small hiatal hernia.", "Hernia", 1.0),
        ("Bochdalek hernia on the left.", "Hernia", None),  # Hernia is hiatal hernia
        ("Right pleural effusion.", "Effusion", 1.0),
        ("Right empyema.", "Effusion", None),
        ("Nodular densities over the ribs.", "Nodule", None),  # "nodular density" is not a nodule
        ("Right upper lobe nodule.", "Nodule", 1.0),
        ("Apical pleural thickening.", "Pleural_Thickening", 1.0),
        ("Right apical cap.", "Pleural_Thickening", None),
        ("Left basilar opacity may represent pneumonia.", "Pneumonia", 0.0),  # hedged: ruled out (Wang et al.)
    ],
)
def test_chestxray14_labels_are_their_words(text: str, label: str, value: float | None) -> None:
    got = _cx14(text)[label]
    if value is None:
        assert got != 1.0 and got != -1.0, (text, got)
    else:
        assert got == value, (text, got)


def test_hedged_mentions_stay_uncertain_for_chexpert() -> None:
    from cxreval.extract.rules import RuleExtractor
    from cxreval.ontology import load_ontology
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    x = RuleExtractor(onto).extract("Left basilar opacity may represent pneumonia.")
    assert project_extraction(x, onto, "chexpert14")["Pneumonia"] == -1.0
    assert onto.labelsets["chexpert14"].hedged == "uncertain" and onto.labelsets["chestxray14"].hedged == "negative"


def test_infection_is_pneumonia_for_chexpert_and_ran_but_not_chestxray14() -> None:
    """Ontology 1.6.0 splits `infection` from `pneumonia`: the CheXpert labeler lists "infection" under
    Pneumonia, ChestX-ray14's Pneumonia is the word pneumonia, and IU X-ray coders never code it."""
    from cxreval.extract.rules import RuleExtractor
    from cxreval.ontology import load_ontology
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    x = RuleExtractor(onto).extract("Right basilar opacity with an infectious process.")
    assert project_extraction(x, onto, "chexpert14")["Pneumonia"] == 1.0
    assert project_extraction(x, onto, "ran21")["Pneumonia"] == 1.0
    assert project_extraction(x, onto, "chestxray14")["Pneumonia"] not in (1.0, -1.0)
    assert "mesh" not in onto.entity("infection").mappings


def test_terms_for_an_unknown_label_are_refused() -> None:
    import copy

    from cxreval.ontology import OntologyError, parse_ontology
    from tests.conftest import TINY

    bad = copy.deepcopy(TINY)
    bad["labelsets"]["chexpert14"]["terms"] = {"Hernia": ["hernia"]}
    with pytest.raises(OntologyError, match="terms for 'Hernia'"):
        parse_ontology(bad, "bad")


def test_word_mappings_follow_the_label_sets_own_lists() -> None:
    """Ontology 1.7.0: CheXpert's phrase lists make "lump" a Lung Lesion mention, although the entity
    that owns "lump" (soft_tissue_mass) does not map onto Lung Lesion as a whole."""
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    ex = RuleExtractor(onto)
    assert "Lung Lesion" not in onto.entity("soft_tissue_mass").mappings.get("chexpert14", [])
    assert project_extraction(ex.extract("There is a palpable lump."), onto, "chexpert14")["Lung Lesion"] == 1.0
    assert project_extraction(ex.extract("No lump."), onto, "chexpert14")["Lung Lesion"] == 0.0
    breast = project_extraction(ex.extract("Left breast mass."), onto, "chexpert14")
    assert breast["Lung Lesion"] != 1.0 and breast["No Finding"] == 1.0  # the entity's other words stay unmapped
    hedged = project_extraction(ex.extract("Possible lump in the left axilla."), onto, "chexpert14")
    assert hedged["Lung Lesion"] == -1.0  # a word-mapped mention follows the label set's hedge rule
    assert np.isnan(project_extraction(ex.extract("There is a lump."), onto, "ran21")["Lung Lesion"])
    stock = project_extraction(ex.extract("The cardiac silhouette and vascularity are within normal limits."), onto, "chexpert14")
    assert stock["Enlarged Cardiomediastinum"] == 0.0 and stock["Cardiomegaly"] == 0.0
    assert np.isnan(project_extraction(ex.extract("Heart size is normal."), onto, "chexpert14")["Enlarged Cardiomediastinum"])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"Hernia": {"soft_tissue_mass": ["lump"]}}, "maps words onto 'Hernia'"),
        ({"Lung Lesion": {"no_such_entity": ["lump"]}}, "unknown entity 'no_such_entity'"),
        ({"Lung Lesion": {"soft_tissue_mass": ["lump("]}}, "not a regular expression"),
    ],
)
def test_bad_word_mappings_are_refused(change, match) -> None:
    from cxreval.ontology import OntologyError

    data = yaml.safe_load(resources.files("cxreval.ontology").joinpath("data/cxr-entities.yaml").read_text("utf-8"))
    bad = copy.deepcopy(data)
    bad["labelsets"]["chexpert14"]["word_mappings"] = change
    with pytest.raises((OntologyError, ValueError), match=match):
        parse_ontology(bad, "bad")


# -- graded certainty in projections (issue 13) -------------------------------------------------------
def test_projection_certainty_policy_per_grade_and_label_set():
    """Hand-written sentences, one per hedge grade, projected under each named policy."""
    onto = load_ontology()
    ex = RuleExtractor(onto)
    xs = {
        "probable": ex.extract("Likely right lower lobe pneumonia."),
        "possible": ex.extract("Findings may represent pneumonia."),
        "alternative": ex.extract("Right lower lobe atelectasis or pneumonia."),
    }
    assert {k: x.states()["pneumonia"].certainty for k, x in xs.items()} == {k: k for k in xs}
    # ChestX-ray14 affirms alternatives under every policy: NegBio's uncertainty patterns name no "or"
    for labelset, label, held, own in (
        ("chexpert14", "Pneumonia", -1.0, set()),
        ("ran21", "Pneumonia", -1.0, set()),
        ("chestxray14", "Pneumonia", 0.0, {"alternative"}),
    ):
        for policy, affirmed in (
            ("negative", set()),
            ("probable", {"probable"}),
            ("probable-alternative", {"probable", "alternative"}),
            ("positive", {"probable", "possible", "alternative"}),
        ):
            table = project_extractions(xs, onto, labelset, certainty=policy)
            assert table.attrs["certainty"] == policy
            got = table[label].to_dict()
            assert got == {k: 1.0 if k in affirmed | own else held for k in xs}, (labelset, policy, got)
    # No Finding follows: an affirmed hedge is a finding, a held one blocks it as before
    chex = project_extractions(xs, onto, "chexpert14", certainty="probable")
    assert math.isnan(chex.loc["probable", "No Finding"]) and math.isnan(chex.loc["possible", "No Finding"])


def test_chestxray14_reads_alternatives_as_findings_as_negbio_does():
    """NegBio's uncertainty patterns (negbio-patterns/uncertainty_patterns.txt) name possible, probable,
    may represent, ... but no "or" / "versus"; the CheXpert labeler's do ("XXX or YYY", "versus")."""
    onto = load_ontology()
    assert onto.labelsets["chestxray14"].affirms == ["alternative"]
    assert onto.labelsets["chexpert14"].affirms == [] and onto.labelsets["ran21"].affirms == []
    ex = RuleExtractor(onto)
    for text in (
        "Scarring or atelectasis at the left base.",
        "Left basilar atelectasis versus infiltrate.",
        "Right basilar airspace disease and/or atelectasis.",
    ):
        states = ex.extract(text).states()
        assert states["atelectasis"].certainty == "alternative", text
        assert project_states(states, onto, "chestxray14")["Atelectasis"] == 1.0, text
        assert project_states(states, onto, "chexpert14")["Atelectasis"] == -1.0, text
    # an uncertain hedge NegBio names stays ruled out
    assert project_states(ex.extract("Probable atelectasis.").states(), onto, "chestxray14")["Atelectasis"] == 0.0


def test_chestxray14_nodule_is_its_word_calcified_or_not():
    """ChestX-ray14 labels are their words: a calcified nodule is a Nodule (the IU MeSH coders code
    it Nodule too); a granuloma is not. CheXpert lists "calcified nodule" as an unmention of Lung Lesion."""
    from cxreval.scores.labels import project_extraction

    onto = load_ontology()
    ex = RuleExtractor(onto)
    calcified = ex.extract("Calcified right upper lobe nodule.")
    assert calcified.states()["calcified_granuloma"].status == "present"
    assert project_extraction(calcified, onto, "chestxray14")["Nodule"] == 1.0
    assert project_extraction(calcified, onto, "chexpert14")["Lung Lesion"] != 1.0
    granuloma = ex.extract("Calcified granuloma in the right upper lobe.")
    assert project_extraction(granuloma, onto, "chestxray14")["Nodule"] != 1.0


def test_affirmed_grades_are_hedge_grades():
    from typing import get_args

    from cxreval.extract.models import HEDGE_GRADES
    from cxreval.ontology.models import HedgeGrade

    assert set(get_args(HedgeGrade)) == set(HEDGE_GRADES)
    data = yaml.safe_load(resources.files("cxreval.ontology").joinpath("data/cxr-entities.yaml").read_text("utf-8"))
    data["labelsets"]["chestxray14"]["affirms"] = ["definite"]
    with pytest.raises((OntologyError, ValueError), match="affirms"):
        parse_ontology(data, "bad")


def test_default_projection_is_the_labelers_convention():
    onto = load_ontology()
    x = RuleExtractor(onto).extract("Likely pneumonia.")
    assert project_states(x.states(), onto, "chexpert14")["Pneumonia"] == -1.0
    assert project_states(x.states(), onto, "chestxray14")["Pneumonia"] == 0.0
    assert project_states(x.states(), onto, "chexpert14", certainty="probable")["Pneumonia"] == 1.0
    with pytest.raises(ValueError, match="unknown certainty policy"):
        project_states(x.states(), onto, "chexpert14", certainty="coded")  # type: ignore[arg-type]


def test_certainty_policy_is_signed():
    onto = load_ontology()
    ex = RuleExtractor(onto)
    xs = {"a": ex.extract("Atelectasis or scarring."), "b": ex.extract("No pneumothorax.")}
    ref = project_extractions(xs, onto, "chexpert14", certainty="probable-alternative")
    m = label_metrics(ref, ref, labelset="chexpert14")
    assert "certainty:probable-alternative" in str(m.signature)
    default = project_extractions(xs, onto, "chexpert14")
    assert "certainty:negative" in str(label_metrics(default, default, labelset="chexpert14").signature)
    # tables without grades (a file, an LLM labeler) are signed as such; two policies are refused
    plain = pd.DataFrame({"A": [1.0]})
    assert "certainty:none" in str(label_metrics(plain, plain).signature)
    with pytest.raises(ValueError, match="different certainty policies"):
        label_metrics(ref, default)
    assert "certainty:positive" in str(label_metrics(plain, plain, certainty="positive").signature)
