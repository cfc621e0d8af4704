"""The report-level metric interface and registry.

A metric scores each (reference, candidate) pair and says which direction is better; its
signature says what produced the numbers. Plug-ins (BLEU, ROUGE-L, BERTScore, CheXbert,
RadGraph, GREEN...) register a factory by name; heavy dependencies are imported only when a
metric is built, never at import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from cxreval.scores.signature import Signature


@runtime_checkable
class ReportMetric(Protocol):
    """Scores report pairs one value per pair."""

    name: str
    higher_is_better: bool

    @property
    def signature(self) -> Signature: ...

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """One float per pair, in input order; NaN where a pair could not be scored (e.g. an LLM failure)."""
        ...


MetricFactory = Callable[..., ReportMetric]
_REGISTRY: dict[str, MetricFactory] = {}


class UnknownMetric(KeyError):
    """A metric name that no factory is registered for."""


class MetricUnavailable(RuntimeError):
    """A registered metric whose optional dependency or weights are missing here."""


def register_metric(name: str) -> Callable[[MetricFactory], MetricFactory]:
    """Decorator: make ``factory`` available as ``get_metric(name, **options)``."""

    def wrap(factory: MetricFactory) -> MetricFactory:
        _REGISTRY[name] = factory
        return factory

    return wrap


def available_metrics() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def get_metric(name: str, **options: object) -> ReportMetric:
    """Build a registered metric; raises :class:`UnknownMetric` with the known names."""
    _load_builtins()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownMetric(f"unknown metric {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    return factory(**options)


def _load_builtins() -> None:
    # Importing the modules runs their @register_metric decorators (cheap: no heavy imports).
    from cxreval.metrics import bertscore, lexical, spec  # noqa: F401
