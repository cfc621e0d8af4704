"""Report-level metrics behind one interface: cxreval's engines, lexical metrics and plug-ins."""

from cxreval.metrics.base import (
    MetricUnavailable,
    ReportMetric,
    UnknownMetric,
    available_metrics,
    get_metric,
    register_metric,
)

__all__ = [
    "MetricUnavailable",
    "ReportMetric",
    "UnknownMetric",
    "available_metrics",
    "get_metric",
    "register_metric",
]
