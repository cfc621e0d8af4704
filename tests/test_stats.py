"""Every statistic against scipy / statsmodels or a published worked example, on fixed inputs."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from cxreval.scores.resampling import (
    PairCache,
    bca_interval,
    bootstrap,
    bootstrap_distribution,
    bootstrap_weights,
    clopper_pearson,
    cohens_kappa,
    cohens_kappa_table,
    concat_caches,
    fleiss_kappa,
    fleiss_kappa_counts,
    mcnemar,
    mcnemar_paired,
    paired_comparison,
    percentile_interval,
    randomization_differences,
    randomization_pvalues,
)

# ---------------------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (298, 300), (17, 143), (0, 1), (1, 1)])
def test_clopper_pearson_matches_statsmodels_and_scipy(k, n):
    lo, hi = clopper_pearson(k, n)
    sm_lo, sm_hi = proportion_confint(k, n, alpha=0.05, method="beta")
    sp = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert float(lo) == pytest.approx(sm_lo, abs=1e-12) and float(hi) == pytest.approx(sm_hi, abs=1e-12)
    assert float(lo) == pytest.approx(sp.low, abs=1e-10) and float(hi) == pytest.approx(sp.high, abs=1e-10)


def test_clopper_pearson_reproduces_ran_score_table_2():
    # Ran Score paper, table 2 (n = 300): Fracture 0.993 [0.976, 0.999] (text: 0.9761-0.9992);
    # Pneumothorax 1.000 [0.988, 1.000]; Atelectasis 0.987 [0.966, 0.996].
    lo, hi = clopper_pearson(np.array([298, 300, 296]), np.array([300, 300, 300]))
    assert np.round(lo, 4)[0] == 0.9761 and np.round(hi, 4)[0] == 0.9992
    assert np.round(lo, 3).tolist() == [0.976, 0.988, 0.966]
    assert np.round(hi, 3).tolist() == [0.999, 1.0, 0.996]


def test_clopper_pearson_vectorised_and_undefined():
    lo, hi = clopper_pearson(np.array([0, 3, 0]), np.array([5, 5, 0]), confidence=0.9)
    assert lo[0] == 0.0 and hi[0] == pytest.approx(1 - 0.05 ** (1 / 5))
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    assert float(lo[1]) == pytest.approx(proportion_confint(3, 5, alpha=0.1, method="beta")[0])


# ---------------------------------------------------------------------------- McNemar

TABLES = [[[10, 5], [12, 3]], [[50, 0], [7, 40]], [[20, 9], [9, 20]], [[5, 0], [0, 5]], [[101, 121], [59, 33]]]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("exact,correction", [(True, True), (False, True), (False, False)])
def test_mcnemar_matches_statsmodels(table, exact, correction):
    res = mcnemar(table[0][1], table[1][0], exact=exact, correction=correction)
    if table[0][1] + table[1][0] == 0 and not exact:
        assert res.p_value == 1.0  # statsmodels divides by zero here; no discordant pair = no evidence
        return
    ref = sm_mcnemar(np.array(table), exact=exact, correction=correction)
    assert res.statistic == pytest.approx(float(ref.statistic))
    assert res.p_value == pytest.approx(float(ref.pvalue), rel=1e-12)
    assert res.signature.options["test"] == ("exact" if exact else "chi2")


def test_mcnemar_from_paired_outcomes():
    a = np.array([1, 1, 1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    b = np.array([1, 0, 0, 0, 1, 0, 0, 0, 1, 0], dtype=bool)
    res = mcnemar_paired(a, b)
    assert (res.b, res.c) == (5, 1)
    assert res.p_value == pytest.approx(sps.binomtest(1, 6, 0.5).pvalue)


# ---------------------------------------------------------------------------- kappas


def test_cohens_kappa_matches_statsmodels_and_a_worked_example():
    # Worked example (Wikipedia, "Cohen's kappa"): 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.
    table = np.array([[20, 5], [10, 15]])
    kappa, po, pe = cohens_kappa_table(table)
    assert po == pytest.approx(0.7) and pe == pytest.approx(0.5) and kappa == pytest.approx(0.4)
    rng = np.random.default_rng(3)
    for _ in range(5):
        t = rng.integers(0, 30, size=(3, 3))
        assert cohens_kappa_table(t)[0] == pytest.approx(sm_cohens_kappa(t).kappa, rel=1e-12)


def test_cohens_kappa_from_ratings_drops_missing():
    a = [1, 1, 0, 0, 1, None, 2, 2]
    b = [1, 0, 0, 0, 1, 1, 2, np.nan]
    res = cohens_kappa(a, b)
    t = np.array([[2, 0, 0], [1, 2, 0], [0, 0, 1]])  # rows a (0,1,2), cols b
    assert res.n_items == 6
    assert res.kappa == pytest.approx(sm_cohens_kappa(t).kappa)


def test_cohens_kappa_undefined_when_no_variation():
    assert cohens_kappa([1, 1, 1], [1, 1, 1]).kappa is None


# Fleiss (1971) as worked on Wikipedia ("Fleiss' kappa"): 10 subjects, 14 raters, 5 categories.
FLEISS_EXAMPLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def test_fleiss_kappa_worked_example_and_statsmodels():
    kappa, p_bar, p_e = fleiss_kappa_counts(FLEISS_EXAMPLE)
    assert round(p_bar, 3) == 0.378 and round(p_e, 3) == 0.213 and round(kappa, 3) == 0.210
    assert kappa == pytest.approx(sm_fleiss_kappa(FLEISS_EXAMPLE), rel=1e-12)


def test_fleiss_kappa_from_ratings_matches_statsmodels():
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, 40)
    ratings = np.where(rng.random((40, 4)) < 0.8, truth[:, None], 1 - truth[:, None]).astype(float)
    res = fleiss_kappa(ratings)
    counts, _ = aggregate_raters(ratings.astype(int))
    assert res.kappa == pytest.approx(sm_fleiss_kappa(counts), rel=1e-12)
    assert res.n_items == 40 and res.n_raters == 4
    ratings[0, 1] = np.nan
    assert fleiss_kappa(ratings).n_items == 39


# ---------------------------------------------------------------------------- bootstrap


def _f1_cache(n: int = 80, seed: int = 5) -> tuple[PairCache, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(seed)
    tp = (rng.random(n) < 0.4).astype(float)
    fp = (rng.random(n) < 0.15).astype(float)
    fn = (rng.random(n) < 0.2).astype(float)

    def stat(s: np.ndarray) -> np.ndarray:
        return np.stack([2 * s[:, 0] / (2 * s[:, 0] + s[:, 1] + s[:, 2]), s[:, 0] / (s[:, 0] + s[:, 1])], axis=1)

    return PairCache(np.stack([tp, fp, fn], axis=1), stat, ("f1", "precision")), (tp, fp, fn)


def _scipy_f1(tp, fp, fn, axis=-1):
    t, p, n = tp.sum(axis), fp.sum(axis), fn.sum(axis)
    return 2 * t / (2 * t + p + n)


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_bootstrap_intervals_match_scipy_on_the_same_resamples(method):
    cache, data = _f1_cache()
    theta_b = bootstrap_distribution(cache, 999, seed=7)
    ref = sps.bootstrap(
        data,
        _scipy_f1,
        paired=True,
        vectorized=True,
        n_resamples=0,
        method=method,
        bootstrap_result=SimpleNamespace(bootstrap_distribution=theta_b[:, 0]),
    )
    res = bootstrap(cache, resamples=999, seed=7, method=method.lower())
    est = res.get("f1")
    assert est.low == pytest.approx(ref.confidence_interval.low, rel=1e-12)
    assert est.high == pytest.approx(ref.confidence_interval.high, rel=1e-12)
    assert est.estimate == pytest.approx(float(_scipy_f1(*data)))
    assert est.n_defined == 999
    assert res.signature.options["seed"] == "7" and res.signature.options["ci"] == method.lower()
    assert res.signature.options["resamples"] == "999"


def test_bootstrap_resamples_are_pair_draws_with_replacement():
    rng = np.random.default_rng(0)
    w = bootstrap_weights(rng, 50, 20)
    assert w.shape == (20, 50) and (w.sum(axis=1) == 50).all()
    idx = np.random.default_rng(0).integers(0, 50, size=(20, 50))
    assert (w == np.stack([np.bincount(r, minlength=50) for r in idx])).all()


def test_bootstrap_is_reproducible_and_seed_dependent():
    cache, _ = _f1_cache()
    a = bootstrap(cache, resamples=200, seed=1)
    b = bootstrap(cache, resamples=200, seed=1)
    c = bootstrap(cache, resamples=200, seed=2)
    assert a == b and a.get("f1").low != c.get("f1").low


def test_undefined_resamples_are_left_out_and_counted():
    # precision = tp / (tp + fp) is undefined in resamples that miss the single predicted positive
    values = np.zeros((30, 2))
    values[0] = [1, 0]

    def stat(s):
        with np.errstate(invalid="ignore", divide="ignore"):
            return (s[:, 0] / (s[:, 0] + s[:, 1]))[:, None]

    res = bootstrap(PairCache(values, stat, ("precision",)), resamples=500, seed=0, method="percentile")
    est = res.get("precision")
    assert 0 < est.n_defined < 500
    assert est.low == 1.0 and est.high == 1.0
    assert est.n_defined == pytest.approx(500 * (1 - (29 / 30) ** 30), abs=60)


def test_percentile_interval_ignores_nan_per_column():
    theta = np.array([[1.0, np.nan], [2.0, 5.0], [3.0, np.nan], [4.0, 7.0]])
    lo, hi = percentile_interval(theta, 0.5)
    assert lo.tolist() == pytest.approx([np.quantile([1, 2, 3, 4], 0.25), np.quantile([5, 7], 0.25)])
    assert hi.tolist() == pytest.approx([np.quantile([1, 2, 3, 4], 0.75), np.quantile([5, 7], 0.75)])


def test_bca_acceleration_matches_scipy_formula():
    # scipy's acceleration: sum(U^3) / (6 sum(U^2)^1.5) with U = (n-1)(mean - jackknife)
    rng = np.random.default_rng(2)
    x = rng.exponential(size=40)
    cache = PairCache(np.stack([x, np.ones_like(x)], 1), lambda s: (s[:, 0] / s[:, 1])[:, None], ("mean",))
    jack = cache.jackknife()
    u = 39 * (jack.mean() - jack[:, 0])
    _, _, accel = bca_interval(cache.estimate(), bootstrap_distribution(cache, 100, 0), jack)
    assert accel[0] == pytest.approx(np.sum(u**3) / (6 * np.sum(u**2) ** 1.5))
    theta_b = bootstrap_distribution(cache, 2000, 4)
    ref = sps.bootstrap(
        (x,), np.mean, n_resamples=0, method="BCa", bootstrap_result=SimpleNamespace(bootstrap_distribution=theta_b[:, 0])
    )
    lo, hi, _ = bca_interval(cache.estimate(), theta_b, jack)
    assert (lo[0], hi[0]) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), rel=1e-12)


def test_concat_caches_keeps_scores_apart():
    cache, _ = _f1_cache()
    both = concat_caches([cache, cache])
    assert both.names == ("f1", "precision", "f1", "precision")
    est = both.estimate()
    assert est[0] == est[2] and est[1] == est[3]


# ---------------------------------------------------------------------------- paired tests


def _mean_cache(x: np.ndarray) -> PairCache:
    return PairCache(np.stack([x, np.ones_like(x)], 1), lambda s: (s[:, 0] / s[:, 1])[:, None], ("mean",))


def _exhaustive_p(a: np.ndarray, b: np.ndarray) -> float:
    """Brute force: every within-pair swap pattern, |mean(A*) - mean(B*)| >= observed."""
    obs = abs(a.mean() - b.mean())
    hits = 0
    for mask in itertools.product((0, 1), repeat=len(a)):
        m = np.array(mask, dtype=bool)
        aa, bb = np.where(m, b, a), np.where(m, a, b)
        hits += abs(aa.mean() - bb.mean()) >= obs - 1e-12
    return hits / 2 ** len(a)


def test_exact_randomization_equals_exhaustive_permutation_and_scipy():
    a = np.array([3.0, 5.0, 2.0, 7.0, 6.0, 4.0, 8.0, 5.0, 6.0])
    b = np.array([2.0, 5.0, 1.0, 5.0, 6.0, 2.0, 6.0, 4.0, 3.0])
    ca, cb = _mean_cache(a), _mean_cache(b)
    null = randomization_differences(ca, cb, 0, 0, exact=True)
    assert null.shape == (2**9, 1)
    observed = ca.estimate() - cb.estimate()
    p = randomization_pvalues(observed, null, exact=True)[0]
    assert p == pytest.approx(_exhaustive_p(a, b))
    ref = sps.permutation_test(
        (a, b),
        lambda x, y, axis=-1: np.abs(np.mean(x, axis) - np.mean(y, axis)),
        permutation_type="samples",
        n_resamples=np.inf,
        alternative="greater",
        vectorized=True,
    )
    assert p == pytest.approx(ref.pvalue)


def test_approximate_randomization_converges_to_exact():
    a = np.array([3.0, 5.0, 2.0, 7.0, 6.0, 4.0, 8.0, 5.0, 6.0])
    b = np.array([2.0, 5.0, 1.0, 5.0, 6.0, 2.0, 6.0, 4.0, 3.0])
    ca, cb = _mean_cache(a), _mean_cache(b)
    null = randomization_differences(ca, cb, 20000, seed=3)
    p = randomization_pvalues(ca.estimate() - cb.estimate(), null)[0]
    assert p == pytest.approx(_exhaustive_p(a, b), abs=0.01)


def test_paired_tests_identical_systems_and_clear_difference():
    rng = np.random.default_rng(8)
    a = rng.integers(0, 2, 200).astype(float)
    same = paired_comparison(_mean_cache(a), _mean_cache(a.copy()), resamples=300, permutations=300, seed=0)
    t = same.get("mean")
    assert t.difference == 0.0 and t.p_randomization == 1.0 and t.p_bootstrap == 1.0
    better = np.where(rng.random(200) < 0.8, 1.0, a)
    diff = paired_comparison(_mean_cache(better), _mean_cache(a), resamples=500, permutations=500, seed=0)
    t = diff.get("mean")
    assert t.difference > 0.2 and t.p_randomization < 0.01 and t.p_bootstrap < 0.01
    assert t.low > 0 and t.high > t.low
    assert diff.signature.options["permutations"] == "500"


def test_paired_bootstrap_p_value_is_uniformish_under_the_null():
    # both systems drawn from the same distribution: p-values spread over (0, 1], not piled at 0
    ps = []
    for s in range(40):
        rng = np.random.default_rng(100 + s)
        x, y = rng.normal(size=60), rng.normal(size=60)
        res = paired_comparison(_mean_cache(x), _mean_cache(y), resamples=200, permutations=200, seed=s, method="percentile")
        ps.append(res.get("mean").p_randomization)
    ps = np.array(ps)
    assert 0.0 < (ps < 0.05).mean() <= 0.2 and np.median(ps) > 0.25
