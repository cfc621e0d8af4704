"""The judgement table: one row per (pair, entity), SPEC-CXR's fields.

Every score in cxreval is computed from these rows, whichever engine produced them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Presence = Literal["TP", "FP", "FN", "TN"]
AttributeJudgement = Literal["aligned", "not-aligned", "not-available"]
ComparisonJudgement = Literal["adding-unmentioned-comparison", "missing-mentioned-comparison", "other"]

PRESENCE_VALUES: tuple[Presence, ...] = ("TP", "FP", "FN", "TN")
ATTRIBUTE_VALUES: tuple[AttributeJudgement, ...] = ("aligned", "not-aligned", "not-available")
COMPARISON_VALUES: tuple[ComparisonJudgement, ...] = (
    "adding-unmentioned-comparison",
    "missing-mentioned-comparison",
    "other",
)


class EntityJudgement(BaseModel):
    """SPEC-CXR's verdict on one entity of one (reference, candidate) pair.

    ``reference`` / ``candidate`` hold the evidence sentence from each report, when there is
    one, so every error can be traced to text.
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

    @property
    def error_count(self) -> int:
        """This row's share of the report-level error count (SPEC-CXR section 2)."""
        return (
            (self.presence in ("FP", "FN"))
            + (self.location == "not-aligned")
            + (self.severity == "not-aligned")
            + (self.comparison != "other")
        )
