"""Report metrics behind one interface (:class:`Metric`: additive per-pair statistics and a
``compute`` of their sums), and the registry: cxreval's SPEC and label metrics, lexical metrics,
BERTScore, LLM error metrics (GREEN-style, FineRadScore-style) and plug-ins."""

# LLM error metrics (GREEN-style, FineRadScore-style): registered on import; nothing heavy at import.
from cxreval.metrics import fineradscore as _fineradscore  # noqa: F401
from cxreval.metrics import green as _green  # noqa: F401
from cxreval.metrics.base import (
    CorpusScore,
    Metric,
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
