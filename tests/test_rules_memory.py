"""The rule engine on hostile text: case folding that changes lengths, invisible characters, and
reports with no full stop. Evidence must stay a slice of the original text and memory bounded."""

from __future__ import annotations

import csv
import re

import pytest

from cxreval.extract import Extraction, Mention, default_extractor
from cxreval.extract.rules import MAX_SCOPE_CHARS, RuleExtractor
from cxreval.extract.text import normalize, term_tokens, tokenize
from tests.conftest import shared_data_dir


@pytest.fixture(scope="module")
def ex() -> RuleExtractor:
    return default_extractor()


def only(extraction: Extraction, entity: str) -> Mention:
    found = [m for m in extraction.mentions if m.entity == entity and not m.implied]
    assert len(found) == 1, found
    return found[0]


def assert_evidence_is_original(text: str, extraction: Extraction) -> None:
    """Every mention's offsets slice ``text``, and its evidence is that slice around the mention."""
    for m in extraction.mentions:
        assert 0 <= m.sentence_start <= m.start < m.end <= m.sentence_end <= len(text)
        assert m.sentence == text[m.sentence_start : m.sentence_end]
    for state in extraction.states().values():
        assert state.evidence in text


# -- normalisation -------------------------------------------------------------------------
def test_ascii_is_only_lower_cased():
    norm = normalize("No Pleural Effusion.")
    assert norm.text == "no pleural effusion." and norm.span(3, 10) == (3, 10)


@pytest.mark.parametrize(
    "raw, folded",
    [
        ("İ", "i"),  # "i" + combining dot when merely lower-cased: one character became two
        ("ﬁbrosis", "fibrosis"),
        ("STRAẞE", "strasse"),
        ("ＰＮＥＵＭＯＴＨＯＲＡＸ", "pneumothorax"),
        ("pneu\u00admo\u200bth\u200co\u200dr\u2060a\ufeffx", "pneumothorax"),
        ("no\u00a0effusion", "no effusion"),
        ("e\u0301", "e"),  # rules@26: a diacritic on a Latin letter is removed (a look-alike of "e")
    ],
)
def test_normalize_folds_and_maps_back(raw, folded):
    norm = normalize(raw)
    assert norm.text == folded
    assert norm.span(0, len(norm.text)) == (0, len(raw))


def test_tokens_point_into_the_original_text():
    text = "İİİ ﬁbrosis, pneu\u00admothorax"
    assert [(t.text, text[t.start : t.end]) for t in tokenize(text)] == [
        ("iii", "İİİ"),
        ("fibrosis", "ﬁbrosis"),
        (",", ","),
        ("pneumothorax", "pneu\u00admothorax"),
    ]
    assert term_tokens("Pneu\u00admothorax") == ("pneumothorax",)


# -- evidence offsets ----------------------------------------------------------------------
@pytest.mark.parametrize("prefix", ["İ" * 20, "İstanbul ", "ﬁ ﬃ ", "ẞ ß ", "Ｘ-ray: ", "e\u0301\u0301 ", "\u00ad" * 9])
def test_length_changing_characters_keep_offsets(ex, prefix):
    text = f"Findings: {prefix} Small left pleural effusion. No pneumothorax."
    extraction = ex.extract(text)
    effusion = only(extraction, "pleural_effusion")
    assert effusion.status == "present" and effusion.side == "left"
    assert text[effusion.start : effusion.end] == "pleural effusion"
    assert effusion.sentence.endswith("Small left pleural effusion.")
    assert text[only(extraction, "pneumothorax").start :].startswith("pneumothorax")
    assert extraction.states()["pneumothorax"].evidence == "No pneumothorax."
    assert_evidence_is_original(text, extraction)


@pytest.mark.parametrize(
    "word, entity",
    [
        ("pneu\u00admothorax", "pneumothorax"),
        ("effu\u200bsion", "pleural_effusion"),
        ("cardio\u200dmegaly", "cardiomegaly"),
        ("consoli\u2060dation", "consolidation"),
        ("\ufeffatelectasis", "atelectasis"),
        ("PNEU\u00adMO\u00adTHO\u00adRAX", "pneumothorax"),
    ],
)
def test_invisible_characters_do_not_hide_a_finding(ex, word, entity):
    text = f"Findings: No {word}. Impression: Mild {word}."
    extraction = ex.extract(text)
    statuses = [m.status for m in extraction.mentions if m.entity == entity and not m.implied]
    assert statuses == ["absent", "present"]
    assert extraction.states()[entity].evidence == f"Mild {word}."
    assert_evidence_is_original(text, extraction)


def test_invisible_characters_inside_a_section_title(ex):
    text = "Indi\u00adcation: rule out pneumonia. Find\u200bings: No pneumonia."
    assert [m.section for m in ex.extract(text).mentions if m.entity == "pneumonia"] == ["findings"]


def test_normal_statement_evidence_is_original_text(ex):
    text = "Findings: İİ No acute cardio\u00adpulmonary process."
    extraction = ex.extract(text)
    implied = [m for m in extraction.mentions if m.implied]
    assert implied and {m.sentence for m in implied} == {"No acute cardio\u00adpulmonary process"}
    assert {m.cue for m in implied} == {"no acute cardiopulmonary process"}
    assert_evidence_is_original(text, extraction)


# -- bounded scopes ------------------------------------------------------------------------
def test_a_report_with_no_full_stop_finishes_with_bounded_evidence(ex):
    unit = "small left pleural effusion, no pneumothorax, mild cardiomegaly, "
    text = "Findings: " + unit * (200_000 // len(unit))
    extraction = ex.extract(text)
    assert len(extraction.mentions) == 3 * (200_000 // len(unit))
    assert max(len(m.sentence) for m in extraction.mentions) <= 2 * MAX_SCOPE_CHARS + 50
    assert [m.status for m in extraction.mentions[:3]] == ["present", "absent", "present"]
    assert [m.status for m in extraction.mentions[-3:]] == ["present", "absent", "present"]
    assert_evidence_is_original(text, extraction)


def test_a_run_of_names_finishes(ex):
    # Each name is free for a cue to cross; without a cap this is quadratic.
    extraction = ex.extract("Findings: no " + "pneumothorax " * 20_000)
    assert len(extraction.mentions) == 20_000
    assert extraction.mentions[0].status == "absent" and extraction.mentions[-1].status == "present"


def test_a_short_sentence_is_never_cut(ex):
    text = "Findings: Mild cardiomegaly; no pleural effusion\nor pneumothorax."
    assert {m.sentence for m in ex.extract(text).mentions} == {text[len("Findings: ") :]}


@pytest.mark.parametrize("mark, ending", [(";", "chest ;"), ("\n", "chest"), (":", "chest :"), (",", "chest ,")])
def test_a_long_sentence_is_cut_at_a_clause_boundary(ex, mark, ending):
    filler = "with stable appearance of the chest " * 10
    text = f"Findings: Small right pleural effusion {filler}{mark} mild cardiomegaly {filler}"
    extraction = ex.extract(text)
    effusion, heart = only(extraction, "pleural_effusion"), only(extraction, "cardiomegaly")
    assert effusion.sentence.startswith("Small right pleural effusion") and effusion.sentence.endswith(ending)
    assert heart.sentence.startswith("mild cardiomegaly")
    assert len(effusion.sentence) <= MAX_SCOPE_CHARS and len(heart.sentence) <= MAX_SCOPE_CHARS


def test_a_long_sentence_with_no_boundary_is_cut_at_the_cap(ex):
    text = "Findings: " + "pneumothorax " * 100
    lengths = {len(m.sentence) for m in ex.extract(text).mentions}
    assert max(lengths) <= MAX_SCOPE_CHARS and len(lengths) > 1


# -- the model -----------------------------------------------------------------------------
def test_mentions_hold_offsets_not_copies(ex):
    text = "Findings: Small left pleural effusion. No pneumothorax."
    extraction = ex.extract(text)
    assert extraction.text is text
    assert all(m.source is text and m.quote == "" for m in extraction.mentions)
    assert "source" not in extraction.mentions[0].model_dump()


def test_an_extraction_read_back_keeps_its_evidence(ex):
    extraction = ex.extract("Findings: Small left pleural effusion. No pneumothorax.")
    again = Extraction.model_validate_json(extraction.model_dump_json())
    assert [m.sentence for m in again.mentions] == [m.sentence for m in extraction.mentions]
    assert again.states() == extraction.states()


def test_a_quote_still_serves_as_evidence():
    m = Mention(entity="pneumothorax", status="present", sentence="small pneumothorax")
    assert m.sentence == "small pneumothorax" and m.quote == "small pneumothorax"
    assert Extraction(engine="llm", mentions=(m,)).states()["pneumothorax"].evidence == "small pneumothorax"


# -- IU X-ray: hostile copies read as the plain reports ------------------------------------
_INVISIBLE = re.compile("[\u00ad\u200b]")


def _hostile(text: str) -> str:
    """The same report as a reader sees it, in characters the engine must normalise."""
    text = re.sub(r"\b([A-Za-z]{3})([A-Za-z]{3,})", "\\1\u00ad\\2", text)  # soft hyphens in long words
    text = re.sub(r"\b([A-Za-z]{2})([A-Za-z]{1,3})\b", "\\1\u200b\\2", text)  # zero-width spaces in short ones
    return text.replace("I", "İ").replace("fi", "ﬁ").replace(" ", "\u00a0")


def _plain(text: str) -> str:
    return _INVISIBLE.sub("", text).replace("İ", "I").replace("ﬁ", "fi").replace("\u00a0", " ")


def _iu_sample(step: int = 10) -> list[str]:
    from cxreval.datasets.iu_xray import report_text

    root = shared_data_dir()
    assert root is not None
    with (root / "iu-xray" / "indiana_reports.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))[::step]
    return [t for t in (report_text(r["findings"], r["impression"]) for r in rows) if t]


@pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")
def test_iu_reports_read_the_same_in_hostile_characters(ex):
    texts = _iu_sample()
    assert len(texts) > 300
    for text in texts:
        plain = ex.extract(text)
        assert_evidence_is_original(text, plain)
        # No IU X-ray sentence is long enough to be cut (the longest has 262 characters).
        assert all(len(m.sentence) <= MAX_SCOPE_CHARS for m in plain.mentions)
        hostile_text = _hostile(text)
        assert _plain(hostile_text) == text
        hostile = ex.extract(hostile_text)
        assert_evidence_is_original(hostile_text, hostile)
        fields = ("entity", "status", "side", "zones", "severity", "comparison", "historical", "implied", "section", "cue")
        assert [m.model_dump(include=set(fields)) for m in hostile.mentions] == [
            m.model_dump(include=set(fields)) for m in plain.mentions
        ], text
        assert [_plain(hostile_text[m.start : m.end]) for m in hostile.mentions] == [
            text[m.start : m.end] for m in plain.mentions
        ]
        assert [_plain(m.sentence) for m in hostile.mentions] == [m.sentence for m in plain.mentions]
