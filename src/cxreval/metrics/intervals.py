"""Bootstrap intervals and paired tests of an evaluation, on per-pair caches of its statistics.

The judgement table is read once into per-pair statistics
(:class:`~cxreval.scores.statistics.TableStatistics`); confidence intervals and tests then
resample those (:mod:`cxreval.scores.resampling`) and never touch a judge or the table again. Every
score is a registered table metric's ``compute`` (:mod:`cxreval.metrics.table`), named by its
headline name (``presence_macro_f1``, ``location_accuracy``, ``errors_per_report_mean``,
``error_free_rate``...), plus ``<entity>/precision|recall|f1`` per entity from the same presence
statistics.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cxreval.metrics.table import block_layout, table_metric, table_metric_names
from cxreval.ontology import Ontology
from cxreval.scores.fingerprint import fingerprints_comparable
from cxreval.scores.ratios import presence_prf
from cxreval.scores.resampling import (
    BootstrapResult,
    CIMethod,
    PairCache,
    PairedComparison,
    bootstrap,
    paired_comparison,
)
from cxreval.scores.signature import Signature, check_comparable
from cxreval.scores.statistics import TableStatistics

if TYPE_CHECKING:  # pragma: no cover
    from cxreval.evaluate import EvaluationResult
    from cxreval.judge.table import JudgementTable

ENTITY_SCORES = ("precision", "recall", "f1")


def table_cache(table: JudgementTable, ontology: Ontology, pair_ids: Sequence[str] | None = None) -> PairCache:
    """Cache of every score of a judgement table: per-entity presence P / R / F1, then every
    registered table metric (:data:`cxreval.metrics.table.TABLE_METRICS`, in that order)."""
    stats = TableStatistics(table, ontology, pair_ids)
    metrics = [table_metric(n, ontology) for n in table_metric_names()]
    values, blocks = block_layout(metrics, stats)
    presence = blocks["presence"]
    parts = [(m, blocks[m.statistic]) for m in metrics]

    def statistic(sums: np.ndarray) -> np.ndarray:
        counts = sums[:, presence]
        per, _, _ = presence_prf(counts.reshape(len(sums), -1, 3))
        scores = [np.asarray(m.compute(sums[:, cols]), dtype=float)[:, None] for m, cols in parts]
        return np.concatenate([per.reshape(len(sums), -1), *scores], axis=1)

    names = tuple(f"{e}/{s}" for e in ontology.entity_ids for s in ENTITY_SCORES)
    return PairCache(values, statistic, names + tuple(m.headline for m in metrics))


def evaluation_cache(result: EvaluationResult) -> PairCache:
    """The :func:`table_cache` of one evaluation."""
    return table_cache(result.table, result.ontology)


def bootstrap_evaluation(
    result: EvaluationResult,
    *,
    resamples: int = 1000,
    seed: int = 0,
    method: CIMethod = "bca",
    confidence: float = 0.95,
) -> BootstrapResult:
    """Bootstrap CIs of every entity- and report-level score of an evaluation (pairs resampled)."""
    return bootstrap(
        evaluation_cache(result),
        resamples=resamples,
        seed=seed,
        method=method,
        confidence=confidence,
        signature=result.signature.with_metric("spec-cxr-bootstrap"),
    )


def compare_evaluations(
    a: EvaluationResult,
    b: EvaluationResult,
    *,
    resamples: int = 1000,
    permutations: int = 1000,
    seed: int = 0,
    method: CIMethod = "bca",
    confidence: float = 0.95,
) -> PairedComparison:
    """Paired bootstrap and approximate randomisation of system A against system B.

    Refuses results with different signatures or different pairs: a paired test needs the same
    references, judged the same way. Pairs are aligned by id.
    """
    check_comparable(a.signature, b.signature)
    ra, rb = getattr(a, "references_sha256", None), getattr(b, "references_sha256", None)
    if fingerprints_comparable(ra, rb) and ra != rb:
        raise ValueError(
            "the two evaluations were scored against different references (their references_sha256 "
            "differ): a paired test needs the same reference reports"
        )
    if ra is not None and rb is not None and not fingerprints_comparable(ra, rb):
        warnings.warn(
            "one of the two evaluations was written by an older cxreval, whose references fingerprint "
            "cannot be checked against this one; only the pair ids are known to match (re-run "
            "cxreval evaluate on it to check the references too)",
            stacklevel=2,
        )
    if sorted(a.pair_ids) != sorted(b.pair_ids):
        raise ValueError("the two evaluations do not cover the same pair ids")
    cache_a = evaluation_cache(a)
    cache_b = table_cache(b.table, b.ontology, a.pair_ids)  # B's pairs in A's order
    sig: Signature = a.signature.with_metric("spec-cxr-paired")
    return paired_comparison(
        cache_a,
        cache_b,
        resamples=resamples,
        permutations=permutations,
        seed=seed,
        method=method,
        confidence=confidence,
        signature=sig,
    )
