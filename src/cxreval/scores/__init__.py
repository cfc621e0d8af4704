"""Scores computed from the judgement table."""

from cxreval.scores.entity import (
    AttributeScore,
    Averages,
    EntityScore,
    GroupScore,
    PresenceScore,
    averages,
    entity_scores,
    group_scores,
    judgement_frame,
)
from cxreval.scores.report import ErrorDistribution, error_distribution, pair_errors
from cxreval.scores.signature import Signature, SignatureMismatch, check_comparable

__all__ = [
    "AttributeScore",
    "Averages",
    "EntityScore",
    "ErrorDistribution",
    "GroupScore",
    "PresenceScore",
    "Signature",
    "SignatureMismatch",
    "averages",
    "check_comparable",
    "entity_scores",
    "error_distribution",
    "group_scores",
    "judgement_frame",
    "pair_errors",
]
