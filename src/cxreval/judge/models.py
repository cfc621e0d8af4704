"""The judgement table: one row per (pair, entity), SPEC-CXR's fields.

Every score in cxreval is computed from these rows, whichever engine produced them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from cxreval.literals import Presence

AttributeJudgement = Literal["aligned", "not-aligned", "not-available"]
#: SPEC-CXR's three comparison verdicts (what the LLM pairwise engines answer).
SpecComparisonJudgement = Literal["adding-unmentioned-comparison", "missing-mentioned-comparison", "other"]
#: SPEC's three plus cxreval's ``conflicting-comparison``: both reports state a change from a
#: prior for the entity and the directions disagree (:func:`cxreval.judge.compare.judge_comparison`;
#: ``spec_compat`` maps it back to ``other``).
ComparisonJudgement = Literal["adding-unmentioned-comparison", "missing-mentioned-comparison", "conflicting-comparison", "other"]

#: How the two reports name a finding they share (the finding hierarchy, docs/scoring.md, "The
#: judgement rule"): ``exact`` one entity on both sides (every flat row); ``synonym`` two members of
#: one near-synonym class (no error); ``less-specific`` the candidate names an ancestor of the
#: reference's finding ("pneumothorax" for "tension pneumothorax"); ``more-specific`` the candidate
#: names a descendant of it. The last two are errors of their own kinds.
SpecificityJudgement = Literal["exact", "synonym", "less-specific", "more-specific"]
SPECIFICITY_VALUES: tuple[SpecificityJudgement, ...] = ("exact", "synonym", "less-specific", "more-specific")

ATTRIBUTE_VALUES: tuple[AttributeJudgement, ...] = ("aligned", "not-aligned", "not-available")
SPEC_COMPARISON_VALUES: tuple[SpecComparisonJudgement, ...] = (
    "adding-unmentioned-comparison",
    "missing-mentioned-comparison",
    "other",
)
COMPARISON_VALUES: tuple[ComparisonJudgement, ...] = (
    "adding-unmentioned-comparison",
    "missing-mentioned-comparison",
    "conflicting-comparison",
    "other",
)


#: The report-level error rule (SPEC-CXR section 2), defined once: each kind of error, the field
#: it is read from and the values that are that error. A row counts one error per kind it shows;
#: a pair's error count is the sum over its rows. Every error count in cxreval comes from here.
ERROR_KINDS: dict[str, tuple[str, frozenset[str]]] = {
    "fp": ("presence", frozenset({"FP"})),
    "fn": ("presence", frozenset({"FN"})),
    "location_not_aligned": ("location", frozenset({"not-aligned"})),
    "severity_not_aligned": ("severity", frozenset({"not-aligned"})),
    "adding_unmentioned_comparison": ("comparison", frozenset({"adding-unmentioned-comparison"})),
    "missing_mentioned_comparison": ("comparison", frozenset({"missing-mentioned-comparison"})),
    "conflicting_comparison": ("comparison", frozenset({"conflicting-comparison"})),
    "less_specific": ("specificity", frozenset({"less-specific"})),
    "more_specific": ("specificity", frozenset({"more-specific"})),
}


@lru_cache(maxsize=4096)
def row_errors(presence: str, location: str, severity: str, comparison: str, specificity: str = "exact") -> int:
    """Errors one judgement row counts under :data:`ERROR_KINDS` (a few dozen distinct rows:
    cached, as every pair's error count sums it over the pair's rows)."""
    values = {
        "presence": presence,
        "location": location,
        "severity": severity,
        "comparison": comparison,
        "specificity": specificity,
    }
    return sum(values[field] in bad for field, bad in ERROR_KINDS.values())


class EntityJudgement(BaseModel):
    """SPEC-CXR's verdict on one entity of one (reference, candidate) pair.

    ``reference`` / ``candidate`` hold the evidence sentence from each report, when there is
    one, so every error can be traced to text; ``reference_rules`` / ``candidate_rules`` name the
    rules that read it so (:func:`cxreval.extract.explain.rules_line`: ``finding.name;
    negation.pre 'no'``; empty for an LLM engine, and in files written before cxreval 0.3).
    """

    model_config = ConfigDict(frozen=True)

    pair_id: str
    entity: str
    presence: Presence
    location: AttributeJudgement = "not-available"
    severity: AttributeJudgement = "not-available"
    comparison: ComparisonJudgement = "other"
    reference: str = ""
    candidate: str = ""
    reference_rules: str = ""
    candidate_rules: str = ""
    specificity: SpecificityJudgement = "exact"
    """How the two reports name the finding of a TP row (:data:`SpecificityJudgement`); ``exact``
    on every other row, and in files written before cxreval 0.5."""
    reference_span: tuple[int, int] | None = None
    """Where ``reference`` lies in the pair's reference text (start, end: character offsets), for
    rows read back from a compact ``judgements.jsonl.gz``; None for rows an engine made. Read
    back without the texts, ``reference`` is empty and only this says there was evidence."""
    candidate_span: tuple[int, int] | None = None
    """The same for ``candidate`` in the candidate text."""

    @property
    def error_count(self) -> int:
        """This row's share of the report-level error count (:func:`row_errors`)."""
        return row_errors(self.presence, self.location, self.severity, self.comparison, self.specificity)

    @property
    def implied(self) -> bool:
        """A row every score would count the same if it were left out: a TN without error (both
        reports leave the entity absent), as for an entity neither report mentions. Compact outputs
        and caches keep only the other rows."""
        return self.presence == "TN" and not self.error_count

    @property
    def candidate_said(self) -> bool:
        """The candidate wrote something about the entity (evidence text, or its place when read
        back without the texts)."""
        return bool(self.candidate) or self.candidate_span is not None

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``specificity`` is written only where it says something (a hierarchy match): rows of the
        flat rule read and write as before it existed."""
        data: dict[str, object] = handler(self)
        if data.get("specificity") == "exact":
            del data["specificity"]
        for span in ("reference_span", "candidate_span"):
            if data.get(span) is None:
                data.pop(span, None)
        return data
