"""Every SPEC-CXR number of a judgement table, computed in one place.

Presence P/R/F1 per entity and group, macro and micro; attribute accuracies (pooled over TP
rows); errors per pair and their distribution; error-free and critical-error-free rates.
``cxreval evaluate``, ``cxreval bench`` and the HTML page all take their SPEC numbers from
:func:`spec_scores`, so a number cannot differ between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cxreval.scores.entity import Averages, EntityScore, GroupScore, averages, count_table, group_scores, scores_of_counts
from cxreval.scores.report import ErrorDistribution, add_histograms, distribution_of, error_histogram, pair_errors

if TYPE_CHECKING:
    import pandas as pd

    from cxreval.judge.table import JudgementTable
    from cxreval.ontology import Ontology


@dataclass(frozen=True)
class SpecTotals:
    """The additive statistics every SPEC number is computed from: per-entity counts, pairs,
    pairs per exact error count, and pairs free of critical errors.

    Totals of two sets of pairs add (``a + b``), so a streamed evaluation keeps only these while
    its pairs pass through, and scores them with :meth:`scores` exactly as a whole table is scored.
    """

    counts: "pd.DataFrame"  # :func:`cxreval.scores.entity.count_table`
    n_pairs: int
    error_histogram: dict[int, int] = field(default_factory=dict)
    critical_error_free: int = 0

    @classmethod
    def of(cls, table: "JudgementTable", ontology: "Ontology") -> "SpecTotals":
        """Totals of one judgement table."""
        return cls.with_tables(table, ontology)[0]

    @classmethod
    def with_tables(cls, table: "JudgementTable", ontology: "Ontology") -> "tuple[SpecTotals, pd.DataFrame, pd.Series]":
        """Totals of one judgement table, with its per-pair errors and critical errors (:func:`pair_errors`)."""
        errors = pair_errors(table.frame, table.pair_ids)
        critical = pair_errors(table.frame, table.pair_ids, entities=critical_entities(ontology))["errors"]
        totals = cls(counts=count_table(table.frame, ontology), n_pairs=len(table.pair_ids),
                     error_histogram=error_histogram(errors), critical_error_free=int((critical == 0).sum()))
        return totals, errors, critical

    @classmethod
    def empty(cls, ontology: "Ontology") -> "SpecTotals":
        """Totals of no pairs (the start of a sum)."""
        from cxreval.judge.table import JudgementTable

        return cls(counts=count_table(JudgementTable.empty().frame, ontology), n_pairs=0)

    def __add__(self, other: "SpecTotals") -> "SpecTotals":
        return SpecTotals(counts=self.counts + other.counts, n_pairs=self.n_pairs + other.n_pairs,
                          error_histogram=add_histograms(self.error_histogram, other.error_histogram),
                          critical_error_free=self.critical_error_free + other.critical_error_free)

    def scores(self, ontology: "Ontology") -> "SpecSummary":
        """Every SPEC number of these totals."""
        ents = scores_of_counts(self.counts, ontology, self.n_pairs)
        return SpecSummary(
            entities=ents,
            groups=group_scores(ents, ontology),
            averages=averages(ents),
            error_summary=distribution_of(self.error_histogram),
            critical_error_free=self.critical_error_free / self.n_pairs if self.n_pairs else None,
        )


def critical_entities(ontology: "Ontology") -> list[str]:
    """Ids of the entities the ontology marks critical (critical-error-free rates)."""
    return [e.id for e in ontology.entities if e.critical]


@dataclass(frozen=True)
class SpecSummary:
    """The SPEC-CXR scores of a set of pairs: what ``scores.json`` holds."""

    entities: list[EntityScore]
    groups: list[GroupScore]
    averages: Averages
    error_summary: ErrorDistribution
    critical_error_free: float | None
    """Share of pairs with no error on a critical entity (``None`` for no pair)."""

    def headline(self) -> dict[str, float | None]:
        """The :data:`HEADLINE` numbers."""
        return headline_values(self.averages, self.error_summary, self.critical_error_free)


@dataclass(frozen=True)
class SpecScores(SpecSummary):
    """The SPEC-CXR scores of one judgement table, with its per-pair error tables."""

    errors: "pd.DataFrame"  # per pair: errors, then one column per error kind
    critical_errors: "pd.Series"  # per pair: errors on the ontology's critical entities


#: The headline numbers: (name, higher is better, metric id in signatures). One list, used by
#: ``cxreval evaluate`` (scores.json, the terminal), ``cxreval bench`` (result.json) and the page.
HEADLINE: tuple[tuple[str, bool, str], ...] = (
    ("presence_macro_f1", True, "spec-presence-macro-f1"),
    ("presence_micro_f1", True, "spec-presence-micro-f1"),
    ("presence_micro_precision", True, "spec-presence-micro-precision"),
    ("presence_micro_recall", True, "spec-presence-micro-recall"),
    ("location_accuracy", True, "spec-location-accuracy"),
    ("severity_accuracy", True, "spec-severity-accuracy"),
    ("comparison_accuracy", True, "spec-comparison-accuracy"),
    ("errors_per_report_mean", False, "spec-report-errors-mean"),
    ("error_free_rate", True, "spec-report-error-free-rate"),
    ("critical_error_free_rate", True, "spec-report-critical-error-free-rate"),
)


def headline_values(averages: Averages, error_summary: ErrorDistribution,
                    critical_error_free: float | None) -> dict[str, float | None]:
    """The value of each :data:`HEADLINE` number (attribute accuracies pooled over TP rows)."""
    a = averages
    values = {
        "presence_macro_f1": a.macro_f1,
        "presence_micro_f1": a.micro.f1,
        "presence_micro_precision": a.micro.precision,
        "presence_micro_recall": a.micro.recall,
        "location_accuracy": a.location.accuracy,
        "severity_accuracy": a.severity.accuracy,
        "comparison_accuracy": a.comparison.accuracy,
        "errors_per_report_mean": error_summary.mean,
        "error_free_rate": error_summary.error_free,
        "critical_error_free_rate": critical_error_free,
    }
    return {name: values[name] for name, _, _ in HEADLINE}


def spec_scores(table: "JudgementTable", ontology: "Ontology") -> SpecScores:
    """All SPEC-CXR scores of ``table`` (its ``pair_ids`` are the pairs; TN rows may be implicit),
    computed from its :class:`SpecTotals`, as a streamed evaluation computes them."""
    totals, errors, critical = SpecTotals.with_tables(table, ontology)
    summary = totals.scores(ontology)
    return SpecScores(**summary.__dict__, errors=errors, critical_errors=critical)
