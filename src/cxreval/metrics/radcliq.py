"""RadCliQ-v1 (Yu et al. 2023): a fixed linear model over four per-report metrics; lower is better.

Per pair, the features ``x = [RadGraph-F1 (entity and relation F1 averaged), BERTScore
(distilroberta-base, rescaled), SembScore, BLEU-2]`` are standardised with a fixed scaler and
combined with fixed coefficients: ``RadCliQ = sum(coef * (x - mean) / scale) + intercept``. A
system's value is the mean over its pairs; ReXrank's tables show ``1 / RadCliQ-v1``.

The numbers are CXR-Report-Metric's ``CXRMetric/radcliq-v1.pkl`` (a pickled ``CompositeMetric``
whose scaler and coefficients ``run_eval.calc_metric`` applies to the columns
``["radgraph_combined", "bertscore", "semb_score", "bleu_score"]``), as transcribed in RadEval
(``RadEval/factual/RadCliQv1/radcliq.py``, class ``CompositeMetric``). The BLEU weight (4.3e-12)
and the intercept (2.5e-10) are kept as published, not rounded to 0.

RadCliQ-v1 is only computed from all four inputs: ``radcliq-v1`` is available when
``radgraph-f1``, ``bertscore-distilroberta`` and ``sembscore`` all have local checkpoints
(``radgraph_path``, ``bertscore_path``, ``chexbert_path``, or ``$CXREVAL_WEIGHTS``); otherwise
the missing component's MetricUnavailable is raised, never an approximation on fewer inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cxreval.metrics.base import (
    Metric,
    PairMeanMetric,
    check_lengths,
    get_metric,
    register_metric,
)
from cxreval.scores.signature import Signature

#: Feature order of the scaler and coefficients (CXR-Report-Metric's ``COLS``), with the
#: registered cxreval metric that gives each.
FEATURES: tuple[tuple[str, str], ...] = (
    ("radgraph_combined", "radgraph-f1"),
    ("bertscore", "bertscore-distilroberta"),
    ("semb_score", "sembscore"),
    ("bleu_score", "bleu2"),
)
SCALER_MEAN = np.array([0.53792312, 0.61757256, 0.76479421, 0.44738335])
SCALER_SCALE = np.array([0.30282584, 0.22430938, 0.25394391, 0.29892717])
COEFS = np.array([-3.77083683e-01, -3.70300100e-01, -2.52616218e-01, 4.31504841e-12])
INTERCEPT = 2.46655256e-10
SOURCE = "cxr-report-metric:radcliq-v1.pkl"


def radcliq_v1(features: np.ndarray) -> np.ndarray:
    """RadCliQ-v1 of rows of features ``(n, 4)`` in :data:`FEATURES` order -> ``(n,)``."""
    x = np.atleast_2d(np.asarray(features, dtype=float))
    return ((x - SCALER_MEAN) / SCALER_SCALE) @ COEFS + INTERCEPT


#: The value when every input is at its best (identical reports): RadCliQ-v1's practical minimum.
PERFECT = float(radcliq_v1(np.ones((1, 4)))[0])


class RadCliQv1(PairMeanMetric):
    """RadCliQ-v1 per pair from four component metrics (see module doc)."""

    name = "radcliq-v1"
    label = "RadCliQ-v1"
    higher_is_better = False

    def __init__(self, radgraph: Metric, bertscore: Metric, sembscore: Metric, bleu2: Metric) -> None:
        self.components = (radgraph, bertscore, sembscore, bleu2)

    @property
    def signature(self) -> Signature:
        models = "+".join(f"{c.name}={c.signature.model}" for c in self.components[:3])
        opts = {"coefs": SOURCE, **{f"in.{c.name}": _short(c.signature) for c in self.components}}
        return Signature(metric="radcliq-v1", ontology="none", engine="none", model=models, options=opts)

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        if not references:
            return np.zeros(0)
        x = np.column_stack([np.asarray(c.score_pairs(references, candidates), dtype=float) for c in self.components])
        return radcliq_v1(x)


def _short(sig: Signature) -> str:
    """A component's options in one signature field (no ``|``)."""
    return ",".join(f"{k}={v}" for k, v in sorted(sig.options.items())) or "default"


@register_metric("radcliq-v1", higher_is_better=False, parallel_safe=False, needs=("weights",))
def _radcliq_v1(bertscore_path: Any = None, chexbert_path: Any = None, radgraph_path: Any = None) -> RadCliQv1:
    # each component raises MetricUnavailable naming its own missing checkpoint: never approximated
    return RadCliQv1(
        get_metric("radgraph-f1", model_path=radgraph_path),
        get_metric("bertscore-distilroberta", model_path=bertscore_path),
        get_metric("sembscore", model_path=chexbert_path),
        get_metric("bleu2"),
    )
