"""Human alignment: how a metric's report-level score ranks pairs against radiologists' error counts.

Two input layouts:

- **plain CSV**: ``id, reference, candidate, rater_1 .. rater_k`` (each rater's error count for the
  pair), optionally with per-category counts ``rater_<i>_<category>``. When only category columns
  are given, a rater's total is the sum of its categories.
- **ReXVal** (PhysioNet, credentialed: users bring their own copy, cxreval never ships it):
  ``50_samples_gt_and_candidates.csv`` (one row per study: ``study_id``, ``gt_report`` and one
  column per candidate type, ``radgraph``, ``bertscore``, ``s_emb``, ``bleu``; a long layout with
  ``candidate_type`` + ``report`` columns is read too) and
  ``6_valid_raters_per_rater_error_categories.csv`` (one row per study x candidate type x rater x
  error category x significance: ``study_number``, ``candidate_type``, ``rater_index``,
  ``error_category``, ``clinically_significant``, ``num_errors``). Every column name is configurable.

Alignment (SPEC-CXR, ReXVal protocol): Kendall's tau-b (``scipy.stats.kendalltau``, variant
``b``, ties corrected) and Spearman's rho between the metric and the **mean** rater error count.
Scores are oriented so that **higher = more errors**: a metric whose ``higher_is_better`` is true
(BLEU, BERTScore) is negated before correlating, so a well-aligned metric always has a positive tau.
The CI is a percentile bootstrap over pairs; stochastic (LLM) metrics are run ``runs`` times and
reported as mean +- sd of tau.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as sps

from cxreval.metrics.base import ReportMetric

TOTAL = "total"


class HumanRatings(BaseModel):
    """Pairs with each rater's error count, per category (``total`` always present)."""

    model_config = ConfigDict(frozen=True)

    ids: list[str]
    references: list[str]
    candidates: list[str]
    raters: list[str]
    counts: dict[str, list[list[float]]] = Field(
        description="category -> [pair][rater] error counts; NaN where a rater gave none")
    source: str = ""

    def mean(self, category: str = TOTAL) -> np.ndarray:
        """Mean error count over raters, one value per pair."""
        arr = np.asarray(self.counts[category], dtype=float)
        with np.errstate(invalid="ignore"):
            return np.nanmean(arr, axis=1)

    @property
    def categories(self) -> list[str]:
        return [TOTAL] + sorted(c for c in self.counts if c != TOTAL)


class RatingsFormatError(ValueError):
    """A ratings file that cannot be read as documented; the message names the file and column."""


# ------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _num(value: str, where: str) -> float:
    v = (value or "").strip()
    if not v:
        return float("nan")
    try:
        return float(v)
    except ValueError:
        raise RatingsFormatError(f"{where}: {value!r} is not a number") from None


def read_plain_ratings(
    path: str | Path,
    *,
    id_col: str = "id",
    reference_col: str = "reference",
    candidate_col: str = "candidate",
    rater_prefix: str = "rater_",
) -> HumanRatings:
    """Read ``id, reference, candidate, rater_1..rater_k[, rater_i_<category>]``."""
    p = Path(path)
    fields, rows = _read_rows(p)
    for col in (id_col, reference_col, candidate_col):
        if col not in fields:
            raise RatingsFormatError(f"{p}: no column {col!r} (columns: {', '.join(fields)})")
    pat = re.compile(rf"^{re.escape(rater_prefix)}(\d+)(?:_(.+))?$")
    totals: dict[str, str] = {}
    cats: dict[str, dict[str, str]] = defaultdict(dict)
    for f in fields:
        m = pat.match(f)
        if m:
            if m.group(2):
                cats[m.group(2)][m.group(1)] = f
            else:
                totals[m.group(1)] = f
    raters = sorted(set(totals) | {r for c in cats.values() for r in c}, key=int)
    if not raters:
        raise RatingsFormatError(f"{p}: no rater columns ({rater_prefix}1, {rater_prefix}2, ...)")
    counts: dict[str, list[list[float]]] = {TOTAL: []}
    for c in cats:
        counts[c] = []
    ids, refs, cands = [], [], []
    for i, row in enumerate(rows, start=2):
        ids.append(row[id_col])
        refs.append(row[reference_col])
        cands.append(row[candidate_col])
        for c, cols in cats.items():
            counts[c].append([_num(row[cols[r]], f"{p}:{i}:{cols[r]}") if r in cols else float("nan")
                              for r in raters])
        total = []
        for r in raters:
            if r in totals:
                total.append(_num(row[totals[r]], f"{p}:{i}:{totals[r]}"))
            else:
                parts = [counts[c][-1][raters.index(r)] for c in cats if r in cats[c]]
                total.append(float(np.nansum(parts)) if parts else float("nan"))
        counts[TOTAL].append(total)
    if len(set(ids)) != len(ids):
        raise RatingsFormatError(f"{p}: duplicate ids")
    return HumanRatings(ids=ids, references=refs, candidates=cands, raters=raters, counts=counts, source=str(p))


class RexvalColumns(BaseModel):
    """Column names of the two ReXVal files (defaults: the PhysioNet release)."""

    study_id: str = "study_id"
    reference: str = "gt_report"
    candidate_types: tuple[str, ...] = ("radgraph", "bertscore", "s_emb", "bleu")
    long_candidate_type: str = "candidate_type"
    long_report: str = "report"
    study_number: str = "study_number"
    rating_candidate_type: str = "candidate_type"
    rater: str = "rater_index"
    category: str = "error_category"
    significant: str = "clinically_significant"
    count: str = "num_errors"


def _truthy(value: str) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes", "y", "t")


def read_rexval(
    reports_csv: str | Path,
    ratings_csv: str | Path,
    *,
    columns: RexvalColumns | None = None,
    significance: str = "all",
) -> HumanRatings:
    """Read ReXVal's two files into pairs ``<study>:<candidate_type>`` with per-rater counts.

    ``significance``: ``all`` (every error), ``significant`` or ``insignificant`` (only errors
    the rater marked so). Categories are ``<error_category>`` counts under the same filter.
    ``study_number`` is matched to ``study_id`` when the values agree, else to the row position
    (1-based when the numbers run 1..n, 0-based when 0..n-1).
    """
    cols = columns or RexvalColumns()
    if significance not in ("all", "significant", "insignificant"):
        raise ValueError("significance must be all, significant or insignificant")
    rp, gp = Path(reports_csv), Path(ratings_csv)
    fields, rows = _read_rows(rp)
    if cols.reference not in fields:
        raise RatingsFormatError(f"{rp}: no column {cols.reference!r} (columns: {', '.join(fields)})")
    pairs: dict[tuple[str, str], tuple[str, str]] = {}
    study_keys: list[str] = []
    if cols.long_candidate_type in fields and cols.long_report in fields:
        for i, row in enumerate(rows):
            sid = row.get(cols.study_id, str(i))
            if sid not in study_keys:
                study_keys.append(sid)
            pairs[(sid, row[cols.long_candidate_type])] = (row[cols.reference], row[cols.long_report])
    else:
        present = [c for c in cols.candidate_types if c in fields]
        if not present:
            raise RatingsFormatError(f"{rp}: none of the candidate columns {list(cols.candidate_types)}")
        for i, row in enumerate(rows):
            sid = row.get(cols.study_id, str(i))
            study_keys.append(sid)
            for c in present:
                pairs[(sid, c)] = (row[cols.reference], row[c])
    gfields, grows = _read_rows(gp)
    need = [cols.study_number, cols.rating_candidate_type, cols.rater, cols.count]
    for c in need:
        if c not in gfields:
            raise RatingsFormatError(f"{gp}: no column {c!r} (columns: {', '.join(gfields)})")
    numbers = [r[cols.study_number] for r in grows]
    to_study = _study_mapper(numbers, study_keys, gp)
    raters: list[str] = sorted({r[cols.rater] for r in grows}, key=_natural)
    acc: dict[str, dict[tuple[str, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    rated_by: dict[tuple[str, str], set[str]] = defaultdict(set)  # who rated a pair (before filtering)
    for i, r in enumerate(grows, start=2):
        key = (to_study(r[cols.study_number]), r[cols.rating_candidate_type])
        if key not in pairs:
            raise RatingsFormatError(f"{gp}:{i}: no report for study {key[0]!r}, candidate {key[1]!r}")
        rated_by[key].add(r[cols.rater])
        if significance != "all" and cols.significant in r:
            if _truthy(r[cols.significant]) != (significance == "significant"):
                continue
        n = _num(r[cols.count], f"{gp}:{i}:{cols.count}")
        rater = r[cols.rater]
        for cat in (TOTAL, r.get(cols.category, "") or None):
            if cat:
                acc[cat][key][rater] = acc[cat][key].get(rater, 0.0) + n
    rated = [k for k in pairs if k in rated_by] or list(pairs)
    rated_raters = {k: rated_by.get(k, set()) for k in rated}
    counts = {
        cat: [[acc[cat].get(k, {}).get(rt, 0.0 if rt in rated_raters[k] else float("nan")) for rt in raters]
              for k in rated]
        for cat in ([TOTAL] + sorted(c for c in acc if c != TOTAL))
    }
    return HumanRatings(
        ids=[f"{s}:{c}" for s, c in rated], references=[pairs[k][0] for k in rated],
        candidates=[pairs[k][1] for k in rated], raters=raters, counts=counts, source=f"{rp} + {gp}",
    )


def _natural(value: str) -> tuple[int, str]:
    return (int(value), "") if value.strip().lstrip("-").isdigit() else (10**9, value)


def _study_mapper(numbers: Sequence[str], study_keys: Sequence[str], where: Path) -> Callable[[str], str]:
    keys = set(study_keys)
    if set(numbers) <= keys:
        return lambda n: n
    try:
        ints = sorted({int(float(n)) for n in numbers})
    except ValueError:
        raise RatingsFormatError(f"{where}: study numbers match neither study ids nor row positions") from None
    base = 1 if ints and ints[0] >= 1 and ints[-1] == len(study_keys) else 0
    if ints and (ints[0] < base or ints[-1] - base >= len(study_keys)):
        raise RatingsFormatError(f"{where}: study numbers {ints[0]}..{ints[-1]} outside the {len(study_keys)} studies")
    return lambda n: study_keys[int(float(n)) - base]


# ------------------------------------------------------------------------------------------
# Alignment
# ------------------------------------------------------------------------------------------


class Correlation(BaseModel):
    """Kendall tau-b and Spearman rho of one category, with a bootstrap CI for tau."""

    model_config = ConfigDict(frozen=True)

    category: str
    n: int
    tau_b: float | None
    tau_b_p: float | None
    tau_b_ci: tuple[float | None, float | None]
    spearman: float | None
    tau_b_runs: list[float] = []
    tau_b_mean: float | None = None
    tau_b_sd: float | None = None
    spearman_mean: float | None = None
    spearman_sd: float | None = None


class Alignment(BaseModel):
    """A metric's alignment with the raters, per category."""

    model_config = ConfigDict(frozen=True)

    metric: str
    signature: str
    higher_is_better: bool
    oriented: str = "higher = more errors (scores of higher-is-better metrics negated)"
    runs: int
    resamples: int
    seed: int
    source: str
    correlations: list[Correlation]


def _f(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b and its p-value (scipy, ties corrected); NaN pairs dropped."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    res = sps.kendalltau(x[ok], y[ok], variant="b")
    return float(res.statistic), float(res.pvalue)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    return float(sps.spearmanr(x[ok], y[ok]).statistic)


def bootstrap_tau_b(x: np.ndarray, y: np.ndarray, *, resamples: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of tau-b, resampling pairs (resamples with undefined tau skipped)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2 or resamples < 1:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(resamples):
        idx = rng.integers(0, len(x), len(x))
        t = sps.kendalltau(x[idx], y[idx], variant="b").statistic
        if np.isfinite(t):
            taus.append(t)
    if not taus:
        return float("nan"), float("nan")
    a = (1 - confidence) / 2
    return float(np.quantile(taus, a)), float(np.quantile(taus, 1 - a))


def oriented(scores: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Scores with higher = more errors (negated for higher-is-better metrics)."""
    s = np.asarray(scores, dtype=float)
    return -s if higher_is_better else s


def align_scores(
    runs: Sequence[np.ndarray],
    ratings: HumanRatings,
    *,
    higher_is_better: bool,
    metric: str = "metric",
    signature: str = "",
    categories: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Alignment:
    """Alignment of precomputed scores (one array per run, pairs in ``ratings`` order)."""
    if not runs:
        raise ValueError("no runs")
    n = len(ratings.ids)
    for r in runs:
        if len(r) != n:
            raise ValueError(f"{len(r)} scores for {n} rated pairs")
    out = []
    for cat in categories or ratings.categories:
        human = ratings.mean(cat)
        taus, rhos = [], []
        for r in runs:
            s = oriented(r, higher_is_better)
            taus.append(kendall_tau_b(s, human))
            rhos.append(spearman(s, human))
        first = oriented(runs[0], higher_is_better)
        lo, hi = bootstrap_tau_b(first, human, resamples=resamples, seed=seed)
        t = np.array([t for t, _ in taus])
        rho = np.array(rhos)
        out.append(Correlation(
            category=cat, n=int(np.sum(np.isfinite(first) & np.isfinite(human))),
            tau_b=_f(taus[0][0]), tau_b_p=_f(taus[0][1]), tau_b_ci=(_f(lo), _f(hi)), spearman=_f(rhos[0]),
            tau_b_runs=[float(v) for v in t], tau_b_mean=_f(np.nanmean(t)) if np.isfinite(t).any() else None,
            tau_b_sd=_f(np.nanstd(t, ddof=1)) if np.isfinite(t).sum() > 1 else None,
            spearman_mean=_f(np.nanmean(rho)) if np.isfinite(rho).any() else None,
            spearman_sd=_f(np.nanstd(rho, ddof=1)) if np.isfinite(rho).sum() > 1 else None,
        ))
    return Alignment(metric=metric, signature=signature, higher_is_better=higher_is_better, runs=len(runs),
                     resamples=resamples, seed=seed, source=ratings.source, correlations=out)


def human_alignment(
    metric: ReportMetric,
    ratings: HumanRatings,
    *,
    runs: int = 1,
    categories: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Alignment:
    """Score the rated pairs with ``metric`` (``runs`` times) and correlate with the raters.

    Repeated runs only differ for stochastic metrics; an LLM metric must give each run its own
    cache keys (e.g. ``run=i`` options) or the runs repeat the first answer.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    scores = []
    for i in range(runs):
        scorer = getattr(metric, "score_pairs_run", None)
        if scorer is not None:
            scores.append(np.asarray(scorer(ratings.references, ratings.candidates, run=i), dtype=float))
        else:
            scores.append(np.asarray(metric.score_pairs(ratings.references, ratings.candidates), dtype=float))
    return align_scores(scores, ratings, higher_is_better=metric.higher_is_better, metric=metric.name,
                        signature=str(metric.signature), categories=categories, resamples=resamples, seed=seed)
