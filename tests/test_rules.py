"""The rule engine, one rule at a time, on sentences written for these tests."""

from __future__ import annotations

import pytest

from cxreval.extract import default_extractor
from cxreval.extract.lexicon import PhraseTrie, plural_variants
from cxreval.extract.rules import RuleExtractor, RulesError, RuleSet
from cxreval.extract.text import split_sections, tokenize
from cxreval.ontology import load_ontology


@pytest.fixture(scope="module")
def ex() -> RuleExtractor:
    return default_extractor()


def states(ex: RuleExtractor, text: str):
    return ex.extract(text).states()


def status(ex, text, entity):
    s = states(ex, text).get(entity)
    return None if s is None else s.status


# -- negation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, entity",
    [
        ("No pleural effusion.", "pleural_effusion"),
        ("There is no evidence of pneumothorax.", "pneumothorax"),
        ("Without focal consolidation.", "consolidation"),
        ("Negative for pneumothorax.", "pneumothorax"),
        ("Pneumothorax is not seen.", "pneumothorax"),
        ("A pleural effusion is not identified.", "pleural_effusion"),
        ("The previously seen effusion has resolved.", "pleural_effusion"),
        ("Free of consolidation.", "consolidation"),
    ],
)
def test_negation_cues(ex, text, entity):
    assert status(ex, text, entity) == "absent"


def test_negation_covers_a_list(ex):
    s = states(ex, "No focal consolidation, pleural effusion, or pneumothorax.")
    assert {e: s[e].status for e in ("consolidation", "pleural_effusion", "pneumothorax")} == {
        "consolidation": "absent", "pleural_effusion": "absent", "pneumothorax": "absent"}


def test_negation_stops_at_terminator(ex):
    s = states(ex, "No pleural effusion, but there is a small pneumothorax.")
    assert s["pleural_effusion"].status == "absent"
    assert s["pneumothorax"].status == "present"


def test_negation_stops_at_sentence_end(ex):
    s = states(ex, "No pneumothorax. Small left pleural effusion.")
    assert s["pneumothorax"].status == "absent" and s["pleural_effusion"].status == "present"


def test_list_item_with_its_own_severity_is_asserted(ex):
    s = states(ex, "No pneumothorax, mild cardiomegaly.")
    assert s["pneumothorax"].status == "absent"
    assert s["cardiomegaly"].status == "present" and s["cardiomegaly"].severity == "mild"


def test_pseudo_negation_keeps_the_finding(ex):
    s = states(ex, "No change in the small right pleural effusion.")["pleural_effusion"]
    assert s.status == "present" and s.comparison == "unchanged" and s.side == "right"


def test_no_new_finding_is_absent(ex):
    assert status(ex, "No new consolidation.", "consolidation") == "absent"


# -- uncertainty ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, entity",
    [
        ("Possible right lower lobe pneumonia.", "pneumonia"),
        ("Opacity may represent atelectasis.", "atelectasis"),
        ("Pneumonia cannot be excluded.", "pneumonia"),
        ("Findings suspicious for metastases.", "metastases"),
        ("Questionable small pneumothorax.", "pneumothorax"),
        ("Atelectasis is likely.", "atelectasis"),
    ],
)
def test_uncertainty_cues(ex, text, entity):
    assert status(ex, text, entity) == "uncertain"


def test_alternatives_are_uncertain(ex):
    s = states(ex, "Left basilar atelectasis or pneumonia.")
    assert s["atelectasis"].status == "uncertain" and s["pneumonia"].status == "uncertain"


def test_negated_alternatives_stay_negated(ex):
    s = states(ex, "No pleural effusion or pneumothorax.")
    assert s["pleural_effusion"].status == "absent" and s["pneumothorax"].status == "absent"


# -- history, sections, normal statements --------------------------------------------------
def test_historical_mention_is_not_a_finding(ex):
    extraction = ex.extract("History of tuberculosis.")
    assert extraction.mentions[0].historical
    assert "tuberculosis" not in extraction.states()


def test_indication_is_not_read(ex):
    s = states(ex, "Indication: rule out pneumonia. Findings: Lungs are clear.")
    assert "pneumonia" not in s or s["pneumonia"].status == "absent"


def test_a_paragraph_after_a_skipped_section_is_read(ex):
    # rules@25: in a report with no Findings title, a skipped section before any Impression ends at its
    # first blank line; the paragraph after it is untitled text
    s = states(ex, "INDICATION: Rule out pneumonia.\n\nThe lungs are clear. Small right effusion.")
    assert s["pleural_effusion"].status == "present" and s["pneumonia"].status == "absent"
    assert split_sections("COMPARISON:\n\n1/1/2020.\n  \nNew right effusion.")[0].name == "body"
    # with a Findings title, a second paragraph is more indication (a review of 150 multi-line
    # reports: reading it overruled the findings on 46 entities); nothing is released after an Impression
    s = states(ex, "INDICATION: Cough.\n\nEvaluate for pneumonia.\n\nFINDINGS: No pneumonia. No effusion.")
    assert s["pneumonia"].status == "absent"
    s = states(ex, "INDICATION: Cough.\n\nThe lungs are clear.\n\nIMPRESSION: Normal.\n\nRECOMMENDATION: None."
                   "\n\nA small pneumothorax would be better seen on expiration.")
    assert "pneumothorax" not in s and s["consolidation"].status == "absent"
    # one paragraph, or a line break without a blank line: the skipped section runs to the next title
    assert split_sections("Indication: rule out pneumonia. Lungs are clear.") == []
    assert [x.name for x in split_sections("INDICATION: Fever.\nRule out pneumonia.\nFINDINGS: Clear.")] == ["findings"]


def test_sections_are_named(ex):
    names = [s.name for s in split_sections("Comparison: none. Findings: a. Impression: b.")]
    assert names == ["findings", "impression"]
    mention = ex.extract("Findings: clear. Impression: Small pneumothorax.").mentions[0]
    assert mention.section == "impression"


@pytest.mark.parametrize(
    "text, entity",
    [
        ("No acute cardiopulmonary process.", "pneumothorax"),
        ("No acute cardiopulmonary abnormality.", "pleural_effusion"),
        ("The lungs are clear.", "consolidation"),
        ("Heart size is normal.", "cardiomegaly"),
        ("The heart is normal in size.", "cardiomegaly"),
        ("The cardiomediastinal silhouette is within normal limits.", "cardiomegaly"),
        ("No acute osseous abnormality.", "fracture"),
        ("Normal chest radiograph.", "cardiomegaly"),
    ],
)
def test_normal_statements_imply_absence(ex, text, entity):
    mentions = [m for m in ex.extract(text).mentions if m.entity == entity]
    assert mentions and all(m.implied and m.status == "absent" for m in mentions)


def test_stated_finding_beats_normal_statement(ex):
    s = states(ex, "Small left pleural effusion. Otherwise no acute cardiopulmonary process.")
    assert s["pleural_effusion"].status == "present"


# -- attributes ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, entity, side, zones",
    [
        ("Right lower lobe opacity.", "lung_opacity", "right", ("lower",)),
        ("Opacity in the left upper lobe.", "lung_opacity", "left", ("upper",)),
        ("Bibasilar atelectasis.", "atelectasis", "bilateral", ("lower",)),
        ("Right and left pleural effusions.", "pleural_effusion", "bilateral", ()),
        ("Left-sided pneumothorax.", "pneumothorax", "left", ()),
        ("Retrocardiac opacity.", "lung_opacity", None, ("retrocardiac",)),
    ],
)
def test_location(ex, text, entity, side, zones):
    s = states(ex, text)[entity]
    assert s.side == side and s.zones == zones


def test_side_does_not_leak_across_and(ex):
    s = states(ex, "Right lower lobe opacity and left pleural effusion.")
    assert s["lung_opacity"].side == "right" and s["pleural_effusion"].side == "left"


@pytest.mark.parametrize(
    "text, entity, severity",
    [
        ("Small left pleural effusion.", "pleural_effusion", "mild"),
        ("Moderate cardiomegaly.", "cardiomegaly", "moderate"),
        ("Large right pneumothorax.", "pneumothorax", "severe"),
        ("Mild to moderate pulmonary edema.", "pulmonary_edema", "moderate"),
        ("The pleural effusion is small.", "pleural_effusion", "mild"),
        ("Pleural effusion.", "pleural_effusion", None),
    ],
)
def test_severity(ex, text, entity, severity):
    assert states(ex, text)[entity].severity == severity


@pytest.mark.parametrize(
    "text, entity, change",
    [
        ("New right pleural effusion.", "pleural_effusion", "new"),
        ("Increased left pleural effusion.", "pleural_effusion", "increased"),
        ("The pneumothorax has increased in size.", "pneumothorax", "increased"),
        ("Improved right lower lobe consolidation.", "consolidation", "decreased"),
        ("Stable cardiomegaly.", "cardiomegaly", "unchanged"),
        ("Right pneumothorax, unchanged.", "pneumothorax", "unchanged"),
        ("Left pneumothorax, new since prior.", "pneumothorax", "new"),
        ("Interval resolution of the pleural effusion.", "pleural_effusion", "resolved"),
        ("Cardiomegaly.", "cardiomegaly", None),
    ],
)
def test_comparison(ex, text, entity, change):
    assert states(ex, text)[entity].comparison == change


# -- matching machinery --------------------------------------------------------------------
def test_plurals_and_hyphens_match(ex):
    assert status(ex, "Bilateral pleural effusions.", "pleural_effusion") == "present"
    assert status(ex, "Patchy opacities.", "lung_opacity") == "present"
    assert status(ex, "Left-sided effusion.", "pleural_effusion") == "present"
    assert plural_variants(("metastasis",)) == [("metastases",)]


def test_longest_match_wins():
    trie: PhraseTrie[str] = PhraseTrie()
    trie.add(("effusion",), "pleural")
    trie.add(("pericardial", "effusion"), "pericardial")
    words = [t.text for t in tokenize("Small pericardial effusion and effusion.")]
    assert [v for _, _, v in trie.scan(words)] == ["pericardial", "pleural"]


def test_decimal_numbers_are_one_token():
    assert [t.text for t in tokenize("A 1.5 cm nodule.")] == ["a", "1.5", "cm", "nodule", "."]


def test_mentions_point_back_to_the_text(ex):
    text = "Findings: Small left pleural effusion."
    m = ex.extract(text).mentions[0]
    assert text[m.start : m.end].lower() == "pleural effusion"
    assert m.sentence == "Small left pleural effusion."


def test_bare_yaml_no_is_rejected():
    onto = load_ontology()
    with pytest.raises(RulesError, match="quote it"):
        RuleSet.from_data({"negation_pre": [False]}, {}, onto, "bad.yaml")


def test_normal_statement_with_unknown_entity_is_rejected():
    onto = load_ontology()
    with pytest.raises(RulesError, match="not in ontology"):
        RuleSet.from_data({}, {"statements": [{"pattern": "x", "entities": ["nope"]}]}, onto, "n.yaml")


def test_extraction_is_deterministic(ex):
    text = "Findings: Moderate right pleural effusion. Possible left lower lobe pneumonia."
    assert ex.extract(text) == RuleExtractor(load_ontology()).extract(text)


# -- rules added while tuning on the IU X-ray train split ------------------------------------
def test_hedge_inside_a_negation_is_negated(ex):
    s = states(ex, "There is no focal airspace opacity to suggest pneumonia.")
    assert s["pneumonia"].status == "absent"


def test_hedge_after_a_comma_is_not_negated(ex):
    s = states(ex, "No pneumothorax, possible small left pleural effusion.")
    assert s["pneumothorax"].status == "absent" and s["pleural_effusion"].status == "uncertain"


def test_size_words_inside_a_negated_list(ex):
    s = states(ex, "No focal consolidation, suspicious opacity, large pleural effusion, or pneumothorax.")
    assert s["pleural_effusion"].status == "absent" and s["pneumothorax"].status == "absent"


def test_may_be_is_a_hedge_before_the_finding(ex):
    s = ex.extract("There may be some hyperinflation.").states()["hyperinflation"]
    assert s.status == "uncertain" and s.cue == "there may be"


def test_age_indeterminate_is_not_a_hedge(ex):
    assert status(ex, "Age-indeterminate wedge deformity of T6.", "vertebral_compression_fracture") == "present"


def test_modifiers_inside_a_name(ex):
    s = states(ex, "Tortuous calcified thoracic aorta.")
    assert s["tortuous_aorta"].status == "present" and s["aortic_calcification"].status == "present"
    s = states(ex, "Calcified right hilar lymph nodes.")
    assert s["calcified_lymph_nodes"].side == "right"
    # a redaction inside a name does not hide it
    assert status(ex, "Wedge XXXX deformity of a midthoracic vertebra.", "vertebral_compression_fracture") == "present"


def test_post_negation_normal_words(ex):
    assert status(ex, "Pulmonary vascular engorgement is within normal limits.", "vascular_congestion") == "absent"


def test_resolution_phrases_negate(ex):
    s = states(ex, "Interval resolution of the left pleural effusion.")["pleural_effusion"]
    assert s.status == "absent" and s.comparison == "resolved"


def test_state_keeps_its_cue(ex):
    assert states(ex, "Atelectasis or pneumonia.")["pneumonia"].cue == "or"


def test_gapped_scan_keeps_distinct_overlaps():
    from cxreval.extract.lexicon import scan_gapped

    trie: PhraseTrie[str] = PhraseTrie()
    trie.add(("tortuous", "aorta"), "T")
    trie.add(("calcified", "aorta"), "C")
    trie.add(("effusion",), "E")
    trie.add(("pleural", "effusion"), "P")
    words = ["tortuous", "calcified", "aorta", "and", "pleural", "effusion"]
    found = scan_gapped(trie, words, frozenset({"calcified"}), max_skips=2)
    assert [(m.value, m.used) for m in found] == [("T", (0, 2)), ("C", (1, 2)), ("P", (4, 5))]
    # nothing is skipped unless it is a modifier
    assert [m.value for m in scan_gapped(trie, ["tortuous", "big", "aorta"], frozenset(), 2)] == []


def test_change_clause_after_a_long_finding_phrase(ex):
    s = states(ex, "There is a calcified granuloma at the left lung base, decreased compared with the prior study.")
    assert s["calcified_granuloma"].comparison == "decreased"
    # the change belongs to the finding its own clause names
    s = states(ex, "Right pleural effusion, new left pneumothorax.")
    assert s["pleural_effusion"].comparison is None and s["pneumothorax"].comparison == "new"


def test_rib_levels_inside_a_name(ex):
    s = states(ex, "There is a displaced fracture of the right 6th rib.")
    assert s["rib_fracture"].status == "present" and s["rib_fracture"].side == "right"


# -- site rules (cues.yaml `site_entities`) ----------------------------------------------------
def test_site_rule_moves_a_mention_to_the_site_entity():
    onto = load_ontology()
    cues = {"site_entities": [{"entity": "degenerative_spine", "to": "degenerative_joint_disease",
                               "words": ["hip"], "unless": ["spine"]}]}
    ex = RuleExtractor(onto, RuleSet.from_data(cues, {}, onto, "sites.yaml"))
    moved = ex.extract("Degenerative changes are seen at the right hip.").states()
    assert set(moved) == {"degenerative_joint_disease"}
    assert moved["degenerative_joint_disease"].side == "right"
    kept = ex.extract("Spine and right hip degenerative changes.").states()
    assert set(kept) == {"degenerative_spine"}
    # without the rule the mention stays where the synonym puts it
    plain = RuleExtractor(onto, RuleSet.from_data({}, {}, onto, "none.yaml"))
    assert set(plain.extract("Degenerative changes are seen at the right hip.").states()) == {"degenerative_spine"}


def test_site_rule_must_name_known_entities():
    onto = load_ontology()
    with pytest.raises(RulesError, match="not in the ontology"):
        RuleSet.from_data({"site_entities": [{"entity": "degenerative_spine", "to": "nope", "words": ["hip"]}]},
                          {}, onto, "bad.yaml")
    with pytest.raises(RulesError, match="needs entity"):
        RuleSet.from_data({"site_entities": [{"entity": "degenerative_spine", "to": "fracture"}]}, {}, onto, "bad.yaml")


def test_packaged_site_rules_are_kept_only_for_entities_a_user_ontology_has():
    from cxreval.extract.rules import load_rules
    from cxreval.ontology import parse_ontology
    from tests.conftest import TINY

    tiny = parse_ontology(TINY, "tiny")
    assert load_rules(tiny).sites == {}  # the packaged rules name entities TINY lacks: dropped, no error
    assert "degenerative_spine" in load_rules(load_ontology()).sites
