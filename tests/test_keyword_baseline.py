"""The keyword + sentence-NegEx baseline in benchmarks/ reads what its doc says, and the mentions it
builds without validation are the ones validation would build (every accuracy and speed figure
has this baseline beside it, so a wrong baseline would make every ratio wrong)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cxreval.extract.models import Extraction, Mention
from cxreval.ontology import load_ontology

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from keyword_negex import KeywordNegex  # noqa: E402


@pytest.fixture(scope="module")
def baseline() -> KeywordNegex:
    return KeywordNegex(load_ontology())


def test_keywords_are_found_longest_first_and_negated_by_their_sentence(baseline: KeywordNegex) -> None:
    text = "No pneumothorax. Small left pleural effusion. Right lower lobe atelectasis has resolved."
    got = [(m.entity, m.status, text[m.start : m.end]) for m in baseline.extract(text).mentions]
    assert got == [
        ("pneumothorax", "absent", "pneumothorax"),
        ("pleural_effusion", "present", "pleural effusion"),
        ("atelectasis", "absent", "atelectasis"),
    ]


def test_unvalidated_mentions_equal_validated_ones(baseline: KeywordNegex) -> None:
    text = (
        "Heart size is normal. There is no focal consolidation. Mild cardiomegaly and a small "
        "right effusion, without pneumothorax. Degenerative changes of the thoracic spine."
    )
    fast = baseline.extract(text)
    checked = Extraction(
        engine=fast.engine,
        text=text,
        mentions=tuple(
            Mention(
                entity=m.entity,
                status=m.status,
                start=m.start,
                end=m.end,
                sentence_start=m.sentence_start,
                sentence_end=m.sentence_end,
            )
            for m in fast.mentions
        ),
    )
    assert len(fast.mentions) >= 4
    assert fast == checked
    assert [m.sentence for m in fast.mentions] == [m.sentence for m in checked.mentions]
    assert all(m.certainty == ("negated" if m.status == "absent" else "definite") for m in fast.mentions)
