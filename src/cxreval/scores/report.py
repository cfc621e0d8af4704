"""Report-level error counts (SPEC-CXR): FP + FN + not-aligned + comparison errors per pair."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

ERROR_COLUMNS = (
    "fp",
    "fn",
    "location_not_aligned",
    "severity_not_aligned",
    "adding_unmentioned_comparison",
    "missing_mentioned_comparison",
)


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
    """Error counts per pair, every pair listed (a pair with no rows has zero errors)."""
    index = pd.Index(list(pair_ids), name="pair_id")
    if frame.empty:
        out = pd.DataFrame(0, index=index, columns=list(ERROR_COLUMNS))
    else:
        flags = pd.DataFrame(
            {
                "pair_id": frame["pair_id"],
                "fp": frame["presence"].eq("FP"),
                "fn": frame["presence"].eq("FN"),
                "location_not_aligned": frame["location"].eq("not-aligned"),
                "severity_not_aligned": frame["severity"].eq("not-aligned"),
                "adding_unmentioned_comparison": frame["comparison"].eq("adding-unmentioned-comparison"),
                "missing_mentioned_comparison": frame["comparison"].eq("missing-mentioned-comparison"),
            }
        )
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
