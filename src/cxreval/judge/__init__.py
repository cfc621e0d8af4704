"""Judgement: (reference, candidate) -> one SPEC-CXR row per entity."""

from cxreval.judge.compare import UncertainPolicy, compare_extractions
from cxreval.judge.models import EntityJudgement

__all__ = ["EntityJudgement", "UncertainPolicy", "compare_extractions"]
