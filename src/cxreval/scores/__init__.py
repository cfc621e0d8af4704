"""Scores computed from the judgement table.

Names are imported on first use (PEP 562): ``from cxreval.scores import entity_scores`` does not
import scipy, which only the interval and test functions need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from cxreval.scores.labels import (
        LabelCounts,
        LabelMetrics,
        binarize,
        label_cache,
        label_metrics,
        project_extractions,
        project_pairs,
        project_states,
        ran_score,
    )
    from cxreval.scores.report_errors import (
        ErrorDistribution,
        error_distribution,
        pair_errors,
    )
    from cxreval.scores.resampling import (
        BootstrapResult,
        Estimate,
        KappaResult,
        McNemarResult,
        PairCache,
        PairedComparison,
        PairedTest,
        bootstrap,
        clopper_pearson,
        cohens_kappa,
        fleiss_kappa,
        mcnemar,
        mcnemar_paired,
        paired_comparison,
    )
    from cxreval.scores.signature import (
        Signature,
        SignatureMismatch,
        check_comparable,
    )
    from cxreval.scores.spec_tables import SpecScores, spec_scores
    from cxreval.scores.statistics import TableStatistics

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "SpecScores": "cxreval.scores.spec_tables",
    "spec_scores": "cxreval.scores.spec_tables",
    "TableStatistics": "cxreval.scores.statistics",
    "AttributeScore": "cxreval.scores.entity",
    "Averages": "cxreval.scores.entity",
    "EntityScore": "cxreval.scores.entity",
    "GroupScore": "cxreval.scores.entity",
    "PresenceScore": "cxreval.scores.entity",
    "averages": "cxreval.scores.entity",
    "entity_scores": "cxreval.scores.entity",
    "group_scores": "cxreval.scores.entity",
    "judgement_frame": "cxreval.scores.entity",
    "LabelCounts": "cxreval.scores.labels",
    "LabelMetrics": "cxreval.scores.labels",
    "binarize": "cxreval.scores.labels",
    "label_cache": "cxreval.scores.labels",
    "label_metrics": "cxreval.scores.labels",
    "project_extractions": "cxreval.scores.labels",
    "project_pairs": "cxreval.scores.labels",
    "project_states": "cxreval.scores.labels",
    "ran_score": "cxreval.scores.labels",
    "ErrorDistribution": "cxreval.scores.report_errors",
    "error_distribution": "cxreval.scores.report_errors",
    "pair_errors": "cxreval.scores.report_errors",
    "Signature": "cxreval.scores.signature",
    "SignatureMismatch": "cxreval.scores.signature",
    "check_comparable": "cxreval.scores.signature",
    "BootstrapResult": "cxreval.scores.resampling",
    "Estimate": "cxreval.scores.resampling",
    "KappaResult": "cxreval.scores.resampling",
    "McNemarResult": "cxreval.scores.resampling",
    "PairCache": "cxreval.scores.resampling",
    "PairedComparison": "cxreval.scores.resampling",
    "PairedTest": "cxreval.scores.resampling",
    "bootstrap": "cxreval.scores.resampling",
    "clopper_pearson": "cxreval.scores.resampling",
    "cohens_kappa": "cxreval.scores.resampling",
    "fleiss_kappa": "cxreval.scores.resampling",
    "mcnemar": "cxreval.scores.resampling",
    "mcnemar_paired": "cxreval.scores.resampling",
    "paired_comparison": "cxreval.scores.resampling",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cxreval.scores' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
