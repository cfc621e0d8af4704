"""Per-pair caches of the entity- and report-level scores, and bootstrap / paired tests on them.

The judgement table is read once into arrays (pairs x entities x TP/FP/FN, pairs x attribute
correct/judged, pairs x errors); confidence intervals and tests then resample those arrays
(:mod:`cxreval.scores.stats`) and never touch a judge or the table again. Implicit TN rows (an
entity neither report mentions) need no storage: every score here is a function of TP, FP, FN.

Score names are those of :data:`cxreval.scores.spec.HEADLINE` (``presence_macro_f1``,
``location_accuracy`` (pooled, TP rows only, as in :func:`averages`), ``errors_per_report_mean``,
``error_free_rate``...), plus ``presence_macro_precision|recall`` and
``<entity>/precision|recall|f1`` per entity.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cxreval.io import fingerprints_comparable
from cxreval.literals import COUNTED_PRESENCE
from cxreval.ontology import Ontology
from cxreval.scores.entity import ATTRIBUTES
from cxreval.scores.ratios import presence_prf, safe_div
from cxreval.scores.signature import Signature, check_comparable
from cxreval.scores.stats import (
    BootstrapResult,
    CIMethod,
    PairCache,
    PairedComparison,
    StatFn,
    bootstrap,
    concat_caches,
    paired_comparison,
)

if TYPE_CHECKING:  # pragma: no cover
    from cxreval.evaluate import EvaluationResult

ENTITY_SCORES = ("precision", "recall", "f1")


def _pair_codes(frame: pd.DataFrame, pair_ids: Sequence[str]) -> np.ndarray:
    codes = pd.Index(list(pair_ids)).get_indexer(frame["pair_id"])
    if (codes < 0).any():
        unknown = frame["pair_id"][codes < 0].unique()[:5].tolist()
        raise ValueError(f"judgement rows for pairs not in pair_ids: {unknown}")
    return codes


def entity_counts(frame: pd.DataFrame, ontology: Ontology, pair_ids: Sequence[str]) -> np.ndarray:
    """Presence counts per pair and entity, ``(n_pairs, n_entities, 3)``: TP, FP, FN."""
    out = np.zeros((len(pair_ids), len(ontology.entities), 3), dtype=np.int64)
    if frame.empty:
        return out
    pair = _pair_codes(frame, pair_ids)
    ent = pd.Index(ontology.entity_ids).get_indexer(frame["entity"])
    kind = pd.Index(COUNTED_PRESENCE).get_indexer(frame["presence"])
    keep = (kind >= 0) & (ent >= 0)
    np.add.at(out, (pair[keep], ent[keep], kind[keep]), 1)
    return out


def attribute_counts(frame: pd.DataFrame, ontology: Ontology, pair_ids: Sequence[str]) -> np.ndarray:
    """Attribute counts per pair, pooled over entities, ``(n_pairs, 3, 2)``: correct, judged
    for location, severity, comparison; TP rows of entities the attribute applies to."""
    out = np.zeros((len(pair_ids), len(ATTRIBUTES), 2), dtype=np.int64)
    if frame.empty:
        return out
    tp = frame[frame["presence"] == "TP"]
    pair = _pair_codes(tp, pair_ids)
    for k, attr in enumerate(ATTRIBUTES):
        applies = tp["entity"].isin([e.id for e in ontology.entities if attr in e.attributes]).to_numpy()
        values = tp[attr].to_numpy()
        if attr == "comparison":
            correct, judged = applies & (values == "other"), applies
        else:
            correct = applies & (values == "aligned")
            judged = correct | (applies & (values == "not-aligned"))
        out[:, k, 0] = np.bincount(pair[correct], minlength=len(pair_ids))
        out[:, k, 1] = np.bincount(pair[judged], minlength=len(pair_ids))
    return out


def _entity_statistic(n_entities: int) -> StatFn:
    def statistic(sums: np.ndarray) -> np.ndarray:
        per, macro, micro = presence_prf(sums.reshape(len(sums), n_entities, 3))
        return np.concatenate([per.reshape(len(sums), -1), macro, micro], axis=1)

    return statistic


def _attribute_statistic(sums: np.ndarray) -> np.ndarray:
    c = sums.reshape(len(sums), len(ATTRIBUTES), 2)
    return safe_div(c[..., 0], c[..., 1])


def entity_cache(frame: pd.DataFrame, ontology: Ontology, pair_ids: Sequence[str]) -> PairCache:
    """Cache of every entity-level score: per-entity and macro / micro presence P / R / F1, and
    pooled attribute accuracies."""
    counts = entity_counts(frame, ontology, pair_ids)
    n, n_ent = counts.shape[0], counts.shape[1]
    names = tuple(f"{e}/{s}" for e in ontology.entity_ids for s in ENTITY_SCORES)
    names += tuple(f"presence_macro_{s}" for s in ENTITY_SCORES) + tuple(f"presence_micro_{s}" for s in ENTITY_SCORES)
    presence = PairCache(counts.reshape(n, -1).astype(float), _entity_statistic(n_ent), names)
    attrs = attribute_counts(frame, ontology, pair_ids)
    attr_cache = PairCache(attrs.reshape(n, -1).astype(float), _attribute_statistic,
                           tuple(f"{a}_accuracy" for a in ATTRIBUTES))
    return concat_caches([presence, attr_cache])


def _report_statistic(sums: np.ndarray) -> np.ndarray:
    # columns: errors, error-free indicator, pair count (1 per pair)
    return np.stack([safe_div(sums[:, 0], sums[:, 2]), safe_div(sums[:, 1], sums[:, 2])], axis=-1)


def report_cache(errors: pd.DataFrame) -> PairCache:
    """Cache of the report-level scores from the per-pair error table (``pair_errors``):
    mean errors per report and the error-free rate."""
    e = errors["errors"].to_numpy(dtype=float)
    values = np.stack([e, (e == 0).astype(float), np.ones_like(e)], axis=1)
    return PairCache(values, _report_statistic, ("errors_per_report_mean", "error_free_rate"))


def evaluation_cache(result: EvaluationResult) -> PairCache:
    """Entity- and report-level caches of one evaluation, side by side."""
    from cxreval.scores.entity import judgement_frame

    frame = judgement_frame(result.judgements)
    return concat_caches([entity_cache(frame, result.ontology, result.pair_ids), report_cache(result.errors)])


def bootstrap_evaluation(
    result: EvaluationResult,
    *,
    resamples: int = 1000,
    seed: int = 0,
    method: CIMethod = "bca",
    confidence: float = 0.95,
) -> BootstrapResult:
    """Bootstrap CIs of every entity- and report-level score of an evaluation (pairs resampled)."""
    return bootstrap(evaluation_cache(result), resamples=resamples, seed=seed, method=method,
                     confidence=confidence, signature=result.signature.with_metric("spec-cxr-bootstrap"))


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
        raise ValueError("the two evaluations were scored against different references (their references_sha256 "
                         "differ): a paired test needs the same reference reports")
    if ra is not None and rb is not None and not fingerprints_comparable(ra, rb):
        warnings.warn("one of the two evaluations was written by an older cxreval, whose references fingerprint "
                      "cannot be checked against this one; only the pair ids are known to match (re-run "
                      "cxreval evaluate on it to check the references too)", stacklevel=2)
    if sorted(a.pair_ids) != sorted(b.pair_ids):
        raise ValueError("the two evaluations do not cover the same pair ids")
    cache_a = evaluation_cache(a)
    cache_b = evaluation_cache(b)
    order = pd.Index(b.pair_ids).get_indexer(a.pair_ids)
    cache_b = PairCache(cache_b.values[order], cache_b.statistic, cache_b.names)
    sig: Signature = a.signature.with_metric("spec-cxr-paired")
    return paired_comparison(cache_a, cache_b, resamples=resamples, permutations=permutations, seed=seed,
                             method=method, confidence=confidence, signature=sig)
