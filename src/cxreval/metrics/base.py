"""The one metric abstraction: additive per-pair statistics, and scores computed from their sums.

In the spirit of sacreBLEU (statistics per segment, the score from their sum) and torchmetrics
(``add_state`` + ``compute``), every metric says

- ``pair_stats(references, candidates)`` -> ``(n_pairs, n_stats)``: statistics that *add up*
  over pairs (a BLEU n-gram count, a pair's value and a "defined" indicator, an entity's
  TP / FP / FN);
- ``compute(sums)`` -> ``(R,)``: the score of summed statistics, one per row, so a bootstrap
  scores all its resamples (``weights @ stats``) in one call;

and gets from :class:`Metric`: ``score_pairs`` (the value of each pair), ``corpus_score`` (the
value of a whole system, with an optional percentile bootstrap interval) and ``pair_cache`` (the
:class:`~cxreval.scores.resampling.PairCache` that ``cxreval.scores.resampling`` resamples). Bootstrap
intervals, paired tests, ``compare``, ``bench`` and ``meta`` consume metrics through these, never
through a metric's own arithmetic.

:class:`PairMeanMetric` is the common case (a value per pair; the system value is the mean
over the pairs where it is defined). Plug-ins register a factory by name with
:func:`register_metric`; a plug-in that only has ``score_pairs`` is served as a pair-mean
metric. Heavy dependencies are imported when a metric is built, never at import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from cxreval.scores.ratios import safe_div
from cxreval.scores.signature import Signature

Level = Literal["pair", "corpus"]


@dataclass(frozen=True)
class CorpusScore:
    """A system's value of one metric, with its interval when one was asked for."""

    value: float
    low: float | None
    high: float | None
    signature: Signature

    def __str__(self) -> str:
        ci = "" if self.low is None else f" [{self.low:.4f}, {self.high:.4f}]"
        return f"{self.value:.4f}{ci}  {self.signature}"


def check_lengths(references: Sequence[str], candidates: Sequence[str]) -> None:
    """Refuse references and candidates of different lengths (the pairs would be misaligned)."""
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")


class Metric(ABC):
    """A report metric on additive per-pair statistics (see the module doc).

    Subclasses set ``name``, ``label``, ``higher_is_better``, ``level`` and implement
    :meth:`pair_stats`, :meth:`compute` and :attr:`signature`.
    """

    name: str
    label: str = ""
    higher_is_better: bool
    #: ``pair``: the system value is the mean of per-pair values; ``corpus``: it is a function
    #: of summed statistics that is not a mean of pair values (corpus BLEU, macro-F1).
    level: Level = "pair"

    @property
    @abstractmethod
    def signature(self) -> Signature:
        """What produced the numbers (metric, ontology, engine, model, options, version)."""

    @abstractmethod
    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """Statistics per pair ``(n_pairs, n_stats)`` that add up over pairs."""

    @abstractmethod
    def compute(self, sums: np.ndarray) -> np.ndarray:
        """The score of summed statistics: ``(R, n_stats)`` -> ``(R,)`` (NaN where undefined)."""

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """The value of each pair (its statistics on their own), in input order."""
        stats = self.pair_stats(references, candidates)
        return np.asarray(self.compute(stats), dtype=float) if len(stats) else np.zeros(0)

    def pair_cache(self, references: Sequence[str], candidates: Sequence[str]) -> Any:
        """The per-pair statistics as a :class:`~cxreval.scores.resampling.PairCache` (one score: ``name``)."""
        from cxreval.scores.resampling import PairCache

        stats = np.asarray(self.pair_stats(references, candidates), dtype=float)
        return PairCache(stats, lambda sums: np.asarray(self.compute(sums), dtype=float)[:, None], (self.name,))

    def corpus_score(
        self,
        references: Sequence[str],
        candidates: Sequence[str],
        *,
        n_bootstrap: int = 0,
        seed: int = 0,
        confidence: float = 0.95,
    ) -> CorpusScore:
        """The system's value; with ``n_bootstrap`` resamples of the pairs, a percentile interval
        (the resampling settings are then in the signature)."""
        stats = np.asarray(self.pair_stats(references, candidates), dtype=float)
        value = float(np.asarray(self.compute(stats.sum(axis=0, keepdims=True)))[0])
        if n_bootstrap <= 0 or len(stats) == 0:
            return CorpusScore(value, None, None, self.signature)
        from cxreval.scores.resampling import bootstrap_weights

        rng = np.random.default_rng(seed)
        reps = np.asarray(self.compute(bootstrap_weights(rng, len(stats), n_bootstrap) @ stats), dtype=float)
        reps = reps[np.isfinite(reps)]
        alpha = (1 - confidence) / 2
        low, high = (float(np.quantile(reps, alpha)), float(np.quantile(reps, 1 - alpha))) if len(reps) else (None, None)
        sig = self.signature.with_intervals(method="percentile", resamples=n_bootstrap, seed=seed, confidence=confidence)
        return CorpusScore(value, low, high, sig)


class PairMeanMetric(Metric):
    """A metric with one value per pair; the system value is the mean over the defined pairs.

    Subclasses implement :meth:`pair_values` (NaN where a pair cannot be scored, e.g. an LLM
    failure). Statistics per pair: ``[value or 0, 1 if defined else 0]``.
    """

    level: Level = "pair"

    @abstractmethod
    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """One float per pair, in input order; NaN where the pair could not be scored."""

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return mean_stats(self.pair_values(references, candidates))

    def compute(self, sums: np.ndarray) -> np.ndarray:
        return mean_of_stats(sums)

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        return np.asarray(self.pair_values(references, candidates), dtype=float).reshape(-1)


def mean_stats(values: np.ndarray) -> np.ndarray:
    """Per-pair statistics of a pair-mean metric: ``[value or 0, defined]`` per pair."""
    v = np.asarray(values, dtype=float).reshape(-1)
    ok = np.isfinite(v)
    return np.stack([np.where(ok, v, 0.0), ok.astype(float)], axis=1)


def mean_of_stats(sums: np.ndarray) -> np.ndarray:
    """Mean of the defined values from summed :func:`mean_stats` rows (NaN where none is defined)."""
    s = np.atleast_2d(np.asarray(sums, dtype=float))
    return safe_div(s[:, 0], s[:, 1])


class _Wrapped:
    """A plug-in object of the first interface, served as a :class:`Metric` (its name, direction
    and signature are the plug-in's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))
        self.label = str(getattr(inner, "label", self.name))
        self.higher_is_better = bool(inner.higher_is_better)

    @property
    def signature(self) -> Signature:
        sig: Signature = self.inner.signature
        return sig


class _ScorePairsMetric(_Wrapped, PairMeanMetric):
    """A plug-in that only has ``score_pairs`` (the older protocol), served as a pair-mean metric."""

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        return np.asarray(self.inner.score_pairs(references, candidates), dtype=float)


#: Kept for code written against the first interface: every metric is a :class:`Metric`.
ReportMetric = Metric


# ------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    """What the registry knows of a metric before building it."""

    name: str
    factory: Callable[..., Any]
    level: Level = "pair"
    higher_is_better: bool = True
    #: safe to build in worker processes and run on chunks of pairs (no shared state, picklable)
    parallel_safe: bool = True
    #: what it needs beyond the core: an optional extra (``bertscore``), an LLM endpoint (``llm``)
    needs: tuple[str, ...] = ()


_REGISTRY: dict[str, MetricSpec] = {}
#: The modules whose import registers the built-in metrics (cheap: no heavy imports at the top).
_BUILTIN_MODULES = ("cxreval.metrics.lexical", "cxreval.metrics.bertscore", "cxreval.metrics.table", "cxreval.metrics.spec")
#: The entry-point group of third-party metrics: each entry point names a module (imported; its
#: ``@register_metric`` decorators register) or a function (called with no arguments, registers).
PLUGIN_GROUP = "cxreval.metrics"
#: Whether the plug-ins have been loaded (once per process, on the registry's first use).
_PLUGINS_LOADED = False


class UnknownMetric(KeyError):
    """A metric name that no factory is registered for."""


class MetricUnavailable(RuntimeError):
    """A registered metric whose optional dependency or weights are missing here."""


def register_metric(
    name: str,
    *,
    level: Level = "pair",
    higher_is_better: bool = True,
    parallel_safe: bool = True,
    needs: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make ``factory`` available as ``get_metric(name, **options)``, with its metadata."""

    def wrap(factory: Callable[..., Any]) -> Callable[..., Any]:
        _REGISTRY[name] = MetricSpec(name, factory, level, higher_is_better, parallel_safe, tuple(needs))
        return factory

    return wrap


class MetricPluginWarning(UserWarning):
    """A metric plug-in of the ``cxreval.metrics`` entry-point group that could not be loaded, or
    that tried to replace a metric registered before it; the other metrics are still served."""


def _load_builtins() -> None:
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    if not _PLUGINS_LOADED:
        _load_plugins()


def _load_plugins() -> None:
    """Load every entry point of :data:`PLUGIN_GROUP`, after the built-ins, once per process.

    A plug-in that fails to import or to register (any exception) is named in a
    :class:`MetricPluginWarning` with its error, and the registry goes on without it; a plug-in
    may not replace a metric registered before it (the built-ins, an earlier plug-in): the
    earlier one is kept, with a warning naming both.
    """
    global _PLUGINS_LOADED
    import inspect
    import warnings
    from importlib.metadata import entry_points

    _PLUGINS_LOADED = True  # first, so that a plug-in that asks the registry does not load again
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: (e.name, e.value)):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "an unknown distribution"
        where = f"metric plug-in {ep.name!r} ({ep.value}, from {dist})"
        before = dict(_REGISTRY)
        try:
            loaded = ep.load()
            if inspect.isfunction(loaded) or inspect.isbuiltin(loaded):
                loaded()
        except Exception as exc:  # noqa: BLE001  (a broken plug-in must not take the registry down)
            warnings.warn(
                f"{where} failed to load and is skipped: {type(exc).__name__}: {exc}", MetricPluginWarning, stacklevel=4
            )
            _REGISTRY.clear()  # what it registered before failing is dropped with it
            _REGISTRY.update(before)
            continue
        replaced = sorted(n for n, spec in before.items() if _REGISTRY.get(n) is not spec)
        if replaced:
            warnings.warn(
                f"{where} registers {', '.join(replaced)}, already registered: the earlier registration is kept",
                MetricPluginWarning,
                stacklevel=4,
            )
            _REGISTRY.update({n: before[n] for n in replaced})


def available_metrics() -> list[str]:
    """The names of every registered metric."""
    _load_builtins()
    return sorted(_REGISTRY)


def metric_spec(name: str) -> MetricSpec:
    """The registry's metadata of ``name`` (nothing is built)."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownMetric(f"unknown metric {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


class _StatsMetric(_Wrapped, Metric):
    """A plug-in of the first interface with ``pair_stats`` and ``corpus_from_stats``: a corpus metric."""

    level: Level = "corpus"

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        return np.asarray(self.inner.pair_stats(references, candidates), dtype=float)

    def compute(self, sums: np.ndarray) -> np.ndarray:
        return np.asarray(self.inner.corpus_from_stats(np.atleast_2d(sums)), dtype=float).reshape(-1)


def get_metric(name: str, **options: object) -> Metric:
    """Build a registered metric; raises :class:`UnknownMetric` with the known names, and
    ValueError when the metric's own ``level`` contradicts its registration (a corpus metric
    scored as a mean of pairs would be a silently wrong number)."""
    spec = metric_spec(name)
    made = spec.factory(**options)
    built: Metric
    if isinstance(made, Metric):
        built = made
    else:
        built = _StatsMetric(made) if hasattr(made, "corpus_from_stats") else _ScorePairsMetric(made)
    if built.level != spec.level:
        raise ValueError(
            f"metric {name!r} is registered with level={spec.level!r} but says level={built.level!r}: "
            "register it with the level it computes (corpus: a function of summed statistics)"
        )
    if built.level == "pair" and not isinstance(built, PairMeanMetric):
        raise ValueError(
            f"metric {name!r} has level 'pair' but is not a PairMeanMetric: a pair-level metric's "
            "system value is the mean of its pair values; subclass PairMeanMetric or use level 'corpus'"
        )
    return built
