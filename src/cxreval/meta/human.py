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

Files are read with :func:`cxreval.io.load_table`: CSV (also for a suffix cxreval does not know),
or TSV, JSONL, a JSON list or Parquet by suffix. A bad file raises :class:`RatingsFormatError`
(an :class:`~cxreval.io.InputError`) listing every problem with its file, line and field: a
missing column, an empty report, an id given twice, a count that is not a number, ...

Alignment (SPEC-CXR, ReXVal protocol): Kendall's tau-b (``scipy.stats.kendalltau``, variant
``b``, ties corrected) and Spearman's rho between the metric and the **mean** rater error count.
Scores are oriented so that **higher = more errors**: a metric whose ``higher_is_better`` is true
(BLEU, BERTScore) is negated before correlating, so a well-aligned metric always has a positive tau.
The CI is a percentile bootstrap over pairs; stochastic (LLM) metrics are run ``runs`` times and
reported as mean +- sd of tau.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as sps

from cxreval.io import (
    InputError,
    InputProblem,
    Record,
    RecordTable,
    Uniqueness,
    bool_value,
    check_columns,
    load_table,
    load_whole_table,
    number_value,
    raise_problems,
    record_id,
    require_records,
    table_format,
    text_value,
)
from cxreval.metrics.base import ReportMetric
from cxreval.scores.ratios import finite_or_none

TOTAL = "total"


class HumanRatings(BaseModel):
    """Pairs with each rater's error count, per category (``total`` always present)."""

    model_config = ConfigDict(frozen=True)

    ids: list[str]
    references: list[str]
    candidates: list[str]
    raters: list[str]
    counts: dict[str, list[list[float]]] = Field(
        description="category -> [pair][rater] error counts; NaN where a rater gave none"
    )
    source: str = ""

    def mean(self, category: str = TOTAL) -> np.ndarray:
        """Mean error count over raters, one value per pair."""
        arr = np.asarray(self.counts[category], dtype=float)
        with np.errstate(invalid="ignore"):
            return np.nanmean(arr, axis=1)

    @property
    def categories(self) -> list[str]:
        return [TOTAL] + sorted(c for c in self.counts if c != TOTAL)


class RatingsFormatError(InputError):
    """A ratings file that cannot be read as documented.

    An :class:`~cxreval.io.InputError` (so also a ``ValueError``): ``problems`` lists every
    problem of every file read, each with its file, line / row / item and field.
    """


# ------------------------------------------------------------------------------------------
# Readers (CSV by default; TSV, JSONL, a JSON list or Parquet by suffix: see cxreval.io)
# ------------------------------------------------------------------------------------------


def read_plain_ratings(
    path: str | Path,
    *,
    id_col: str = "id",
    reference_col: str = "reference",
    candidate_col: str = "candidate",
    rater_prefix: str = "rater_",
    format: str | None = None,
) -> HumanRatings:
    """Read ``id, reference, candidate, rater_1..rater_k[, rater_i_<category>]``.

    Ids must be unique and reports non-empty; a rater's count must be a number or empty (no
    count: NaN). Reports are kept exactly as written (in CSV, but for the ``'`` a spreadsheet-safe
    writer such as ``cxreval review export`` puts before a cell that would start a formula).
    Raises :class:`RatingsFormatError` listing every problem (file, line, field).
    """
    table = load_whole_table(path, format, formula_guards=True)  # human_ratings.csv of cxreval review export
    present = check_columns(table, [id_col, reference_col, candidate_col])
    pat = re.compile(rf"^{re.escape(rater_prefix)}(\d+)(?:_(.+))?$")
    totals: dict[str, str] = {}
    cats: dict[str, dict[str, str]] = defaultdict(dict)
    for f in table.columns:
        m = pat.match(f)
        if m:
            if m.group(2):
                cats[m.group(2)][m.group(1)] = f
            else:
                totals[m.group(1)] = f
    raters = sorted(set(totals) | {r for c in cats.values() for r in c}, key=int)
    if not raters:
        table.problems.append(
            InputProblem(
                file=table.file,
                unit=table.unit,
                message=f"no rater columns ({rater_prefix}1, {rater_prefix}2, ...); columns present: "
                f"{', '.join(map(repr, table.columns)) or '(none)'}",
            )
        )
    rating_cols = set(totals.values()) | {f for c in cats.values() for f in c.values()}
    counts: dict[str, list[list[float]]] = {TOTAL: []}
    for c in cats:
        counts[c] = []
    ids, refs, cands = [], [], []
    unique = Uniqueness(table)
    require_records(table)
    for rec in table.records:
        ident = rec.ident = record_id(table, rec, id_col, present)
        ref = text_value(table, rec, reference_col, present, what="report")
        cand = text_value(table, rec, candidate_col, present, what="report")
        by_cat = {
            c: [number_value(table, rec, cols[r], rating_cols) if r in cols else math.nan for r in raters]
            for c, cols in cats.items()
        }
        direct = {r: number_value(table, rec, col, rating_cols) for r, col in totals.items()}
        fresh = ident is not None and unique.is_new(ident, rec, id_col)
        if not fresh or ref is None or cand is None or None in direct.values() or any(None in v for v in by_cat.values()):
            continue
        ids.append(ident)
        refs.append(ref)
        cands.append(cand)
        rated = cast(dict[str, list[float]], by_cat)  # no None in it: checked above
        given = cast(dict[str, float], direct)
        for c, row in rated.items():
            counts[c].append(row)
        total: list[float] = []
        for r in raters:
            if r in totals:
                total.append(given[r])
            else:
                parts = [rated[c][raters.index(r)] for c in cats if r in cats[c]]
                total.append(float(np.nansum(parts)) if parts else math.nan)
        counts[TOTAL].append(total)
    raise_problems(table, error=RatingsFormatError)
    return HumanRatings(ids=ids, references=refs, candidates=cands, raters=raters, counts=counts, source=str(Path(path)))


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


def _rexval_pairs(table: RecordTable, cols: RexvalColumns) -> tuple[dict[tuple[str, str], tuple[str, str]], list[str]]:
    """(study, candidate type) -> (reference, candidate), and the study keys in file order."""
    long = cols.long_candidate_type in table.columns and cols.long_report in table.columns
    present = check_columns(table, [cols.reference])
    has_ids = cols.study_id in table.columns
    present |= {cols.study_id} if has_ids else set()
    cand_cols = [c for c in cols.candidate_types if c in table.columns]
    if long:
        present |= {cols.long_candidate_type, cols.long_report}
    elif not cand_cols:
        table.problems.append(
            InputProblem(
                file=table.file,
                unit=table.unit,
                message=f"none of the candidate columns {', '.join(map(repr, cols.candidate_types))} (nor the long "
                f"layout's {cols.long_candidate_type!r} + {cols.long_report!r}); columns present: "
                f"{', '.join(map(repr, table.columns)) or '(none)'}",
            )
        )
    present |= set(cand_cols)
    require_records(table)
    pairs: dict[tuple[str, str], tuple[str, str]] = {}
    study_keys: dict[str, None] = {}
    unique = Uniqueness(table, "study and candidate type" if long else "study id")
    for i, rec in enumerate(table.records):
        sid = rec.ident = record_id(table, rec, cols.study_id, present) if has_ids else str(i)
        ref = text_value(table, rec, cols.reference, present, what="report")
        if long:
            ctype = text_value(table, rec, cols.long_candidate_type, present, what="candidate type")
            report = text_value(table, rec, cols.long_report, present, what="report")
            if sid is None or ctype is None:
                continue
            if unique.is_new((sid, ctype), rec, cols.long_candidate_type, f"({sid!r}, {ctype!r})"):
                study_keys.setdefault(sid, None)
                if ref is not None and report is not None:
                    pairs[(sid, ctype)] = (ref, report)
            continue
        texts = {c: text_value(table, rec, c, present, what="report") for c in cand_cols}
        if sid is None or not unique.is_new(sid, rec, cols.study_id if has_ids else None, repr(sid)):
            continue
        study_keys.setdefault(sid, None)
        for c, text in texts.items():
            if ref is not None and text is not None:
                pairs[(sid, c)] = (ref, text)
    return pairs, list(study_keys)


class _Rating(NamedTuple):
    rec: Record
    number: str
    candidate_type: str
    rater: str
    category: str
    significant: bool | None
    n_errors: float


def _rexval_ratings(table: RecordTable, cols: RexvalColumns, significance: str) -> list[_Rating]:
    """Every record of the ratings file, checked (problems go to the table)."""
    need = [cols.study_number, cols.rating_candidate_type, cols.rater, cols.count]
    if significance != "all":
        need.append(cols.significant)  # the filter needs the column: never keep every error silently
    present = check_columns(table, need) | ({cols.category} & set(table.columns))
    require_records(table)
    out = []
    for rec in table.records:
        number = text_value(table, rec, cols.study_number, present, numbers_ok=True, what="study number")
        ctype = text_value(table, rec, cols.rating_candidate_type, present, what="candidate type")
        rater = text_value(table, rec, cols.rater, present, numbers_ok=True, what="rater")
        category = (
            text_value(table, rec, cols.category, present, numbers_ok=True, empty_ok=True) if cols.category in present else ""
        )
        sig = bool_value(table, rec, cols.significant, present) if significance != "all" else None
        count = number_value(table, rec, cols.count, present)
        if (
            number is None
            or ctype is None
            or rater is None
            or category is None
            or count is None
            or (significance != "all" and sig is None)
        ):
            continue
        out.append(_Rating(rec, number.strip(), ctype, rater, category, sig, count))
    return out


def read_rexval(
    reports_csv: str | Path,
    ratings_csv: str | Path,
    *,
    columns: RexvalColumns | None = None,
    significance: str = "all",
    reports_format: str | None = None,
    ratings_format: str | None = None,
) -> HumanRatings:
    """Read ReXVal's two files into pairs ``<study>:<candidate_type>`` with per-rater counts.

    ``significance``: ``all`` (every error), ``significant`` or ``insignificant`` (only errors
    the rater marked so; the significance column must then be present and hold yes/no values).
    Categories are ``<error_category>`` counts under the same filter. ``study_number`` is
    matched to ``study_id`` when the values agree, else to the row position (1-based when the
    numbers run 1..n, 0-based when 0..n-1). Raises :class:`RatingsFormatError` listing every
    problem of both files.
    """
    cols = columns or RexvalColumns()
    if significance not in ("all", "significant", "insignificant"):
        raise ValueError("significance must be all, significant or insignificant")
    reports = load_whole_table(reports_csv, reports_format)
    pairs, study_keys = _rexval_pairs(reports, cols)
    wanted = [cols.study_number, cols.rating_candidate_type, cols.rater, cols.count, cols.category, cols.significant]
    ratings = load_table(ratings_csv, table_format(ratings_csv, ratings_format), wanted, keyed_ok=False)
    grows = _rexval_ratings(ratings, cols, significance)
    raise_problems(reports, ratings, error=RatingsFormatError)
    to_study = _study_mapper(grows, study_keys, ratings, cols.study_number, reports.file)
    for g in grows:
        if to_study is not None and (to_study[g.number], g.candidate_type) not in pairs:
            ratings.problems.append(
                ratings.problem(
                    f"no report for study {to_study[g.number]!r}, candidate {g.candidate_type!r} in {reports.file}",
                    g.rec,
                    cols.rating_candidate_type,
                )
            )
    raise_problems(ratings, error=RatingsFormatError)
    assert to_study is not None
    raters: list[str] = sorted({g.rater for g in grows}, key=_natural)
    acc: dict[str, dict[tuple[str, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    rated_by: dict[tuple[str, str], set[str]] = defaultdict(set)  # who rated a pair (before filtering)
    for g in grows:
        key = (to_study[g.number], g.candidate_type)
        rated_by[key].add(g.rater)
        if g.significant is not None and g.significant != (significance == "significant"):
            continue
        for cat in (TOTAL, g.category or None):
            if cat:
                acc[cat][key][g.rater] = acc[cat][key].get(g.rater, 0.0) + g.n_errors
    rated = [k for k in pairs if k in rated_by] or list(pairs)
    rated_raters = {k: rated_by.get(k, set()) for k in rated}
    counts = {
        cat: [[acc[cat].get(k, {}).get(rt, 0.0 if rt in rated_raters[k] else float("nan")) for rt in raters] for k in rated]
        for cat in ([TOTAL] + sorted(c for c in acc if c != TOTAL))
    }
    return HumanRatings(
        ids=[f"{s}:{c}" for s, c in rated],
        references=[pairs[k][0] for k in rated],
        candidates=[pairs[k][1] for k in rated],
        raters=raters,
        counts=counts,
        source=f"{Path(reports_csv)} + {Path(ratings_csv)}",
    )


def _natural(value: str) -> tuple[int, str]:
    return (int(value), "") if value.strip().lstrip("-").isdigit() else (10**9, value)


def _study_mapper(
    grows: Sequence[_Rating], study_keys: Sequence[str], table: RecordTable, field: str, reports_file: str
) -> dict[str, str] | None:
    """Study number -> study key: the ids themselves when they all match, else row positions.

    None after reporting every number that is neither (problems go to ``table``).
    """
    keys = set(study_keys)
    if all(g.number in keys for g in grows):
        return {g.number: g.number for g in grows}
    known = len(table.problems)
    ints: dict[str, int] = {}
    for g in grows:
        try:
            ints[g.number] = int(float(g.number))
        except (ValueError, OverflowError):
            table.problems.append(
                table.problem(
                    f"study number {g.number!r} is neither a study id of {reports_file} nor a row position", g.rec, field
                )
            )
    if len(table.problems) > known:
        return None
    values = sorted(set(ints.values()))
    base = 1 if values and values[0] >= 1 and values[-1] == len(study_keys) else 0
    for g in grows:
        if not 0 <= ints[g.number] - base < len(study_keys):
            table.problems.append(
                table.problem(
                    f"study number {g.number} is outside the {len(study_keys)} studies of {reports_file} "
                    f"(row positions {base}..{len(study_keys) - 1 + base})",
                    g.rec,
                    field,
                )
            )
    if len(table.problems) > known:
        return None
    return {n: study_keys[i - base] for n, i in ints.items()}


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


def bootstrap_tau_b(
    x: np.ndarray, y: np.ndarray, *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
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
        out.append(
            Correlation(
                category=cat,
                n=int(np.sum(np.isfinite(first) & np.isfinite(human))),
                tau_b=finite_or_none(taus[0][0]),
                tau_b_p=finite_or_none(taus[0][1]),
                tau_b_ci=(finite_or_none(lo), finite_or_none(hi)),
                spearman=finite_or_none(rhos[0]),
                tau_b_runs=[float(v) for v in t],
                tau_b_mean=finite_or_none(np.nanmean(t)) if np.isfinite(t).any() else None,
                tau_b_sd=finite_or_none(np.nanstd(t, ddof=1)) if np.isfinite(t).sum() > 1 else None,
                spearman_mean=finite_or_none(np.nanmean(rho)) if np.isfinite(rho).any() else None,
                spearman_sd=finite_or_none(np.nanstd(rho, ddof=1)) if np.isfinite(rho).sum() > 1 else None,
            )
        )
    return Alignment(
        metric=metric,
        signature=signature,
        higher_is_better=higher_is_better,
        runs=len(runs),
        resamples=resamples,
        seed=seed,
        source=ratings.source,
        correlations=out,
    )


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
    return align_scores(
        scores,
        ratings,
        higher_is_better=metric.higher_is_better,
        metric=metric.name,
        signature=str(metric.signature),
        categories=categories,
        resamples=resamples,
        seed=seed,
    )
