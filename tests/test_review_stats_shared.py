"""Review statistics come from :mod:`cxreval.scores.resampling` (issue 30: statistics twice).

The kappas must equal, bit for bit, the formulas ``review/accuracy.py`` used to define (kept here as
the reference for byte-identical ``cxreval review stats`` output) and statsmodels' within
rounding; the Clopper-Pearson interval must equal scipy's beta quantiles and statsmodels'
``method="beta"``, and the root-finding ``binomtest`` interval the review module used before
within its solver's tolerance.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
import scipy.stats as sps
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from cxreval.review import accuracy as review
from cxreval.scores import resampling as stats
from cxreval.scores.resampling import clopper_pearson, cohens_kappa, fleiss_kappa

LABELS = (
    ["TP", "FP", "FN", "TN"],
    ["aligned", "not-aligned", "not-available"],
    ["other", "adding-unmentioned-comparison", "missing-mentioned-comparison"],
)


# -- the formulas review/accuracy.py defined before, verbatim in substance -------------------------


def former_cohen(a: Sequence[str], b: Sequence[str]) -> float | None:
    """review.stats.cohen_kappa as it was."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[c] * cb[c] for c in set(ca) | set(cb)) / (n * n)
    return None if math.isclose(expected, 1.0) else (observed - expected) / (1 - expected)


def former_fleiss(items: Sequence[Sequence[str]]) -> float | None:
    """review.stats.fleiss_kappa as it was."""
    m = len(items[0])
    cats = sorted({c for i in items for c in i})
    counts = np.array([[Counter(i)[c] for c in cats] for i in items], dtype=float)
    p_j = counts.sum(axis=0) / (len(items) * m)
    p_i = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    p_bar, p_e = p_i.mean(), (p_j * p_j).sum()
    return None if math.isclose(p_e, 1.0) else float((p_bar - p_e) / (1 - p_e))


def _labels(rng: random.Random, n: int, k: int) -> list[str]:
    vocab = rng.choice(LABELS)[:k]
    return [rng.choice(vocab) for _ in range(n)]


def test_review_uses_the_one_implementation() -> None:
    for name in ("clopper_pearson", "cohen_kappa", "fleiss_kappa"):
        assert name not in vars(review) or getattr(review, name) is getattr(stats, name), name


# -- Cohen ----------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # statsmodels' variance, n = 1
def test_cohen_equals_former_and_statsmodels_on_random_labels() -> None:
    rng = random.Random(30)
    defined = 0
    for _ in range(2000):
        n, k = rng.randint(1, 60), rng.randint(1, 3)
        a = _labels(rng, n, k)
        b = [x if rng.random() < 0.7 else y for x, y in zip(a, _labels(rng, n, k))]
        got = cohens_kappa(a, b).kappa
        assert got == former_cohen(a, b)  # bit for bit, None alike
        if got is not None:
            defined += 1
            cats = sorted(set(a) | set(b))
            table = np.array([[sum(x == r and y == c for x, y in zip(a, b)) for c in cats] for r in cats])
            assert got == pytest.approx(sm_cohens_kappa(table).kappa, rel=1e-12, abs=1e-15)
    assert defined > 1000


def test_cohen_edge_cases() -> None:
    assert cohens_kappa(["TP"] * 4, ["TP"] * 4).kappa is None  # one category: undefined
    assert cohens_kappa(["TP", "FN"], ["TP", "FN"]).kappa == 1.0  # all agree
    assert cohens_kappa(["TP", "FN"], ["FN", "TP"]).kappa == -1.0
    assert cohens_kappa([], []).kappa is None  # 0 items
    assert cohens_kappa(["TP", None, "FN"], ["TP", "FN", float("nan")]).n_items == 1  # missing left out


# -- Fleiss ---------------------------------------------------------------------------------------


def test_fleiss_equals_former_and_statsmodels_on_random_labels() -> None:
    rng = random.Random(31)
    defined = 0
    for _ in range(2000):
        n, m, k = rng.randint(1, 40), rng.randint(2, 5), rng.randint(1, 3)
        truth = _labels(rng, n, k)
        items = [[t if rng.random() < 0.7 else rng.choice(truth) for _ in range(m)] for t in truth]
        got = fleiss_kappa(items)
        assert got.kappa == former_fleiss(items)  # bit for bit, None alike
        assert (got.n_items, got.n_raters) == (n, m)
        if got.kappa is not None:
            defined += 1
            index = {c: i for i, c in enumerate(sorted({v for i in items for v in i}))}
            counts, _ = aggregate_raters([[index[v] for v in i] for i in items])
            assert got.kappa == pytest.approx(sm_fleiss_kappa(counts), rel=1e-12, abs=1e-15)
    assert defined > 1000


def test_fleiss_edge_cases() -> None:
    assert fleiss_kappa([["TP", "TP"], ["TP", "TP"]]).kappa is None  # one category: undefined
    assert fleiss_kappa([["TP", "TP", "TP"], ["FN", "FN", "FN"]]).kappa == 1.0  # all agree
    res = fleiss_kappa([["TP", None], ["FN", "FN"], ["TP", "TP"]])  # an item missing a rating: left out
    assert (res.n_items, res.kappa) == (2, 1.0)
    assert fleiss_kappa([[None, "TP"]]).kappa is None and fleiss_kappa([[None, "TP"]]).n_items == 0
    with pytest.raises(ValueError, match=">= 2 raters"):
        fleiss_kappa([["TP", "TP"], ["TP"]])  # ragged
    with pytest.raises(ValueError, match=">= 2 raters"):
        fleiss_kappa([["TP"], ["FN"]])


def test_fleiss_numeric_ratings_unchanged_and_labels_agree() -> None:
    rng = np.random.default_rng(32)
    ratings = rng.integers(0, 3, (30, 4)).astype(float)
    ratings[3, 2] = np.nan
    labels = [[None if np.isnan(v) else "abc"[int(v)] for v in row] for row in ratings]
    num, lab = fleiss_kappa(ratings), fleiss_kappa(labels)
    assert num.kappa == lab.kappa and num.n_items == lab.n_items == 29  # same sorted categories


# -- Clopper-Pearson ------------------------------------------------------------------------------


def test_clopper_pearson_against_beta_quantiles_statsmodels_and_binomtest() -> None:
    worst = 0.0
    for n in range(1, 151):
        k = np.arange(n + 1)
        for confidence in (0.9, 0.95, 0.99):
            low, high = clopper_pearson(k, n, confidence)
            a = (1 - confidence) / 2
            assert np.array_equal(low[1:], sps.beta.ppf(a, k[1:], n - k[1:] + 1)) and low[0] == 0.0
            assert np.array_equal(high[:-1], sps.beta.ppf(1 - a, k[:-1] + 1, n - k[:-1])) and high[-1] == 1.0
            ref_low, ref_high = proportion_confint(k, n, 1 - confidence, "beta")
            np.testing.assert_allclose(np.stack([low, high]), np.stack([ref_low, ref_high]), rtol=0, atol=1e-15)
            for j in k[:: max(1, n // 6)]:  # the former review method: scipy's root-finding interval
                ci = sps.binomtest(int(j), n).proportion_ci(confidence, method="exact")
                worst = max(worst, abs(low[j] - ci.low), abs(high[j] - ci.high))
    assert worst < 1e-9


def test_review_interval_edge_cases() -> None:
    assert review._interval(0, 0, 0.95) == (None, None)  # 0 of 0
    low, high = review._interval(0, 12, 0.95)
    assert low == 0.0 and 0 < high < 1
    low, high = review._interval(12, 12, 0.95)
    assert 0 < low < 1 and high == 1.0
    assert all(isinstance(x, float) for x in review._interval(7, 30, 0.95))
