"""SPEC-CXR's numbers as registered metrics computed from the judgement table.

Every headline number (:data:`HEADLINE`) is a :class:`TableMetric`: it names the block of
:class:`~cxreval.scores.statistics.TableStatistics` it reads and a ``compute`` of that block's
summed statistics. ``cxreval evaluate`` (scores.json, the terminal), the streamed run, bootstrap
intervals and ``compare``, ``cxreval bench`` and the reward all take these numbers from here, so
a number cannot differ between them; a new number is one class here.

Given report texts (``pair_stats(references, candidates)``, the :class:`~cxreval.metrics.Metric`
interface), a table metric judges the pairs with its engine first (the rule engine by default,
any engine of :mod:`cxreval.engines` by option); given a table, it judges nothing
(:meth:`TableMetric.value_of_table`). Engines are built on first use: a metric that only scores
tables costs nothing to build.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from cxreval.metrics.base import (
    Metric,
    PairMeanMetric,
    check_lengths,
    mean_of_stats,
    register_metric,
)
from cxreval.scores.ratios import macro_prf, micro_prf, safe_div
from cxreval.scores.signature import Signature
from cxreval.scores.statistics import TableStatistics

if TYPE_CHECKING:
    from cxreval.engines import EngineRunner
    from cxreval.judge.table import JudgementTable
    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.config import LLMConfig
    from cxreval.ontology import Ontology


class TableMetric(Metric):
    """A metric whose statistics come from the judgement table (see the module doc).

    Subclasses set ``name`` (the registry's), ``headline`` (its name in ``scores.json`` and
    intervals), ``signature_id`` (its ``metric:`` in signatures), ``statistic`` (the block it
    reads) and ``compute``.
    """

    headline: ClassVar[str]
    signature_id: ClassVar[str]
    statistic: ClassVar[str]
    description: ClassVar[str] = ""

    def __init__(
        self,
        ontology: Ontology | str | Path | None = None,
        uncertain: str = "positive",
        *,
        engine: str = "rules",
        llm: LLMConfig | None = None,
        spec_compat: bool = False,
        retry_failed: bool = False,
        cache: AnswerCache | None = None,
        rules: str | Path | None = None,
        workers: int | None = None,
        hierarchy: bool = True,
    ) -> None:
        from cxreval.engines import check_engine_options
        from cxreval.ontology import Ontology, load_ontology

        check_engine_options(engine, uncertain, llm=llm, rules=rules, hierarchy=hierarchy)  # now; the engine later
        self.ontology = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
        self._options: dict[str, Any] = {
            "ontology": ontology,
            "uncertain": uncertain,
            "engine": engine,
            "llm": llm,
            "spec_compat": spec_compat,
            "retry_failed": retry_failed,
            "cache": cache,
            "rules": rules,
            "workers": workers,
            "hierarchy": hierarchy,
        }
        self._runner: EngineRunner | None = None

    @classmethod
    def from_runner(cls, runner: EngineRunner) -> TableMetric:
        """The metric judged by an existing engine (its answer store, its rules, its workers):
        what ``cxreval meta`` and ``bench`` use to score with the evaluator they already hold."""
        metric = cls.__new__(cls)
        metric.ontology = runner.engine.ontology
        metric._options = runner.options()
        metric._runner = runner
        return metric

    def __reduce__(self) -> tuple[Any, ...]:
        # every option travels, the answer store included (an open SQLite store does not pickle:
        # that fails loudly rather than scoring elsewhere on another store)
        return (rebuild_metric, (type(self), self._options))

    @property
    def runner(self) -> EngineRunner:
        """The engine that judges the pairs given as text (built on first use)."""
        if self._runner is None:
            from cxreval.engines import EngineRunner

            opts = {k: v for k, v in self._options.items() if k != "ontology"}
            self._runner = EngineRunner.build(self.ontology, **opts)
        return self._runner

    @property
    def signature(self) -> Signature:
        return self.runner.engine.signature.with_metric(self.signature_id)

    def table_stats(self, stats: TableStatistics) -> np.ndarray:
        """This metric's statistics per pair ``(n_pairs, k)``."""
        return stats.block(self.statistic)

    def value_of_table(self, table: JudgementTable) -> float:
        """The value of a whole judgement table (NaN where undefined)."""
        total = TableStatistics(table, self.ontology).total(self.statistic)
        return float(np.asarray(self.compute(total[None, :]), dtype=float)[0])

    def table_pair_values(self, table: JudgementTable) -> np.ndarray:
        """Each pair's own value, in ``table.pair_ids`` order."""
        stats = self.table_stats(TableStatistics(table, self.ontology))
        return np.asarray(self.compute(stats), dtype=float) if len(stats) else np.zeros(0)

    def judge(self, references: Sequence[str], candidates: Sequence[str]) -> TableStatistics:
        """Judge the pairs (ids ``"0"``, ``"1"``... in input order) and read their table; a pair
        the engine could not judge is in the statistics as not judged."""
        check_lengths(references, candidates)
        out = self.runner.judge_texts(references, candidates)
        return TableStatistics(out.table, self.ontology, [str(i) for i in range(len(references))])

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return self.table_stats(self.judge(references, candidates))


def rebuild_metric(cls: type, options: dict[str, Any]) -> Any:
    """A metric built again from its options (how metrics unpickle in worker processes)."""
    return cls(**options)


class PairMeanTableMetric(TableMetric, PairMeanMetric):
    """A table metric with one value per pair whose system value is their mean (errors, error-free)."""

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return np.asarray(self.compute(self.pair_stats(references, candidates)), dtype=float)

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return TableMetric.pair_stats(self, references, candidates)

    def compute(self, sums: np.ndarray) -> np.ndarray:
        return mean_of_stats(sums)


class SpecErrors(PairMeanTableMetric):
    """SPEC-CXR errors per report: FP + FN + not-aligned + comparison errors"""

    name = "spec-errors"
    headline = "errors_per_report_mean"
    signature_id = "spec-report-errors-mean"
    statistic = "errors"
    label = "Errors / report"
    higher_is_better = False
    description = "SPEC-CXR errors per report: FP + FN + not-aligned + comparison errors"

    def score_and_judge(self, references: Sequence[str], candidates: Sequence[str]) -> tuple[np.ndarray, list[list[Any]]]:
        """Errors per pair (NaN where an LLM engine could not judge the pair) and each pair's
        judgement rows, in input order (meta's robustness tests need the rows)."""
        check_lengths(references, candidates)
        out = self.runner.judge_texts(references, candidates)
        ids = [str(i) for i in range(len(references))]
        stats = TableStatistics(out.table, self.ontology, ids)
        rows: dict[str, list[Any]] = {i: [] for i in ids}
        for row in out.table.rows():
            rows[row.pair_id].append(row)
        values = np.asarray(self.compute(self.table_stats(stats)), dtype=float)
        return values, [rows[i] for i in ids]


class ErrorFreeRate(PairMeanTableMetric):
    """Share of reports with no SPEC-CXR error"""

    name = "spec-report-error-free-rate"
    headline = "error_free_rate"
    signature_id = name
    statistic = "error-free"
    label = "Error-free rate"
    higher_is_better = True
    description = "share of reports with no SPEC-CXR error"


class CriticalErrorFreeRate(PairMeanTableMetric):
    """Share of reports with no error on an entity the ontology marks critical"""

    name = "spec-report-critical-error-free-rate"
    headline = "critical_error_free_rate"
    signature_id = name
    statistic = "critical-error-free"
    label = "Critical error-free rate"
    higher_is_better = True
    description = "share of reports with no error on a critical entity (ontology `critical: true`)"


class SpecificityErrors(PairMeanTableMetric):
    """Errors of the finding hierarchy per report: a candidate less or more specific than its reference"""

    name = "spec-specificity-errors"
    headline = "specificity_errors_per_report_mean"
    signature_id = "spec-report-specificity-errors-mean"
    statistic = "specificity-errors"
    label = "Specificity errors / report"
    higher_is_better = False
    description = (
        "errors of the finding hierarchy per report: the candidate names an ancestor or a descendant of the reference's finding"
    )


class _Presence(TableMetric):
    """Entity presence precision, recall or F1 from summed TP / FP / FN per entity."""

    statistic = "presence"
    level = "corpus"
    higher_is_better = True
    average: ClassVar[str]
    score: ClassVar[int]  # 0 precision, 1 recall, 2 F1

    def compute(self, sums: np.ndarray) -> np.ndarray:
        s = np.atleast_2d(np.asarray(sums, dtype=float))
        counts = s.reshape(len(s), -1, 3)
        return (macro_prf(counts) if self.average == "macro" else micro_prf(counts))[:, self.score]


def _presence_metric(average: str, score: int, label: str, description: str) -> type[_Presence]:
    what = ("precision", "recall", "f1")[score]
    name = f"spec-presence-{average}-{what}"
    doc = f"SPEC-CXR entity presence {label.split()[-1]} ({average} over the ontology's entities)"
    return type(
        f"Presence{average.title()}{what.title()}",
        (_Presence,),
        {
            "__doc__": doc,
            "__module__": __name__,
            "name": name,
            "headline": f"presence_{average}_{what}",
            "signature_id": name,
            "average": average,
            "score": score,
            "label": label,
            "description": description,
        },
    )


class _Attribute(TableMetric):
    """Accuracy of one attribute over the TP rows it applies to: correct / judged, pooled."""

    level = "corpus"
    higher_is_better = True

    def compute(self, sums: np.ndarray) -> np.ndarray:
        s = np.atleast_2d(np.asarray(sums, dtype=float))
        return safe_div(s[:, 0], s[:, 1])


def _attribute_metric(attribute: str) -> type[_Attribute]:
    name = f"spec-{attribute}-accuracy"
    label = f"{attribute.title()} accuracy"
    description = f"{attribute} accuracy on TP rows (SPEC-CXR), pooled over the entities it applies to"
    return type(
        f"{attribute.title()}Accuracy",
        (_Attribute,),
        {
            "__doc__": description[0].upper() + description[1:],
            "__module__": __name__,
            "name": name,
            "headline": f"{attribute}_accuracy",
            "signature_id": name,
            "statistic": attribute,
            "label": label,
            "description": description,
        },
    )


PresenceMacroF1 = _presence_metric("macro", 2, "Presence macro-F1", "entity presence F1, mean over entities with a defined F1")
PresenceMicroF1 = _presence_metric("micro", 2, "Presence micro-F1", "entity presence F1 over pooled TP/FP/FN")
PresenceMacroPrecision = _presence_metric(
    "macro", 0, "Presence macro-precision", "entity presence precision, mean over entities with a defined precision"
)
PresenceMacroRecall = _presence_metric(
    "macro", 1, "Presence macro-recall", "entity presence recall, mean over entities with a defined recall"
)
PresenceMicroPrecision = _presence_metric("micro", 0, "Presence micro-precision", "entity presence precision over pooled TP/FP")
PresenceMicroRecall = _presence_metric("micro", 1, "Presence micro-recall", "entity presence recall over pooled TP/FN")
LocationAccuracy = _attribute_metric("location")
SeverityAccuracy = _attribute_metric("severity")
ComparisonAccuracy = _attribute_metric("comparison")

#: Every table metric, in the order intervals and ``compare`` list them.
TABLE_METRICS: tuple[type[TableMetric], ...] = (
    PresenceMacroPrecision,
    PresenceMacroRecall,
    PresenceMacroF1,
    PresenceMicroPrecision,
    PresenceMicroRecall,
    PresenceMicroF1,
    LocationAccuracy,
    SeverityAccuracy,
    ComparisonAccuracy,
    SpecErrors,
    ErrorFreeRate,
    CriticalErrorFreeRate,
    SpecificityErrors,
)

#: The headline numbers, in ``scores.json`` order: the registry names of their metrics. One list,
#: used by ``cxreval evaluate`` (scores.json, the terminal), ``cxreval bench`` and the page.
HEADLINE: tuple[str, ...] = (
    "spec-presence-macro-f1",
    "spec-presence-micro-f1",
    "spec-presence-micro-precision",
    "spec-presence-micro-recall",
    "spec-location-accuracy",
    "spec-severity-accuracy",
    "spec-comparison-accuracy",
    "spec-errors",
    "spec-report-error-free-rate",
    "spec-report-critical-error-free-rate",
)

_BY_NAME: dict[str, type[TableMetric]] = {m.name: m for m in TABLE_METRICS}
for _cls in TABLE_METRICS:
    register_metric(_cls.name, level=_cls.level, higher_is_better=_cls.higher_is_better)(_cls)


def table_metric_names() -> tuple[str, ...]:
    """The registry names of the metrics computed from the judgement table."""
    return tuple(_BY_NAME)


def table_metric(name: str, ontology: Ontology | str | Path | None = None) -> TableMetric:
    """The table metric ``name`` for ``ontology`` (its engine is not built: it scores tables)."""
    try:
        return _BY_NAME[name](ontology)
    except KeyError:
        raise KeyError(f"{name!r} is not computed from the judgement table; those are: {', '.join(_BY_NAME)}") from None


def headline_metrics(ontology: Ontology) -> list[TableMetric]:
    """The :data:`HEADLINE` metrics for ``ontology``, in order."""
    return [table_metric(n, ontology) for n in HEADLINE]


def headline_values(metrics: Sequence[TableMetric], totals: dict[str, np.ndarray]) -> dict[str, float | None]:
    """Each metric's value of summed block statistics ``totals`` (``None`` where undefined),
    keyed by its headline name."""
    out: dict[str, float | None] = {}
    for m in metrics:
        value = float(np.asarray(m.compute(totals[m.statistic][None, :]), dtype=float)[0])
        out[m.headline] = None if np.isnan(value) else value
    return out


def block_layout(metrics: Sequence[TableMetric], stats: TableStatistics) -> tuple[np.ndarray, dict[str, slice]]:
    """The per-pair statistics several table metrics read, side by side ``(n_pairs, k)``: each
    block laid out once, however many metrics read it, with the columns of each block."""
    blocks: dict[str, slice] = {}
    columns = []
    width = 0
    for m in metrics:
        if m.statistic not in blocks:
            block = m.table_stats(stats)
            blocks[m.statistic] = slice(width, width + block.shape[1])
            columns.append(block)
            width += block.shape[1]
    values = np.concatenate(columns, axis=1) if columns else np.zeros((stats.n_pairs, 0))
    return values, blocks
