"""Report-level error counts (SPEC-CXR): FP + FN + not-aligned + comparison errors per pair."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from cxreval.scores.statistics import ERROR_COLUMNS  # noqa: F401  (errors.csv's column order)


class ErrorDistribution(BaseModel):
    """Summary of the per-pair error counts. Lower is better."""

    model_config = ConfigDict(frozen=True)

    n_pairs: int
    mean: float | None
    std: float | None
    median: float | None
    max: int | None
    error_free: float | None
    histogram: dict[str, int]


def pair_errors(frame: pd.DataFrame, pair_ids: Sequence[str]) -> pd.DataFrame:
    """Error counts per pair of judgement rows, every pair listed (a pair with no rows has zero
    errors): :meth:`cxreval.scores.statistics.TableStatistics.error_table`, the one place errors
    are counted under :data:`~cxreval.judge.models.ERROR_KINDS`."""
    from cxreval.judge.table import JudgementTable
    from cxreval.ontology import load_ontology
    from cxreval.scores.statistics import TableStatistics

    # the error rule reads no entity property: any ontology codes the rows the same way
    return TableStatistics(JudgementTable(pair_ids, frame), load_ontology()).error_table()


def error_histogram(errors: pd.DataFrame) -> dict[int, int]:
    """Pairs per exact error count (``{errors: pairs}``) of a per-pair error table: the additive
    form of the distribution, so chunks of a stream add up to the whole (:func:`distribution_of`)."""
    values, counts = np.unique(errors["errors"].to_numpy(dtype=np.int64), return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


def add_histograms(a: Mapping[int, int], b: Mapping[int, int]) -> dict[int, int]:
    """The histogram of two sets of pairs together."""
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + n
    return out


def error_distribution(errors: pd.DataFrame, top_bin: int = 10) -> ErrorDistribution:
    """Summary of a per-pair error table (:func:`pair_errors`)."""
    return distribution_of(error_histogram(errors), top_bin)


def distribution_of(histogram: Mapping[int, int], top_bin: int = 10) -> ErrorDistribution:
    """Summary of per-pair error counts given as ``{errors: pairs}``: the one place the mean,
    sample sd, median, maximum and error-free rate are computed.

    The counts are integers, so the sums are exact (the sd is sqrt((n*S2 - S1^2) / (n(n-1))) of
    exact integers) and the result does not depend on pair order or on how pairs were chunked.
    """
    items = sorted((int(k), int(n)) for k, n in histogram.items() if n)
    n = sum(c for _, c in items)
    if n == 0:
        return ErrorDistribution(n_pairs=0, mean=None, std=None, median=None, max=None, error_free=None, histogram={})
    s1 = sum(k * c for k, c in items)
    s2 = sum(k * k * c for k, c in items)
    std = math.sqrt((n * s2 - s1 * s1) / (n * (n - 1))) if n > 1 else 0.0
    hist = {str(k): histogram.get(k, 0) for k in range(top_bin)}
    hist[f"{top_bin}+"] = sum(c for k, c in items if k >= top_bin)
    return ErrorDistribution(
        n_pairs=n,
        mean=s1 / n,
        std=std,
        median=_median(items, n),
        max=items[-1][0],
        error_free=histogram.get(0, 0) / n,
        histogram=hist,
    )


def _median(items: list[tuple[int, int]], n: int) -> float:
    """Median of sorted (value, count) items holding ``n`` values."""

    def at(rank: int) -> int:  # the rank-th value (0-based) in sorted order
        seen = 0
        for value, count in items:
            seen += count
            if rank < seen:
                return value
        raise IndexError(rank)

    return float(at(n // 2)) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2
