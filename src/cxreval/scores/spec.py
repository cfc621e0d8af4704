"""Every SPEC-CXR number of a judgement table, computed in one place.

Presence P/R/F1 per entity and group, macro and micro; attribute accuracies (pooled over TP
rows); errors per pair and their distribution; error-free and critical-error-free rates.
``cxreval evaluate``, ``cxreval bench`` and the HTML page all take their SPEC numbers from
:func:`spec_scores`, so a number cannot differ between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cxreval.scores.entity import Averages, EntityScore, GroupScore, averages, entity_scores, group_scores
from cxreval.scores.report import ErrorDistribution, error_distribution, pair_errors

if TYPE_CHECKING:
    import pandas as pd

    from cxreval.judge.table import JudgementTable
    from cxreval.ontology import Ontology


@dataclass(frozen=True)
class SpecScores:
    """The SPEC-CXR scores of one judgement table."""

    entities: list[EntityScore]
    groups: list[GroupScore]
    averages: Averages
    errors: "pd.DataFrame"  # per pair: errors, then one column per error kind
    error_summary: ErrorDistribution
    critical_errors: "pd.Series"  # per pair: errors on the ontology's critical entities

    @property
    def critical_error_free(self) -> float | None:
        """Share of pairs with no error on a critical entity (``None`` for no pair)."""
        n = len(self.critical_errors)
        return float((self.critical_errors == 0).sum()) / n if n else None

    def headline(self) -> dict[str, float | None]:
        """The :data:`HEADLINE` numbers of this table."""
        return headline_values(self.averages, self.error_summary, self.critical_error_free)


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
    """All SPEC-CXR scores of ``table`` (its ``pair_ids`` are the pairs; TN rows may be implicit)."""
    ents = entity_scores(table.frame, ontology, len(table.pair_ids))
    errors = pair_errors(table.frame, table.pair_ids)
    critical = [e.id for e in ontology.entities if e.critical]
    return SpecScores(
        entities=ents,
        groups=group_scores(ents, ontology),
        averages=averages(ents),
        errors=errors,
        error_summary=error_distribution(errors),
        critical_errors=pair_errors(table.frame, table.pair_ids, entities=critical)["errors"],
    )
