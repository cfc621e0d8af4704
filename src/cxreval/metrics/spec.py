"""cxreval's own engines as report-level metrics (per-pair SPEC-CXR error count)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cxreval.metrics.base import register_metric
from cxreval.scores.signature import Signature


class SpecErrors:
    """SPEC-CXR report-level error count per pair (FP + FN + not-aligned + comparison errors)."""

    higher_is_better = False

    def __init__(self, ontology: str | Path | None = None, uncertain: str = "positive", **engine: object) -> None:
        from cxreval.evaluate import Evaluator

        self.name = "spec-errors"
        self._evaluator = Evaluator(ontology, uncertain=uncertain, **engine)  # type: ignore[arg-type]

    @property
    def signature(self) -> Signature:
        return self._evaluator.signature.with_metric("spec-report-errors")

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        from cxreval.io import ReportPair

        if len(references) != len(candidates):
            raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
        pairs = [ReportPair(pair_id=str(i), reference=r, candidate=c)
                 for i, (r, c) in enumerate(zip(references, candidates))]
        result = self._evaluator.evaluate(pairs, progress=False)
        return result.errors["errors"].reindex([p.pair_id for p in pairs]).to_numpy(dtype=float)


@register_metric("spec-errors")
def _spec_errors(**options: object) -> SpecErrors:
    return SpecErrors(**options)  # type: ignore[arg-type]
