"""The arithmetic every score shares, written once: ratios, precision / recall / F1, and means
over the values that are defined.

A ratio with a zero denominator is undefined (``None`` for one number, NaN in arrays), never 0:
an entity or label that no report affirms has no F1, and counting it as 0 or 1 would distort a
macro mean. Scalars (pydantic score models, tables) and arrays (bootstrap resamples, bench's
per-pair sums) use the same definitions, so a number cannot differ between the two paths.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def ratio(num: float, den: float) -> float | None:
    """``num / den``, or ``None`` when ``den`` is 0."""
    return float(num / den) if den else None


def f1_score(tp: float, fp: float, fn: float) -> float | None:
    """F1 of counts, ``2 TP / (2 TP + FP + FN)``; ``None`` when nothing was affirmed by either side.
    The one scalar F1: presence scores and agreement tables call it (``prf`` is its array twin,
    which the registered metrics and the reward use)."""
    return ratio(2 * tp, 2 * tp + fp + fn)


def finite_or_none(x: float | None) -> float | None:
    """A number as JSON and the tables write it: ``None`` for a missing, NaN or infinite value."""
    return None if x is None or not np.isfinite(x) else float(x)


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Element-wise ``num / den``, NaN where ``den`` is 0."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def prf(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Precision, recall and F1 of counts (any shape), stacked on a new last axis; NaN if undefined."""
    return np.stack([safe_div(tp, tp + fp), safe_div(tp, tp + fn), safe_div(2 * tp, 2 * tp + fp + fn)], axis=-1)


def mean_defined(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not ``None`` (or NaN); ``None`` when none is: the one-row
    form of :func:`mean_defined_rows`, so a scalar and an array mean cannot differ."""
    row = np.array([[np.nan if v is None else float(v) for v in values]], dtype=float)
    if row.shape[1] == 0:
        return None
    mean = float(mean_defined_rows(row)[0])
    return None if np.isnan(mean) else mean


def mean_defined_rows(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """Mean over ``axis`` of the values that are not NaN; NaN where none is.

    Each row's mean is numpy's own mean of its defined values alone (the same pairwise sum as
    ``np.mean(values)``), so the figure does not depend on where the undefined entries sit or
    on whether it was computed one row at a time or in a bootstrap's thousand rows. Rows with
    the same number of defined values are averaged together, their values packed in order, so
    it stays vectorised (at most one group per possible count).
    """
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    flat = x.reshape(-1, x.shape[-1])
    out = np.full(len(flat), np.nan)
    defined = ~np.isnan(flat)
    counts = defined.sum(axis=1)
    for k in np.unique(counts):
        if k:
            rows = np.flatnonzero(counts == k)
            out[rows] = flat[rows][defined[rows]].reshape(len(rows), k).mean(axis=1)
    return out.reshape(x.shape[:-1])


def macro_prf(counts: np.ndarray) -> np.ndarray:
    """Macro precision, recall and F1 of TP/FP/FN counts ``(R, E, 3)``: the mean over the
    entities (or labels) where each is defined, ``(R, 3)``."""
    per = prf(counts[..., 0], counts[..., 1], counts[..., 2])
    return np.stack([mean_defined_rows(per[..., k]) for k in range(3)], axis=-1)


def micro_prf(counts: np.ndarray) -> np.ndarray:
    """Micro precision, recall and F1 of TP/FP/FN counts ``(R, E, 3)``: of the pooled counts, ``(R, 3)``."""
    pooled = counts.sum(axis=1)
    return prf(pooled[:, 0], pooled[:, 1], pooled[:, 2])


def presence_prf(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Presence scores of TP/FP/FN counts ``(R, E, 3)`` (R resamples, E entities or labels):
    per entity ``(R, E, 3)``, macro (mean over the entities where defined) ``(R, 3)`` and micro
    (pooled counts) ``(R, 3)``; the last axis is precision, recall, F1."""
    return prf(counts[..., 0], counts[..., 1], counts[..., 2]), macro_prf(counts), micro_prf(counts)


def presence_f1(sums: np.ndarray, average: str = "macro") -> np.ndarray:
    """Macro or micro presence F1 of summed TP/FP/FN statistics ``(R, 3 E)`` (entities side by
    side), one per row: the ``compute`` of the presence-F1 metrics, in bench and in the registry."""
    s = np.atleast_2d(np.asarray(sums, dtype=float))
    counts = s.reshape(len(s), -1, 3)
    return (macro_prf(counts) if average == "macro" else micro_prf(counts))[:, 2]
