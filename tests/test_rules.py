"""The rule engine's machinery: matching, sections, rule files, mention fields.

What the engine reads in a sentence (negation, hedges, attributes, ...) is pinned by the case corpus
(``tests/cases/``, run by ``tests/test_cases.py``); this file tests what a case cannot show.
"""

from __future__ import annotations

import pytest

from cxreval.extract import default_extractor
from cxreval.extract.rules import RuleExtractor, RulesError
from cxreval.extract.rules.scanning import NameGrammar, PhraseTrie, plural_variants
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


def _user_rules(tmp_path, text: str):
    """The packaged rules with a user rule file holding ``text``."""
    from cxreval.extract.rules import load_rules

    path = tmp_path / "local.yaml"
    path.write_text(text, encoding="utf-8")
    return load_rules(load_ontology(), path)


def test_bare_yaml_no_is_rejected(tmp_path):
    with pytest.raises(RulesError, match=r"local.yaml:2: .*quote it"):
        _user_rules(tmp_path, "rules:\n  - {id: local.no, kind: cue, category: negation_pre, doc: d, phrases: [no]}\n")


def test_normal_statement_with_unknown_entity_is_rejected(tmp_path):
    with pytest.raises(RulesError, match="local.yaml:2: .*not in ontology"):
        _user_rules(tmp_path, "rules:\n  - {id: local.n, kind: normal, doc: d, pattern: x, entities: [nope]}\n")


def test_extraction_is_deterministic(ex):
    text = "Findings: Moderate right pleural effusion. Possible left lower lobe pneumonia."
    assert ex.extract(text) == RuleExtractor(load_ontology()).extract(text)


def test_state_keeps_its_cue(ex):
    assert ex.extract("There may be some hyperinflation.").states()["hyperinflation"].cue == "there may be"
    assert ex.extract("Atelectasis or pneumonia.").states()["pneumonia"].cue == "or"


def test_gapped_scan_keeps_distinct_overlaps():
    from cxreval.extract.rules.scanning import scan_gapped

    trie: PhraseTrie[str] = PhraseTrie()
    trie.add(("tortuous", "aorta"), "T")
    trie.add(("calcified", "aorta"), "C")
    trie.add(("effusion",), "E")
    trie.add(("pleural", "effusion"), "P")
    words = ["tortuous", "calcified", "aorta", "and", "pleural", "effusion"]
    grammar = NameGrammar(frozenset({"calcified"}), frozenset({"and"}), ("is", "are"), frozenset(), max_skips=2)
    found = scan_gapped(trie, words, grammar)
    assert [(m.value, m.used) for m in found] == [("T", (0, 2)), ("C", (1, 2)), ("P", (4, 5))]
    # nothing is skipped unless it is a modifier
    assert [m.value for m in scan_gapped(trie, ["tortuous", "big", "aorta"], grammar._replace(skippable=frozenset()))] == []


# -- site rules (names.yaml `sites`) -----------------------------------------------------------
def test_site_rule_moves_a_mention_to_the_site_entity(tmp_path):
    onto = load_ontology()
    ex = RuleExtractor(
        onto,
        _user_rules(
            tmp_path,
            """rules:
  - id: site.degenerative_spine.degenerative_joint_disease
    words: [hip]
    unless: [spine]
""",
        ),
    )
    moved = ex.extract("Degenerative changes are seen at the right hip.").states()
    assert set(moved) == {"degenerative_joint_disease"}
    assert moved["degenerative_joint_disease"].side == "right"
    kept = ex.extract("Spine and right hip degenerative changes.").states()
    assert set(kept) == {"degenerative_spine"}
    # without the rule the mention stays where the synonym puts it
    plain = RuleExtractor(
        onto,
        _user_rules(
            tmp_path,
            """rules:
  - {id: site.degenerative_spine.degenerative_joint_disease, enabled: false}
""",
        ),
    )
    assert set(plain.extract("Degenerative changes are seen at the right hip.").states()) == {"degenerative_spine"}


def test_site_rule_must_name_known_entities(tmp_path):
    with pytest.raises(RulesError, match="local.yaml:2: .*not in ontology"):
        _user_rules(
            tmp_path, "rules:\n  - {id: site.x, kind: site, doc: d, entity: degenerative_spine, to: nope, words: [hip]}\n"
        )
    with pytest.raises(RulesError, match="local.yaml:2: .*words"):
        _user_rules(tmp_path, "rules:\n  - {id: site.x, kind: site, doc: d, entity: degenerative_spine, to: fracture}\n")


def test_packaged_site_rules_are_kept_only_for_entities_a_user_ontology_has():
    from cxreval.extract.rules import load_rules
    from cxreval.ontology import parse_ontology
    from tests.conftest import TINY

    tiny = parse_ontology(TINY, "tiny")
    assert load_rules(tiny).sites == {}  # the packaged rules name entities TINY lacks: dropped, no error
    assert "degenerative_spine" in load_rules(load_ontology()).sites


# -- moved from the known-misses file: what a reading case cannot show --------------------------
def test_signature_is_bumped(ex):
    assert ex.signature.startswith("rules@32.c32.")


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


def test_not_findings_of_a_users_rule_file_must_be_phrases(tmp_path):
    with pytest.raises(RulesError, match="finding.not_a_finding"):
        _user_rules(tmp_path, "rules:\n  - {id: finding.not_a_finding, add_phrases: [false]}\n")


def test_a_cue_file_of_the_old_format_is_refused_with_the_way_forward(tmp_path):
    with pytest.raises(RulesError, match=r"cue file of cxreval < 0.3 .*negation_pre.*`rules:`"):
        _user_rules(tmp_path, 'version: "x"\nnegation_pre: ["no"]\n')
