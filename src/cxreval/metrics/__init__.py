"""Report metrics behind one interface (:class:`Metric`: additive per-pair statistics and a
``compute`` of their sums), and the registry: cxreval's SPEC metrics (every headline number,
computed from the judgement table: :mod:`cxreval.metrics.table`), label metrics, lexical metrics,
BERTScore (MiniLM, and ReXrank's distilroberta-base), SembScore, RadGraph-F1, RaTEScore, RadCliQ-v1,
LLM error metrics (GREEN-style, FineRadScore-style) and plug-ins."""

# Registered on import, nothing heavy at import: LLM error metrics (GREEN-style,
# FineRadScore-style) and weight-based metrics from local checkpoints (SembScore, RadGraph-F1, RaTEScore, RadCliQ-v1).
from cxreval.metrics import chexbert as _chexbert  # noqa: F401
from cxreval.metrics import fineradscore as _fineradscore  # noqa: F401
from cxreval.metrics import green as _green  # noqa: F401
from cxreval.metrics import radcliq as _radcliq  # noqa: F401
from cxreval.metrics import radgraph as _radgraph  # noqa: F401
from cxreval.metrics import ratescore as _ratescore  # noqa: F401
from cxreval.metrics.base import (
    CorpusScore,
    Metric,
    MetricPluginWarning,
    MetricSpec,
    MetricUnavailable,
    PairMeanMetric,
    ReportMetric,
    UnknownMetric,
    available_metrics,
    get_metric,
    metric_spec,
    register_metric,
)

__all__ = [
    "CorpusScore",
    "Metric",
    "MetricPluginWarning",
    "MetricSpec",
    "MetricUnavailable",
    "PairMeanMetric",
    "ReportMetric",
    "UnknownMetric",
    "available_metrics",
    "get_metric",
    "metric_spec",
    "register_metric",
]
