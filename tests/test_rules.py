"""The rule engine's machinery: matching, sections, rule files, mention fields.

What the engine reads in a sentence (negation, hedges, attributes, ...) is pinned by the case corpus
(``tests/cases/``, run by ``tests/test_cases.py``); this file tests what a case cannot show.
"""

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


# -- history, sections, normal statements (mention fields) --------------------------------------------------
def test_historical_mention_is_not_a_finding(ex):
    extraction = ex.extract("History of tuberculosis.")
    assert extraction.mentions[0].historical
    assert "tuberculosis" not in extraction.states()


def test_a_skipped_section_ends_at_a_blank_line_only_without_a_findings_title():
    # what the engine then reads is in tests/cases/sections.yaml
    assert split_sections("COMPARISON:\n\n1/1/2020.\n  \nNew right effusion.")[0].name == "body"
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


# -- matching machinery --------------------------------------------------------------------
def test_plural_variants():
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


def test_state_keeps_its_cue(ex):
    assert ex.extract("There may be some hyperinflation.").states()["hyperinflation"].cue == "there may be"
    assert ex.extract("Atelectasis or pneumonia.").states()["pneumonia"].cue == "or"


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


# -- moved from the known-misses file: what a reading case cannot show --------------------------
def test_signature_is_bumped(ex):
    assert ex.signature.startswith("rules@26.c26.")


def test_coordinated_subjects_reach_the_chexpert_label(ex):
    from cxreval.scores.labels import project_extraction

    extraction = ex.extract("The cardiac silhouette and vascularity are enlarged.")
    labels = project_extraction(extraction, load_ontology(), "chexpert14")
    assert labels["Enlarged Cardiomediastinum"] == 1
    assert labels["Cardiomegaly"] == 1


def test_alternatives_project_as_uncertain_in_chexpert(ex):
    from cxreval.scores.labels import project_extraction

    labels = project_extraction(ex.extract("Atelectasis or small effusion."), load_ontology(), "chexpert14")
    assert labels["Atelectasis"] == -1 and labels["Pleural Effusion"] == -1


def test_not_findings_of_a_users_cue_file_must_be_phrases(tmp_path):
    from cxreval.extract.rules import load_rules

    bad = tmp_path / "cues.yaml"
    bad.write_text('version: "x"\nnegation_pre: ["no"]\nnot_findings: [false]\n', encoding="utf-8")
    with pytest.raises(RulesError, match="not_findings"):
        load_rules(load_ontology(), bad)
