"""Statistics that never re-run a judge: bootstrap CIs, paired tests, exact intervals, kappas.

Everything resamples *pairs* from cached per-pair statistics (:class:`PairCache`): row ``i`` of
``values`` holds pair ``i``'s additive contribution to every count a score needs (TP, FP, FN of
each entity, errors of the report, ...), and every score is a function of column sums. A
bootstrap resample is then a vector of multinomial weights (how often each pair was drawn), and
``weights @ values`` gives the resampled counts of *all* scores at once; chunks of resamples are
one matrix product. The jackknife that BCa needs is ``total - values`` (leave one pair out).

Conventions, shared with the rest of cxreval:
- An undefined score (zero denominator) is NaN in arrays and ``None`` in models. Intervals are
  computed over the resamples where the score is defined, and the number of those is reported.
- Percentile intervals use linear interpolation between order statistics (numpy's default, as
  ``scipy.stats.bootstrap``). BCa follows Efron & Tibshirani (1993) eqs. 14.14-14.15, exactly as
  ``scipy.stats.bootstrap(method='BCa')``: bias correction from the share of resamples below
  (ties counted half) the estimate, acceleration from the pair jackknife.
- Seeds are explicit (``numpy.random.default_rng(seed)``) and written into every signature.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import special
from scipy import stats as sps

from cxreval.scores.ratios import finite_or_none
from cxreval.scores.signature import Signature

CIMethod = Literal["percentile", "bca"]
StatFn = Callable[[np.ndarray], np.ndarray]
"""Maps column sums ``(R, F)`` to score values ``(R, K)``; NaN where a score is undefined."""

DEFAULT_CHUNK = 250
_TIE_TOL = 1e-12


def stat_signature(metric: str, base: Signature | None = None, **options: object) -> Signature:
    """``base`` (or a bare signature for stand-alone statistics) with ``metric`` and ``options`` added."""
    sig = base if base is not None else Signature(metric=metric, ontology="none", engine="none")
    merged = {**sig.options, **{k: str(v) for k, v in options.items()}}
    return sig.model_copy(update={"metric": metric, "options": merged})


# ------------------------------------------------------------------------------------------
# Exact binomial interval, McNemar, kappas
# ------------------------------------------------------------------------------------------


def clopper_pearson(k: np.ndarray | int, n: np.ndarray | int, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson ("exact") interval for ``k`` successes out of ``n``, vectorised.

    Beta quantiles: lower ``B(a/2; k, n-k+1)`` (0 when k = 0), upper ``B(1-a/2; k+1, n-k)`` (1 when
    k = n). NaN where n = 0.
    """
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k_arr > 0, sps.beta.ppf(alpha / 2, k_arr, n_arr - k_arr + 1), 0.0)
        hi = np.where(k_arr < n_arr, sps.beta.ppf(1 - alpha / 2, k_arr + 1, n_arr - k_arr), 1.0)
    bad = n_arr <= 0
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


class McNemarResult(BaseModel):
    """McNemar's test on the discordant pairs ``b`` (A right, B wrong) and ``c`` (A wrong, B right)."""

    model_config = ConfigDict(frozen=True)

    b: int
    c: int
    statistic: float
    p_value: float
    method: Literal["exact", "chi2"]
    correction: bool
    signature: Signature


def mcnemar(
    b: int,
    c: int,
    *,
    exact: bool = True,
    correction: bool = True,
    signature: Signature | None = None,
) -> McNemarResult:
    """McNemar's test for paired binary outcomes from the two discordant counts.

    ``exact``: two-sided binomial test of ``min(b, c)`` out of ``b + c`` at p = 1/2
    (statistic = ``min(b, c)``). Otherwise chi-square with 1 df on ``(|b - c| - 1)^2 / (b + c)``
    (Edwards' continuity correction, ``correction=True``) or ``(b - c)^2 / (b + c)``.
    With no discordant pair the p-value is 1.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    n = b + c
    if exact:
        stat = float(min(b, c))
        p = 1.0 if n == 0 else float(min(1.0, 2.0 * sps.binom.cdf(min(b, c), n, 0.5)))
    else:
        if n == 0:
            stat, p = 0.0, 1.0
        else:
            stat = (abs(b - c) - (1.0 if correction else 0.0)) ** 2 / n
            p = float(sps.chi2.sf(stat, 1))
    sig = stat_signature(
        "mcnemar", signature, test="exact" if exact else "chi2", correction=str(correction).lower() if not exact else "none"
    )
    return McNemarResult(
        b=b,
        c=c,
        statistic=stat,
        p_value=p,
        method="exact" if exact else "chi2",
        correction=correction and not exact,
        signature=sig,
    )


def mcnemar_paired(
    correct_a: Sequence[bool] | np.ndarray, correct_b: Sequence[bool] | np.ndarray, **kwargs: object
) -> McNemarResult:
    """McNemar's test from two aligned arrays of per-item outcomes (True = correct)."""
    a = np.asarray(correct_a, dtype=bool)
    bb = np.asarray(correct_b, dtype=bool)
    if a.shape != bb.shape:
        raise ValueError(f"outcome arrays differ in shape: {a.shape} vs {bb.shape}")
    return mcnemar(int(np.sum(a & ~bb)), int(np.sum(~a & bb)), **kwargs)  # type: ignore[arg-type]


class KappaResult(BaseModel):
    """Chance-corrected agreement: ``(observed - expected) / (1 - expected)``; None if undefined."""

    model_config = ConfigDict(frozen=True)

    kappa: float | None
    observed: float | None
    expected: float | None
    n_items: int
    n_raters: int
    method: Literal["cohen", "fleiss"]
    signature: Signature


def cohens_kappa_table(table: np.ndarray) -> tuple[float, float, float]:
    """Cohen's kappa of a square contingency table (rows rater 1, columns rater 2).

    Returns ``(kappa, p_observed, p_expected)``; kappa is NaN when ``p_expected == 1``.
    """
    t = np.asarray(table, dtype=float)
    n = t.sum()
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise ValueError("Cohen's kappa needs a square table")
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    po = float(np.trace(t) / n)
    pe = float(t.sum(axis=0) @ t.sum(axis=1) / n**2)
    kappa = (po - pe) / (1.0 - pe) if pe < 1.0 else float("nan")
    return kappa, po, pe


def cohens_kappa(
    a: Sequence[object] | np.ndarray, b: Sequence[object] | np.ndarray, *, signature: Signature | None = None
) -> KappaResult:
    """Cohen's kappa between two raters' labels of the same items; items missing (NaN/None) in
    either are left out."""
    xa, xb = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    if xa.shape != xb.shape:
        raise ValueError(f"rating arrays differ in shape: {xa.shape} vs {xb.shape}")
    keep = np.array([not _missing(u) and not _missing(v) for u, v in zip(xa, xb)], dtype=bool)
    xa, xb = xa[keep], xb[keep]
    cats = sorted(set(xa.tolist()) | set(xb.tolist()), key=str)
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)))
    for u, v in zip(xa, xb):
        table[index[u], index[v]] += 1
    kappa, po, pe = cohens_kappa_table(table) if cats else (np.nan, np.nan, np.nan)
    return KappaResult(
        kappa=finite_or_none(kappa),
        observed=finite_or_none(po),
        expected=finite_or_none(pe),
        n_items=int(keep.sum()),
        n_raters=2,
        method="cohen",
        signature=stat_signature("cohen-kappa", signature),
    )


def _missing(x: object) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def fleiss_kappa_counts(counts: np.ndarray) -> tuple[float, float, float]:
    """Fleiss' kappa from a subjects x categories table of how many raters chose each category.

    Every subject must have the same number of raters (Fleiss 1971). Returns
    ``(kappa, P_bar, P_e)``.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0:
        return float("nan"), float("nan"), float("nan")
    m = c.sum(axis=1)
    if not np.all(m == m[0]) or m[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of raters for every subject")
    raters = m[0]
    p_j = c.sum(axis=0) / c.sum()
    p_i = (np.sum(c * c, axis=1) - raters) / (raters * (raters - 1))
    p_bar = float(p_i.mean())
    p_e = float(np.sum(p_j**2))
    kappa = (p_bar - p_e) / (1.0 - p_e) if p_e < 1.0 else float("nan")
    return kappa, p_bar, p_e


def fleiss_kappa(ratings: np.ndarray | Sequence[Sequence[object]], *, signature: Signature | None = None) -> KappaResult:
    """Fleiss' kappa from an items x raters array of category labels (numbers or strings); items
    with a missing rating (NaN / None) are left out, so every remaining item has all raters."""
    counts, n_raters = _category_counts(ratings)
    kappa, p_bar, p_e = fleiss_kappa_counts(counts) if len(counts) else (np.nan, np.nan, np.nan)
    return KappaResult(
        kappa=finite_or_none(kappa),
        observed=finite_or_none(p_bar),
        expected=finite_or_none(p_e),
        n_items=len(counts),
        n_raters=n_raters,
        method="fleiss",
        signature=stat_signature("fleiss-kappa", signature),
    )


def _category_counts(ratings: np.ndarray | Sequence[Sequence[object]]) -> tuple[np.ndarray, int]:
    """Items x raters labels -> (complete items x categories counts, raters); categories sorted
    (numerically for numbers, by ``str`` for other labels)."""
    try:
        r = np.asarray(ratings, dtype=float)
    except (TypeError, ValueError):  # labels that are not numbers, or ragged items
        r = np.asarray(ratings, dtype=object)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError("Fleiss' kappa needs an items x raters array with >= 2 raters")
    if r.dtype != object:
        r = r[~np.isnan(r).any(axis=1)]
        return (r[:, :, None] == np.unique(r)[None, None, :]).sum(axis=1), r.shape[1]
    rows = [row for row in r.tolist() if not any(_missing(v) for v in row)]
    index = {c: i for i, c in enumerate(sorted({v for row in rows for v in row}, key=str))}
    counts = np.zeros((len(rows), len(index)))
    for i, row in enumerate(rows):
        for v in row:
            counts[i, index[v]] += 1
    return counts, r.shape[1]


# ------------------------------------------------------------------------------------------
# Cached per-pair statistics and the bootstrap engine
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairCache:
    """Per-pair additive statistics and the scores that are functions of their column sums.

    ``values``: ``(n_pairs, n_features)``; ``statistic``: sums ``(R, n_features)`` ->
    ``(R, len(names))``. Build once from the judgement table; every resample reuses it.
    """

    values: np.ndarray
    statistic: StatFn
    names: tuple[str, ...]

    @property
    def n_pairs(self) -> int:
        return int(self.values.shape[0])

    def estimate(self) -> np.ndarray:
        """Scores on the full sample, ``(K,)``."""
        return self.statistic(self.values.sum(axis=0, keepdims=True))[0]

    def jackknife(self) -> np.ndarray:
        """Leave-one-pair-out scores ``(n_pairs, K)``: the statistic of ``total - values[i]``."""
        return self.statistic(self.values.sum(axis=0, keepdims=True) - self.values)

    def weighted(self, weights: np.ndarray) -> np.ndarray:
        """Scores under pair weights ``(R, n_pairs)`` -> ``(R, K)``."""
        return self.statistic(weights @ self.values)


def concat_caches(caches: Sequence[PairCache]) -> PairCache:
    """One cache holding several caches' features side by side (same pairs, same order)."""
    if not caches:
        raise ValueError("nothing to concatenate")
    n = caches[0].n_pairs
    if any(c.n_pairs != n for c in caches):
        raise ValueError("caches cover different numbers of pairs")
    widths = np.cumsum([0] + [c.values.shape[1] for c in caches])
    parts = list(caches)

    def statistic(sums: np.ndarray) -> np.ndarray:
        return np.concatenate([c.statistic(sums[:, widths[i] : widths[i + 1]]) for i, c in enumerate(parts)], axis=1)

    names = tuple(name for c in caches for name in c.names)
    return PairCache(np.concatenate([c.values for c in caches], axis=1), statistic, names)


def difference_cache(a: PairCache, b: PairCache) -> PairCache:
    """Cache whose scores are ``score(A) - score(B)``, pairs aligned (same references)."""
    if a.n_pairs != b.n_pairs or a.names != b.names:
        raise ValueError("the two systems must be scored on the same pairs with the same scores")
    width = a.values.shape[1]

    def statistic(sums: np.ndarray) -> np.ndarray:
        return a.statistic(sums[:, :width]) - b.statistic(sums[:, width:])

    return PairCache(np.concatenate([a.values, b.values], axis=1), statistic, a.names)


def bootstrap_weights(rng: np.random.Generator, n_pairs: int, size: int) -> np.ndarray:
    """Multinomial pair weights ``(size, n_pairs)``: how often each pair is drawn in a resample of
    ``n_pairs`` pairs with replacement (the same draws as indexing with ``rng.integers``)."""
    idx = rng.integers(0, n_pairs, size=(size, n_pairs))
    return weights_from_indices(idx, n_pairs)


def weights_from_indices(idx: np.ndarray, n_pairs: int) -> np.ndarray:
    """Counts of each pair index per row of ``idx`` ``(R, m)`` -> ``(R, n_pairs)`` float."""
    size = idx.shape[0]
    flat = (idx + (np.arange(size)[:, None] * n_pairs)).ravel()
    return np.bincount(flat, minlength=size * n_pairs).reshape(size, n_pairs).astype(float)


def _matmul_values(values: np.ndarray) -> tuple[np.ndarray, type]:
    """float32 when every weighted sum is an integer below 2**24 (exact, twice as fast), else float64."""
    v = np.asarray(values)
    bound = len(v) * (float(np.abs(v).max()) if v.size else 0.0)
    if bound < 2**24 and np.array_equal(v, np.round(v)):
        return v.astype(np.float32), np.float32
    return v.astype(float), np.float64


def bootstrap_distribution(cache: PairCache, resamples: int, seed: int, chunk: int = DEFAULT_CHUNK) -> np.ndarray:
    """Scores of ``resamples`` pair resamples, ``(resamples, K)``, computed in chunks."""
    rng = np.random.default_rng(seed)
    out = []
    values, dtype = _matmul_values(cache.values)
    for start in range(0, resamples, chunk):
        w: np.ndarray = bootstrap_weights(rng, cache.n_pairs, min(chunk, resamples - start)).astype(dtype)
        out.append(cache.statistic((w @ values).astype(float)))
    return np.concatenate(out, axis=0) if out else np.empty((0, len(cache.names)))


def _row_quantiles(theta_b: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-column linear-interpolation quantile of the defined values: ``theta_b (R, K)``,
    ``q (K,)`` -> ``(K,)``; NaN where a column has no defined value or q is NaN."""
    srt = np.sort(theta_b, axis=0)  # NaN sorts last
    n_def = np.sum(~np.isnan(theta_b), axis=0)
    out = np.full(q.shape, np.nan)
    ok = (n_def > 0) & ~np.isnan(q)
    h = (n_def[ok] - 1) * q[ok]
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, n_def[ok] - 1)
    cols = np.flatnonzero(ok)
    frac = h - lo
    out[ok] = srt[lo, cols] + frac * (srt[hi, cols] - srt[lo, cols])
    return out


def percentile_interval(theta_b: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of ``theta_b (R, K)``, over defined resamples."""
    alpha = (1 - confidence) / 2
    k = theta_b.shape[1]
    return _row_quantiles(theta_b, np.full(k, alpha)), _row_quantiles(theta_b, np.full(k, 1 - alpha))


def bca_interval(
    theta_hat: np.ndarray, theta_b: np.ndarray, theta_jack: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BCa interval per column; returns ``(low, high, acceleration)``.

    ``theta_hat (K,)`` full-sample scores, ``theta_b (R, K)`` bootstrap scores, ``theta_jack
    (n, K)`` leave-one-out scores. Undefined resamples and jackknife values are left out. The
    acceleration is 0 where the jackknife does not vary; the interval is NaN where the bias
    correction is infinite (every defined resample on one side of the estimate).
    """
    alpha = (1 - confidence) / 2
    defined = ~np.isnan(theta_b)
    n_def = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        below = np.sum(np.where(defined, theta_b < theta_hat, False), axis=0)
        at_or_below = np.sum(np.where(defined, theta_b <= theta_hat, False), axis=0)
        z0 = special.ndtri((below + at_or_below) / (2.0 * n_def))
        jdef = ~np.isnan(theta_jack)
        mean_j = np.where(jdef, theta_jack, 0.0).sum(axis=0) / jdef.sum(axis=0)
        d = mean_j - theta_jack
        num = np.nansum(d**3, axis=0)
        den = np.nansum(d**2, axis=0)
        accel = np.where(den > 0, num / (6.0 * den**1.5), 0.0)
        z_a = special.ndtri(alpha)
        n1 = z0 + z_a
        n2 = z0 - z_a
        a1 = special.ndtr(z0 + n1 / (1 - accel * n1))
        a2 = special.ndtr(z0 + n2 / (1 - accel * n2))
    bad = np.isnan(theta_hat) | ~np.isfinite(z0)
    a1 = np.where(bad, np.nan, a1)
    a2 = np.where(bad, np.nan, a2)
    return _row_quantiles(theta_b, a1), _row_quantiles(theta_b, a2), accel


# ------------------------------------------------------------------------------------------
# Result models
# ------------------------------------------------------------------------------------------


class Estimate(BaseModel):
    """One score with its bootstrap interval; None where undefined."""

    model_config = ConfigDict(frozen=True)

    name: str
    estimate: float | None
    low: float | None
    high: float | None
    std_error: float | None
    n_defined: int
    """Resamples in which the score was defined (the interval uses only these)."""


class BootstrapResult(BaseModel):
    """Bootstrap intervals of many scores from one set of resamples."""

    model_config = ConfigDict(frozen=True)

    estimates: list[Estimate]
    n_pairs: int
    resamples: int
    seed: int
    method: CIMethod
    confidence: float
    signature: Signature

    def get(self, name: str) -> Estimate:
        for e in self.estimates:
            if e.name == name:
                return e
        raise KeyError(f"no score named {name!r}")


class PairedTest(BaseModel):
    """Difference ``A - B`` of one score, its bootstrap interval and p-values."""

    model_config = ConfigDict(frozen=True)

    name: str
    a: float | None
    b: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_bootstrap: float | None
    p_randomization: float | None
    n_defined: int


class PairedComparison(BaseModel):
    """Paired bootstrap and approximate-randomisation tests of two systems on the same pairs."""

    model_config = ConfigDict(frozen=True)

    tests: list[PairedTest]
    n_pairs: int
    resamples: int
    permutations: int
    seed: int
    method: CIMethod
    confidence: float
    signature: Signature

    def get(self, name: str) -> PairedTest:
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(f"no score named {name!r}")


def _interval_signature(
    metric: str, base: Signature | None, resamples: int, seed: int, method: str, confidence: float, **options: object
) -> Signature:
    return stat_signature(metric, base, **options).with_intervals(
        method=method, resamples=resamples, seed=seed, confidence=confidence
    )


def _estimates(cache: PairCache, theta_b: np.ndarray, method: CIMethod, confidence: float) -> list[Estimate]:
    """Point estimates, intervals, standard errors and defined counts of every score."""
    theta_hat = cache.estimate()
    if method == "bca":
        low, high, _ = bca_interval(theta_hat, theta_b, cache.jackknife(), confidence)
    elif method == "percentile":
        low, high = percentile_interval(theta_b, confidence)
    else:
        raise ValueError(f"unknown CI method {method!r}; use 'percentile' or 'bca'")
    n_def = np.sum(~np.isnan(theta_b), axis=0)
    se = np.full(theta_hat.shape, np.nan)
    many = n_def > 1
    if many.any():
        se[many] = np.nanstd(theta_b[:, many], axis=0, ddof=1)
    return [
        Estimate(
            name=name,
            estimate=finite_or_none(theta_hat[i]),
            low=finite_or_none(low[i]),
            high=finite_or_none(high[i]),
            std_error=finite_or_none(se[i]),
            n_defined=int(n_def[i]),
        )
        for i, name in enumerate(cache.names)
    ]


def bootstrap(
    cache: PairCache,
    *,
    resamples: int = 1000,
    seed: int = 0,
    method: CIMethod = "bca",
    confidence: float = 0.95,
    signature: Signature | None = None,
    chunk: int = DEFAULT_CHUNK,
) -> BootstrapResult:
    """Bootstrap confidence intervals of every score in ``cache`` by resampling pairs."""
    theta_b = bootstrap_distribution(cache, resamples, seed, chunk)
    sig = _interval_signature(signature.metric if signature else "bootstrap", signature, resamples, seed, method, confidence)
    return BootstrapResult(
        estimates=_estimates(cache, theta_b, method, confidence),
        n_pairs=cache.n_pairs,
        resamples=resamples,
        seed=seed,
        method=method,
        confidence=confidence,
        signature=sig,
    )


def randomization_differences(
    a: PairCache, b: PairCache, permutations: int, seed: int, *, exact: bool = False, chunk: int = DEFAULT_CHUNK
) -> np.ndarray:
    """``score(A*) - score(B*)`` under random swaps of the two systems' outputs within each pair.

    Swapping pair ``i`` moves ``D_i = A_i - B_i`` from A's sums to B's, so a chunk of swap masks
    ``S`` gives ``A* = sum(A) - S @ D`` and ``B* = sum(B) + S @ D``. ``exact`` enumerates all
    ``2**n`` swap patterns instead (tiny samples only).
    """
    diff = a.values.astype(float) - b.values.astype(float)
    sum_a = a.values.sum(axis=0, keepdims=True).astype(float)
    sum_b = b.values.sum(axis=0, keepdims=True).astype(float)
    n = a.n_pairs
    out = []
    chunks: Iterable[np.ndarray]
    if exact:
        if n > 20:
            raise ValueError(f"exact enumeration of 2**{n} swap patterns is too large; use permutations")
        masks = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
        chunks = [masks[i : i + 4096] for i in range(0, len(masks), 4096)]
    else:
        rng = np.random.default_rng(seed)
        chunks = (rng.integers(0, 2, size=(min(chunk, permutations - s), n)).astype(float) for s in range(0, permutations, chunk))
    for s in chunks:
        moved = s @ diff
        out.append(a.statistic(sum_a - moved) - b.statistic(sum_b + moved))
    return np.concatenate(out, axis=0) if out else np.empty((0, len(a.names)))


def randomization_pvalues(observed: np.ndarray, null: np.ndarray, *, exact: bool = False) -> np.ndarray:
    """Two-sided p-values ``P(|d*| >= |d|)`` over defined null values.

    Monte Carlo: ``(1 + hits) / (1 + R)`` (never 0; Davison & Hinkley); exact enumeration:
    ``hits / 2**n`` (the identity pattern is among them). NaN where the observed difference is
    undefined. A relative tolerance of 1e-12 counts floating-point ties as ties.
    """
    obs = np.abs(observed)
    defined = ~np.isnan(null)
    tol = _TIE_TOL * np.maximum(1.0, obs)
    hits = np.sum(defined & (np.abs(np.where(defined, null, 0.0)) >= obs - tol), axis=0)
    total = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = hits / total if exact else (1.0 + hits) / (1.0 + total)
    return np.where(np.isnan(observed) | (total == 0), np.nan, p)


def bootstrap_pvalues(observed: np.ndarray, theta_b: np.ndarray) -> np.ndarray:
    """Two-sided paired-bootstrap p-values: the bootstrap distribution of the difference is
    shifted to mean zero (the null) and ``P(|d* - d| >= |d|)`` is counted as
    ``(1 + hits) / (1 + R)`` over defined resamples (Efron & Tibshirani 1993, 16.4)."""
    return randomization_pvalues(observed, theta_b - observed, exact=False)


def paired_comparison(
    a: PairCache,
    b: PairCache,
    *,
    resamples: int = 1000,
    permutations: int = 1000,
    seed: int = 0,
    method: CIMethod = "bca",
    confidence: float = 0.95,
    signature: Signature | None = None,
) -> PairedComparison:
    """Paired bootstrap (CI and p of ``A - B``) and approximate randomisation for every score.

    Both systems must be scored on the same pairs (same references, same order): the bootstrap
    draws the same pairs for both, and randomisation swaps the two outputs within a pair.
    """
    delta = difference_cache(a, b)
    theta_b = bootstrap_distribution(delta, resamples, seed)
    estimates = _estimates(delta, theta_b, method, confidence)
    observed = delta.estimate()
    p_boot = bootstrap_pvalues(observed, theta_b)
    null = randomization_differences(a, b, permutations, seed)
    p_rand = randomization_pvalues(observed, null)
    est_a, est_b = a.estimate(), b.estimate()
    tests = [
        PairedTest(
            name=e.name,
            a=finite_or_none(est_a[i]),
            b=finite_or_none(est_b[i]),
            difference=e.estimate,
            low=e.low,
            high=e.high,
            p_bootstrap=finite_or_none(p_boot[i]),
            p_randomization=finite_or_none(p_rand[i]),
            n_defined=e.n_defined,
        )
        for i, e in enumerate(estimates)
    ]
    sig = _interval_signature(
        signature.metric if signature else "paired-comparison",
        signature,
        resamples,
        seed,
        method,
        confidence,
        permutations=permutations,
    )
    return PairedComparison(
        tests=tests,
        n_pairs=a.n_pairs,
        resamples=resamples,
        permutations=permutations,
        seed=seed,
        method=method,
        confidence=confidence,
        signature=sig,
    )
