"""Every SPEC-CXR table of a judgement table, computed in one place.

Presence P/R/F1 per entity and group, macro and micro; attribute accuracies (pooled over TP
rows); errors per pair and their distribution. The headline numbers are registered metrics
(:mod:`cxreval.metrics.table`) computed from the same statistics (:attr:`SpecTotals.block_sums`);
``cxreval evaluate``, ``cxreval bench`` and the HTML page all take their SPEC numbers from
:func:`spec_scores` and those metrics, so a number cannot differ between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from cxreval.scores.entity import (
    Averages,
    EntityScore,
    GroupScore,
    averages,
    group_scores,
    scores_of_counts,
)
from cxreval.scores.report_errors import (
    ErrorDistribution,
    add_histograms,
    distribution_of,
    error_histogram,
)
from cxreval.scores.statistics import BLOCKS, TableStatistics

if TYPE_CHECKING:
    import pandas as pd

    from cxreval.judge.table import JudgementTable
    from cxreval.ontology import Ontology


@dataclass(frozen=True)
class SpecTotals:
    """The additive statistics every SPEC number is computed from: per-entity counts, pairs,
    pairs per exact error count, and each statistic block's sum (:mod:`cxreval.scores.statistics`:
    what the registered metrics compute from).

    Totals of two sets of pairs add (``a + b``), so a streamed evaluation keeps only these while
    its pairs pass through, and scores them with :meth:`scores` exactly as a whole table is scored.
    """

    counts: pd.DataFrame  # :meth:`TableStatistics.entity_counts`
    n_pairs: int
    error_histogram: dict[int, int] = field(default_factory=dict)
    block_sums: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, table: JudgementTable, ontology: Ontology) -> SpecTotals:
        """Totals of one judgement table."""
        return cls.with_tables(table, ontology)[0]

    @classmethod
    def with_tables(cls, table: JudgementTable, ontology: Ontology) -> tuple[SpecTotals, pd.DataFrame, pd.Series]:
        """Totals of one judgement table, with its per-pair errors (``errors.csv``'s counts) and
        critical errors."""
        import pandas as pd

        stats = TableStatistics(table, ontology)
        errors = stats.error_table()
        critical = pd.Series(stats.critical_errors(), index=errors.index, name="errors")
        totals = cls(
            counts=stats.entity_counts(),
            n_pairs=stats.n_pairs,
            error_histogram=error_histogram(errors),
            block_sums={b: stats.total(b) for b in BLOCKS},
        )
        return totals, errors, critical

    @classmethod
    def empty(cls, ontology: Ontology) -> SpecTotals:
        """Totals of no pairs (the start of a sum)."""
        from cxreval.judge.table import JudgementTable

        return cls.of(JudgementTable.empty(), ontology)

    def __add__(self, other: SpecTotals) -> SpecTotals:
        return SpecTotals(
            counts=self.counts + other.counts,
            n_pairs=self.n_pairs + other.n_pairs,
            error_histogram=add_histograms(self.error_histogram, other.error_histogram),
            block_sums={b: self.block_sums[b] + other.block_sums[b] for b in self.block_sums},
        )

    def scores(self, ontology: Ontology) -> SpecSummary:
        """Every SPEC table of these totals."""
        ents = scores_of_counts(self.counts, ontology, self.n_pairs)
        return SpecSummary(
            entities=ents,
            groups=group_scores(ents, ontology),
            averages=averages(ents),
            error_summary=distribution_of(self.error_histogram),
            block_sums=dict(self.block_sums),
        )


def critical_entities(ontology: Ontology) -> list[str]:
    """Ids of the entities the ontology marks critical (critical-error-free rates)."""
    return [e.id for e in ontology.entities if e.critical]


@dataclass(frozen=True)
class SpecSummary:
    """The SPEC-CXR scores of a set of pairs: what ``scores.json`` holds."""

    entities: list[EntityScore]
    groups: list[GroupScore]
    averages: Averages
    error_summary: ErrorDistribution
    block_sums: dict[str, np.ndarray]
    """Each statistic block's sum: what the headline metrics compute from."""


@dataclass(frozen=True)
class SpecScores(SpecSummary):
    """The SPEC-CXR scores of one judgement table, with its per-pair error tables."""

    errors: pd.DataFrame  # per pair: errors, then one column per error kind
    critical_errors: pd.Series  # per pair: errors on the ontology's critical entities


def spec_scores(table: JudgementTable, ontology: Ontology) -> SpecScores:
    """All SPEC-CXR scores of ``table`` (its ``pair_ids`` are the pairs; TN rows may be implicit),
    computed from its :class:`SpecTotals`, as a streamed evaluation computes them."""
    totals, errors, critical = SpecTotals.with_tables(table, ontology)
    summary = totals.scores(ontology)
    return SpecScores(**summary.__dict__, errors=errors, critical_errors=critical)
