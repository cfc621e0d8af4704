"""The shared arithmetic: scalar and array forms agree, and undefined is never 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cxreval.scores.entity import PresenceScore
from cxreval.scores.ratios import mean_defined, mean_defined_rows, prf, ratio, safe_div


@pytest.mark.parametrize(("tp", "fp", "fn"), [(0, 0, 0), (3, 0, 0), (0, 2, 0), (0, 0, 5), (4, 1, 2), (7, 3, 0)])
def test_scalar_and_array_forms_agree(tp: int, fp: int, fn: int) -> None:
    arr = prf(np.array([tp]), np.array([fp]), np.array([fn]))[0]
    score = PresenceScore(tp=tp, fp=fp, fn=fn)
    for got, want in zip(arr, (score.precision, score.recall, score.f1)):
        assert (math.isnan(got) and want is None) or got == pytest.approx(want)


def test_undefined_is_never_zero() -> None:
    assert ratio(1, 0) is None and math.isnan(safe_div(np.array([1.0]), np.array([0.0]))[0])
    assert mean_defined([None, float("nan")]) is None and mean_defined([None, 0.5, 1.0]) == 0.75
    rows = mean_defined_rows(np.array([[np.nan, 1.0, 0.0], [np.nan, np.nan, np.nan]]))
    assert rows[0] == 0.5 and math.isnan(rows[1])
