"""Report metrics behind one interface (:class:`Metric`: additive per-pair statistics and a
``compute`` of their sums), and the registry: cxreval's SPEC and label metrics, lexical metrics,
BERTScore and plug-ins."""

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
