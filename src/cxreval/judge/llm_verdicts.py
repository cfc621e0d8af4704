"""The llm-pairwise engine's answers (SPEC-CXR's verdicts per entity of a report pair), and the
two kinds of LLM answer behind one call (``mode`` ``pairwise`` or ``extract``).

A pairwise answer gives, per entity, ``presence`` TP/FP/FN/TN and the ``location``, ``severity``
and ``comparison`` verdicts (vocabularies: :mod:`cxreval.judge.models`; ``comparison`` is
SPEC-CXR's three values, the model is not asked for ``conflicting-comparison``); duplicates are
voted. A sparse answer lists only entities a report states (TP, FN, FP: a true negative changes
no score), each with the words of each report that state it (``reference_quote``,
``candidate_quote``, written before the verdicts so that a model reads before it judges) and how
the two reports name the finding (``specificity``, the finding hierarchy). A dense answer keeps
SPEC-CXR's layout: the four verdicts for every entity.
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
    SPECIFICITY_VALUES,
    AttributeJudgement,
    SpecComparisonJudgement,
    SpecificityJudgement,
)
from cxreval.literals import PRESENCE_VALUES, Presence
from cxreval.llm.schemas import Lenient, Mode, ParsedAnswer, Style, entity_answer_schema, entity_items, enum_schema, vote
from cxreval.ontology import Ontology

PAIRWISE_FIELDS = ("presence", "specificity", "location", "severity", "comparison")


class PairwiseVerdict(Lenient):
    presence: Presence
    location: AttributeJudgement = "not-available"
    severity: AttributeJudgement = "not-available"
    comparison: SpecComparisonJudgement = "other"  # SPEC's three: the model is not asked for conflicts


class PairwiseItem(PairwiseVerdict):
    entity: str = Field(max_length=120)
    reference_quote: str = ""
    candidate_quote: str = ""
    specificity: SpecificityJudgement = "exact"


#: The presence values a sparse answer lists: a true negative changes no score.
SPARSE_PRESENCE: tuple[Presence, ...] = ("TP", "FN", "FP")


def pairwise_schema(
    style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200, specificity: bool = True
) -> dict[str, Any]:
    """The JSON schema a pairwise answer must follow (given to the server as ``response_format`` /
    tool input). Sparse items: entity, the two quotes (``max_evidence`` characters each; none when
    0), presence, specificity (under the finding hierarchy's rule only), then the attributes: a
    model writes them in this order."""
    verdict = {
        "presence": enum_schema(PRESENCE_VALUES),
        "location": enum_schema(ATTRIBUTE_VALUES),
        "severity": enum_schema(ATTRIBUTE_VALUES),
        "comparison": enum_schema(SPEC_COMPARISON_VALUES),
    }
    quote = {"type": "string", "maxLength": max_evidence}
    quotes = {"reference_quote": quote, "candidate_quote": quote} if max_evidence > 0 else {}
    sparse = {
        **quotes,
        "presence": enum_schema(SPARSE_PRESENCE),
        **({"specificity": enum_schema(SPECIFICITY_VALUES)} if specificity else {}),
        "location": verdict["location"],
        "severity": verdict["severity"],
        "comparison": verdict["comparison"],
    }
    return entity_answer_schema(style, ontology, verdict, sparse, max_items=max_items)


def pairwise_format(style: Style, max_items: int, max_evidence: int = 200, *, specificity: bool = True) -> str:
    """The pairwise answer's shape in words and an example, for servers that do not enforce the schema."""
    verdict = {"presence": "TP", "location": "aligned", "severity": "not-available", "comparison": "other"}
    if style == "sparse":
        quotes = {"reference_quote": "<its words>", "candidate_quote": "<its words>"} if max_evidence > 0 else {}
        attributes = {k: v for k, v in verdict.items() if k != "presence"}
        how = {"specificity": "exact"} if specificity else {}
        item = {"entity": "<entity id>", **quotes, "presence": "TP", **how, **attributes}
        limit = f"; each quote at most {max_evidence} characters" if max_evidence > 0 else ""
        return (
            f"Answer with JSON only, in this shape: {json.dumps({'entities': [item]})}. List every entity "
            f"that either report states as present, each once, at most {max_items} items{limit}."
        )
    return (
        f"Answer with JSON only: one key per entity id of the list, in list order, each like "
        f"{json.dumps(verdict)}. Entities that neither report states as present are TN with "
        "not-available and other."
    )


def parse_pairwise(raw: str, style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200) -> ParsedAnswer:
    """Validate a pairwise answer: items ``entity, presence, location, severity, comparison,
    specificity, reference_quote, candidate_quote``, one per entity (repeats are voted on the
    verdicts, a tie keeps the first). A dense answer's items say ``exact`` and quote nothing;
    quotes are cut to ``max_evidence`` characters."""

    def convert(v: PairwiseVerdict, entity: str, where: str, problems: list[str]) -> dict[str, Any]:
        if isinstance(v, PairwiseItem):
            d = v.model_dump()
            d["entity"] = entity
            for side in ("reference_quote", "candidate_quote"):
                d[side] = d[side].strip()[:max_evidence] if max_evidence > 0 else ""
            return d
        return {"entity": entity, **v.model_dump(), "specificity": "exact", "reference_quote": "", "candidate_quote": ""}

    collected = entity_items(raw, style, ontology, PairwiseVerdict, PairwiseItem, convert, max_items=max_items)
    items, notes = vote(collected, PAIRWISE_FIELDS)
    return ParsedAnswer(items=items, notes=notes)


# -- both kinds ------------------------------------------------------------------------------
def build_schema(mode: Mode, style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200) -> dict[str, Any]:
    """The JSON schema of a ``pairwise`` or ``extract`` answer."""
    if mode == "pairwise":
        return pairwise_schema(style, ontology, max_items=max_items, max_evidence=max_evidence)
    return mention_schema(style, ontology, max_items=max_items, max_evidence=max_evidence)


def parse_answer(
    raw: str, mode: Mode, style: Style, ontology: Ontology, *, max_items: int = 40, max_evidence: int = 200
) -> ParsedAnswer:
    """Validate one ``pairwise`` (:func:`parse_pairwise`) or ``extract`` (:func:`parse_mentions`) answer."""
    if mode == "pairwise":
        return parse_pairwise(raw, style, ontology, max_items=max_items, max_evidence=max_evidence)
    return parse_mentions(raw, style, ontology, max_items=max_items, max_evidence=max_evidence)


def format_instructions(mode: Mode, style: Style, max_items: int, max_evidence: int) -> str:
    """The answer shape of a ``pairwise`` or ``extract`` call in words, for servers that do not enforce the schema."""
    if mode == "pairwise":
        return pairwise_format(style, max_items, max_evidence)
    return mention_format(style, max_items, max_evidence)
