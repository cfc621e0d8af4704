"""The llm-pairwise engine's answers (SPEC-CXR's verdicts per entity of a report pair), and the
two kinds of LLM answer behind one call (``mode`` ``pairwise`` or ``extract``).

A pairwise answer gives, per entity, ``presence`` TP/FP/FN/TN and the ``location``, ``severity``
and ``comparison`` verdicts (vocabularies: :mod:`cxreval.judge.models`; ``comparison`` is
SPEC-CXR's three values, the model is not asked for ``conflicting-comparison``); duplicates are voted.
The answer shapes and the generic validation are :mod:`cxreval.llm.schemas`'; the mention answers
of the llm-extract engine are :mod:`cxreval.extract.llm_mentions`'.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from cxreval.extract.llm_mentions import mention_format, mention_schema, parse_mentions
from cxreval.judge.models import (
    ATTRIBUTE_VALUES,
    SPEC_COMPARISON_VALUES,
    AttributeJudgement,
    SpecComparisonJudgement,
)
from cxreval.literals import PRESENCE_VALUES, Presence
from cxreval.llm.schemas import Lenient, Mode, ParsedAnswer, Style, entity_answer_schema, entity_items, enum_schema, vote
from cxreval.ontology import Ontology

PAIRWISE_FIELDS = ("presence", "location", "severity", "comparison")


class PairwiseVerdict(Lenient):
    presence: Presence
    location: AttributeJudgement = "not-available"
    severity: AttributeJudgement = "not-available"
    comparison: SpecComparisonJudgement = "other"  # SPEC's three: the model is not asked for conflicts


class PairwiseItem(PairwiseVerdict):
    entity: str = Field(max_length=120)


def pairwise_schema(style: Style, ontology: Ontology, *, max_items: int = 40) -> dict[str, Any]:
    """The JSON schema a pairwise answer must follow (given to the server as ``response_format`` / tool input)."""
    verdict = {
        "presence": enum_schema(PRESENCE_VALUES),
        "location": enum_schema(ATTRIBUTE_VALUES),
        "severity": enum_schema(ATTRIBUTE_VALUES),
        "comparison": enum_schema(SPEC_COMPARISON_VALUES),
    }
    return entity_answer_schema(style, ontology, verdict, verdict, max_items=max_items)


def pairwise_format(style: Style, max_items: int) -> str:
    """The pairwise answer's shape in words and an example, for servers that do not enforce the schema."""
    verdict = {"presence": "TP", "location": "aligned", "severity": "not-available", "comparison": "other"}
    if style == "sparse":
        ex = json.dumps({"entities": [{"entity": "<entity id>", **verdict}]})
        return (
            f"Answer with JSON only, in this shape: {ex}. List every entity that either report "
            f"mentions (TN when both deny it), each once, at most {max_items} items; leave out "
            "entities that neither report mentions."
        )
    return (
        f"Answer with JSON only: one key per entity id of the list, in list order, each like "
        f"{json.dumps(verdict)}. Entities that neither report mentions are TN with "
        "not-available and other."
    )


def parse_pairwise(raw: str, style: Style, ontology: Ontology, *, max_items: int = 40) -> ParsedAnswer:
    """Validate a pairwise answer: items ``entity, presence, location, severity, comparison``,
    one per entity (repeats are voted, a tie keeps the first)."""

    def convert(v: PairwiseVerdict, entity: str, where: str, problems: list[str]) -> dict[str, Any]:
        if isinstance(v, PairwiseItem):
            d = v.model_dump()
            d["entity"] = entity
            return d
        return {"entity": entity, **v.model_dump()}

    collected = entity_items(raw, style, ontology, PairwiseVerdict, PairwiseItem, convert, max_items=max_items)
    items, notes = vote(collected, PAIRWISE_FIELDS)
    return ParsedAnswer(items=items, notes=notes)


# -- both kinds ------------------------------------------------------------------------------
def build_schema(mode: Mode, style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200) -> dict[str, Any]:
    """The JSON schema of a ``pairwise`` or ``extract`` answer."""
    if mode == "pairwise":
        return pairwise_schema(style, ontology, max_items=max_items)
    return mention_schema(style, ontology, max_items=max_items, max_evidence=max_evidence)


def parse_answer(
    raw: str, mode: Mode, style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200
) -> ParsedAnswer:
    """Validate one ``pairwise`` (:func:`parse_pairwise`) or ``extract`` (:func:`parse_mentions`) answer."""
    if mode == "pairwise":
        return parse_pairwise(raw, style, ontology, max_items=max_items)
    return parse_mentions(raw, style, ontology, max_items=max_items, max_evidence=max_evidence)


def format_instructions(mode: Mode, style: Style, max_items: int, max_evidence: int) -> str:
    """The answer shape of a ``pairwise`` or ``extract`` call in words, for servers that do not enforce the schema."""
    if mode == "pairwise":
        return pairwise_format(style, max_items)
    return mention_format(style, max_items, max_evidence)
