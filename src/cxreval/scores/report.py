"""Report-level error counts (SPEC-CXR): FP + FN + not-aligned + comparison errors per pair."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from cxreval.judge.models import ERROR_KINDS

#: The error kinds of :data:`cxreval.judge.models.ERROR_KINDS`, in ``errors.csv`` column order.
ERROR_COLUMNS = tuple(ERROR_KINDS)


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


def pair_errors(frame: pd.DataFrame, pair_ids: Sequence[str], *, entities: Collection[str] | None = None) -> pd.DataFrame:
    """Error counts per pair, every pair listed (a pair with no rows has zero errors).

    The rule is :data:`~cxreval.judge.models.ERROR_KINDS`; ``entities`` keeps only the rows of
    those entities (e.g. the ontology's critical ones, for critical-error-free rates).
    """
    index = pd.Index(list(pair_ids), name="pair_id")
    if entities is not None and not frame.empty:
        frame = frame[frame["entity"].isin(set(entities))]
    if frame.empty:
        out = pd.DataFrame(0, index=index, columns=list(ERROR_COLUMNS))
    else:
        flags = pd.DataFrame({"pair_id": frame["pair_id"],
                              **{kind: frame[field].isin(bad) for kind, (field, bad) in ERROR_KINDS.items()}})
        out = flags.groupby("pair_id").sum().reindex(index, fill_value=0).astype(int)
    out.insert(0, "errors", out[list(ERROR_COLUMNS)].sum(axis=1))
    return out


def error_distribution(errors: pd.DataFrame, top_bin: int = 10) -> ErrorDistribution:
    values = errors["errors"].to_numpy()
    n = int(values.size)
    if n == 0:
        return ErrorDistribution(n_pairs=0, mean=None, std=None, median=None, max=None, error_free=None, histogram={})
    hist: dict[str, int] = {}
    for k in range(top_bin):
        hist[str(k)] = int((values == k).sum())
    hist[f"{top_bin}+"] = int((values >= top_bin).sum())
    return ErrorDistribution(
        n_pairs=n,
        mean=float(values.mean()),
        std=float(values.std(ddof=1)) if n > 1 else 0.0,
        median=float(np.median(values)),
        max=int(values.max()),
        error_free=float((values == 0).mean()),
        histogram=hist,
    )
