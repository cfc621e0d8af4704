"""Analyses of a benchmark run: leaderboards with bootstrap CIs and rank intervals, strata,
per-site cells, error-free rates, metric correlations and per-entity / per-group results.

Every system score is a function of column sums of a per-pair feature matrix (a pair metric's
value and a "defined" indicator, error-free indicators, presence TP/FP/FN per entity, a corpus
metric's sufficient statistics). A bootstrap resample is a vector of multinomial pair weights;
the same weights are applied to every system of a dataset (systems are scored on the same
studies), so the rank of each system in each resample gives its rank interval. Intervals are
percentile intervals over the resamples where the score is defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse
from scipy import stats as sps

from cxreval._version import __version__
from cxreval.bench.config import DERIVED_METRICS, JUDGEMENT_METRIC, BenchConfig
from cxreval.bench.models import (
    BenchmarkResult,
    Correlation,
    EntityResult,
    ExamplePair,
    GroupResult,
    Interval,
    Leaderboard,
    LeaderboardRow,
    MetricInfo,
    SiteCell,
    SystemSummary,
)
from cxreval.judge.table import JudgementTable, full_compact
from cxreval.metrics.base import mean_stats
from cxreval.metrics.table import headline_metrics, headline_values, table_metric_names
from cxreval.ontology import Ontology
from cxreval.scores.ratios import finite_or_none
from cxreval.scores.resampling import bootstrap_weights
from cxreval.scores.spec_tables import SpecScores, spec_scores
from cxreval.scores.statistics import TableStatistics

if TYPE_CHECKING:  # pragma: no cover
    from cxreval.bench.runner import DatasetRun, Runner, SystemRun
    from cxreval.scores.signature import Signature

CHUNK = 200
TABLE_METRIC_NAMES = frozenset(table_metric_names())
KINDS = ("FP", "FN", "location", "severity", "comparison", "less-specific", "more-specific")
_ATTRS = ("location", "severity", "comparison")


# ------------------------------------------------------------------------------------------
# Per-pair features of one system
# ------------------------------------------------------------------------------------------


Compute = Any  # summed statistics ``(R, k)`` -> scores ``(R,)``: a metric's ``compute``


@dataclass
class Features:
    """Per-pair statistics of one system on one dataset, and how each metric scores their sums.

    ``values`` (dense) and ``presence`` (sparse TP/FP/FN per active entity, ``(n, 3E)``) are
    summed separately; ``blocks`` index the concatenation ``[dense sums, presence sums]``;
    ``compute`` holds each metric's own ``compute`` (:class:`cxreval.metrics.Metric`), so bench
    applies no arithmetic of its own to a metric's statistics.
    """

    values: np.ndarray  # (n, F) float32/float64
    presence: sparse.csr_matrix  # (n, 3 * n_entities) float
    names: list[str]  # score names, in the order ``scores`` returns them
    blocks: dict[str, slice]
    compute: dict[str, Compute]

    def sums(self, idx: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Weighted column sums over the pairs ``idx``: ``(R, F + 3E)`` (one row when unweighted)."""
        dense = self.values[idx]
        pres = self.presence[idx]
        if weights is None:
            return np.concatenate(
                [dense.astype(float).sum(axis=0, keepdims=True), np.asarray(pres.sum(axis=0), dtype=float).reshape(1, -1)], axis=1
            )
        w = weights.astype(dense.dtype)
        return np.concatenate([(w @ dense).astype(float), np.asarray((pres.T @ weights.T).T, dtype=float)], axis=1)

    def scores(self, sums: np.ndarray) -> np.ndarray:
        """Column sums ``(R, F + 3E)`` -> scores ``(R, len(names))``."""
        return np.stack([np.asarray(self.compute[name](sums[:, self.blocks[name]]), dtype=float) for name in self.names], axis=1)


@dataclass
class PairTable:
    """One system's judgements on one dataset: its SPEC tables and its table statistics for resampling."""

    stats: TableStatistics  # every pair of the dataset; the ones not judged are marked so
    errors: np.ndarray  # float (n,), NaN where not judged
    presence: sparse.csr_matrix  # (n, 3 E): TP, FP, FN per ontology entity, as the presence block
    spec: SpecScores  # every SPEC table of the judged pairs (the one module evaluate uses too)

    @property
    def judged(self) -> np.ndarray:
        return self.stats.judged

    @property
    def reference_positive(self) -> np.ndarray:
        """Per pair, whether the reference states a positive entity (a TP or FN row)."""
        return self.stats.reference_positive()


#: Below this many pairs a stratum gets no bootstrap interval nor rank interval (its values are
#: shown alone): resampling a handful of pairs mostly repeats them, and the interval says nothing.
MIN_PAIRS_FOR_INTERVAL = 5


def pair_table(sys: SystemRun, ontology: Ontology, ids: Sequence[str]) -> PairTable:
    """The statistics of a system's compact judgement rows (:class:`TableStatistics`, what every
    table metric computes from) and its SPEC tables (:func:`cxreval.scores.spec_scores`)."""
    table = JudgementTable.from_compact(ids, sys.judgements)
    stats = TableStatistics(table, ontology, ids)
    errors = np.where(stats.judged, stats.errors(), np.nan)
    return PairTable(stats, errors, stats.presence_sparse(), spec_scores(table, ontology))


def features(sys: SystemRun, table: PairTable, metric_names: Sequence[str], runner: Runner) -> Features:
    """The statistics of one system (see module doc): each metric's ``pair_stats`` (the bench
    cache holds them, or a pair-mean metric's values), the judgement table's counts for the
    SPEC metrics."""
    cols: list[np.ndarray] = []
    blocks: dict[str, slice] = {}
    compute: dict[str, Compute] = {}
    width = 0

    def add(name: str, block: np.ndarray, fn: Compute) -> None:
        nonlocal width
        block = block.reshape(len(block), -1)
        cols.append(block)
        blocks[name] = slice(width, width + block.shape[1])
        compute[name] = fn
        width += block.shape[1]

    presence_names = []
    for name in metric_names:
        if name in TABLE_METRIC_NAMES:  # from the judgement table, by the registered metric's compute
            from_table = runner.table_metric(name)
            if from_table.statistic == "presence":
                presence_names.append(name)
            else:
                add(name, from_table.table_stats(table.stats), from_table.compute)
        else:
            metric = runner.metric(name)
            values = sys.metrics[name]
            add(name, values if values.ndim == 2 else mean_stats(values), metric.compute)
    for name in presence_names:
        blocks[name] = slice(width, width + table.presence.shape[1])
        compute[name] = runner.table_metric(name).compute
    values = np.concatenate(cols, axis=1) if cols else np.zeros((table.stats.n_pairs, 0))
    exact = values.size == 0 or (np.array_equal(values, np.round(values)) and len(values) * np.abs(values).max() < 2**24)
    return Features(values.astype(np.float32 if exact else np.float64), table.presence, list(metric_names), blocks, compute)


# ------------------------------------------------------------------------------------------
# Leaderboards
# ------------------------------------------------------------------------------------------


def _ranks(theta: np.ndarray, higher: bool) -> np.ndarray:
    """Competition ranks (1 = best) along axis 0 of ``(S, ...)``; NaN ranks last."""
    x = np.where(np.isnan(theta), -np.inf if higher else np.inf, theta)
    x = -x if higher else x
    return 1 + (x[None, :] < x[:, None]).sum(axis=1)


def leaderboard(
    dataset: str,
    stratum: str,
    systems: Sequence[tuple[str, bool, Features, int]],
    idx: np.ndarray,
    rank_by: str,
    higher: dict[str, bool],
    resamples: int,
    seed: int,
    confidence: float,
) -> Leaderboard:
    """One leaderboard over the pairs ``idx``; ``systems`` = (name, baseline, features, n_failed)."""
    n = len(idx)
    if n < MIN_PAIRS_FOR_INTERVAL:  # a stratum of 1 pair resampled is that pair again: [2.000, 2.000]
        resamples = 0
    names = systems[0][2].names
    point = np.stack([f.scores(f.sums(idx))[0] for _, _, f, _ in systems])
    boots = np.full((len(systems), resamples, len(names)), np.nan)
    if resamples and n:
        rng = np.random.default_rng(seed)
        for start in range(0, resamples, CHUNK):
            size = min(CHUNK, resamples - start)
            w = bootstrap_weights(rng, n, size)
            for s, (_, _, f, _) in enumerate(systems):
                boots[s, start : start + size] = f.scores(f.sums(idx, w))
    alpha = (1 - confidence) / 2
    k = names.index(rank_by)
    hb = higher[rank_by]
    rank = _ranks(point[:, k], hb)
    if resamples and n:
        rb = _ranks(boots[:, :, k], hb)
        r_lo = np.floor(np.quantile(rb, alpha, axis=1)).astype(int)
        r_hi = np.ceil(np.quantile(rb, 1 - alpha, axis=1)).astype(int)
    else:
        r_lo = r_hi = rank
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo = np.nanquantile(boots, alpha, axis=1) if resamples else np.full_like(point, np.nan)
            hi = np.nanquantile(boots, 1 - alpha, axis=1) if resamples else np.full_like(point, np.nan)
    rows = []
    for s, (name, base, f, _failed) in enumerate(systems):
        metrics = {
            m: Interval(value=finite_or_none(point[s, j]), low=finite_or_none(lo[s, j]), high=finite_or_none(hi[s, j]))
            for j, m in enumerate(names)
        }
        n_judged = int(f.values[idx][:, f.blocks[JUDGEMENT_METRIC]][:, 1].sum())
        rows.append(
            LeaderboardRow(
                system=name,
                n_pairs=n_judged,
                n_failed=n - n_judged,
                metrics=metrics,
                rank=int(rank[s]),
                rank_low=int(r_lo[s]),
                rank_high=int(r_hi[s]),
                error_free=metrics.get("spec-report-error-free-rate"),
                critical_error_free=metrics.get("spec-report-critical-error-free-rate"),
                baseline=base,
            )
        )
    rows.sort(key=lambda r: (r.rank, r.system))
    return Leaderboard(dataset=dataset, stratum=stratum, rank_by=rank_by, rows=rows, n_pairs=n)


# ------------------------------------------------------------------------------------------
# Entities, groups, correlations
# ------------------------------------------------------------------------------------------


def entity_results(
    dataset: str, sys: SystemRun, table: PairTable, ids: Sequence[str], ontology: Ontology, max_examples: int
) -> tuple[list[EntityResult], list[GroupResult]]:
    """Per-entity and per-group results of one system (numbers from ``table.spec``, the one SPEC
    module), with example pairs per error kind."""
    E = {e.id: e for e in ontology.entities}
    examples: dict[str, list[ExamplePair]] = {}
    per_kind: dict[tuple[str, str], int] = {}
    for i, rows in enumerate(sys.judgements):
        for ent, pres, loc, sev, comp, ref, cand, ref_rules, cand_rules, spec in map(full_compact, rows or ()):
            entity = E.get(ent)
            applies = entity.attributes if entity is not None else ()
            kinds = [pres] if pres in ("FP", "FN") else []
            if pres == "TP":
                kinds += [a for a, v in (("location", loc), ("severity", sev)) if a in applies and v == "not-aligned"]
                if "comparison" in applies and comp != "other":
                    kinds.append("comparison")
                if spec in ("less-specific", "more-specific"):
                    kinds.append(spec)
            for kind in kinds:
                if per_kind.get((ent, kind), 0) < max_examples:
                    per_kind[(ent, kind)] = per_kind.get((ent, kind), 0) + 1
                    examples.setdefault(ent, []).append(
                        ExamplePair(
                            pair_id=ids[i],
                            kind=kind,
                            reference=ref,
                            candidate=cand,
                            reference_rules=ref_rules,
                            candidate_rules=cand_rules,
                        )
                    )
    ents: list[EntityResult] = []
    for e in table.spec.entities:
        p = e.presence
        if p.tp + p.fp + p.fn == 0:
            continue
        ents.append(
            EntityResult(
                system=sys.name,
                dataset=dataset,
                entity=e.entity,
                name=e.name,
                group=e.group,
                tp=p.tp,
                fp=p.fp,
                fn=p.fn,
                precision=p.precision,
                recall=p.recall,
                f1=p.f1,
                **{f"{a}_acc": getattr(e, a).accuracy for a in _ATTRS},
                examples=examples.get(e.entity, []),
                critical=E[e.entity].critical,
                **{f"{a}_errors": getattr(e, a).judged - getattr(e, a).correct for a in _ATTRS},
            )
        )
    groups = [
        GroupResult(
            system=sys.name,
            dataset=dataset,
            group=g.group,
            name=g.name,
            support=g.presence.support,
            precision=g.presence.precision,
            recall=g.presence.recall,
            f1=g.presence.f1,
            **{f"{a}_acc": getattr(g, a).accuracy for a in _ATTRS},
        )
        for g in table.spec.groups
    ]
    return ents, groups


def correlations(dataset: str, per_pair: dict[str, np.ndarray]) -> list[Correlation]:
    """Pearson and Kendall (tau-b) matrices between per-pair metric values (pairs with all values)."""
    names = list(per_pair)
    if len(names) < 2:
        return []
    X = np.stack([per_pair[m] for m in names], axis=1)
    X = X[np.isfinite(X).all(axis=1)]
    out = []
    for method in ("pearson", "kendall"):
        mat: list[list[float | None]] = [[None] * len(names) for _ in names]
        for a in range(len(names)):
            for b in range(a, len(names)):
                if a == b:
                    val: float | None = 1.0 if len(X) > 1 and np.ptp(X[:, a]) > 0 else None
                elif len(X) < 3 or np.ptp(X[:, a]) == 0 or np.ptp(X[:, b]) == 0:
                    val = None
                elif method == "pearson":
                    val = finite_or_none(float(np.corrcoef(X[:, a], X[:, b])[0, 1]))
                else:
                    val = finite_or_none(float(sps.kendalltau(X[:, a], X[:, b]).statistic))
                mat[a][b] = mat[b][a] = val
        out.append(Correlation(dataset=dataset, method=method, metrics=names, matrix=mat, n=len(X)))
    return out


# ------------------------------------------------------------------------------------------
# The whole analysis
# ------------------------------------------------------------------------------------------


def metric_infos(config: BenchConfig, runner: Runner) -> list[MetricInfo]:
    """Each leaderboard metric with its signature; every value carries a percentile interval, so
    every signature names the resampling (method, resamples, seed, confidence)."""
    bs = config.bootstrap

    def with_interval(signature: Signature) -> Signature:
        return signature.with_intervals(method="percentile", resamples=bs.resamples, seed=bs.seed, confidence=bs.confidence)

    sig = with_interval(runner.evaluator.signature)
    infos = []
    for name in [JUDGEMENT_METRIC, *(m for m in config.metrics if m != JUDGEMENT_METRIC), *DERIVED_METRICS]:
        if name in TABLE_METRIC_NAMES:
            t = runner.table_metric(name)
            infos.append(
                MetricInfo(
                    name=name,
                    higher_is_better=t.higher_is_better,
                    label=t.label,
                    description=t.description,
                    level=t.level,
                    signature=str(sig.with_metric(t.signature_id)),
                )
            )
            continue
        m = runner.metric(name)
        infos.append(
            MetricInfo(
                name=name,
                higher_is_better=bool(m.higher_is_better),
                signature=str(with_interval(m.signature)),
                label=getattr(m, "label", name),
                level=getattr(m, "level", "pair"),
                description=(m.__doc__ or "").strip().splitlines()[0] if m.__doc__ else "",
            )
        )
    return infos


def _normal_flags(d: DatasetRun, tables: Sequence[PairTable], runner: Runner) -> np.ndarray:
    """True where the reference states no positive entity (from any system's judged pair)."""
    known = np.zeros(len(d.ids), dtype=bool)
    positive = np.zeros(len(d.ids), dtype=bool)
    for t in tables:
        positive |= t.reference_positive & t.judged
        known |= t.judged
    if not known.all():
        from cxreval.judge.compare import is_positive

        ext = runner.evaluator.extractor  # the run's rule engine: a config's own rules included
        for i in np.flatnonzero(~known):
            states = ext.extract(d.references[i]).states().values()
            positive[i] = any(is_positive(s, runner.config.engine.uncertain) for s in states)
    return ~positive


def _strata(d: DatasetRun, normal: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The pair indices of each stratum of a dataset: all, normal, abnormal, then each site."""
    strata: list[tuple[str, np.ndarray]] = [("all", np.arange(len(d.ids)))]
    strata += [("normal", np.flatnonzero(normal)), ("abnormal", np.flatnonzero(~normal))]
    if d.sites is not None:
        site_arr = np.array(d.sites)
        for site in sorted(set(d.sites)):
            strata.append((f"site:{site}", np.flatnonzero(site_arr == site)))
    return strata


def _site_cells(dataset: str, site: str, lb: Leaderboard, names: Sequence[str], higher: dict[str, bool]) -> list[SiteCell]:
    """One site's leaderboard as cells: each system's value and rank on each metric."""
    cells = []
    for m in names:
        vals = np.array([np.nan if r.metrics[m].value is None else r.metrics[m].value for r in lb.rows])
        ranks = _ranks(vals, higher[m])
        for r, rk in zip(lb.rows, ranks):
            cells.append(
                SiteCell(
                    dataset=dataset,
                    site=site,
                    system=r.system,
                    metric=m,
                    value=r.metrics[m].value,
                    rank=None if r.metrics[m].value is None else int(rk),
                    n_pairs=r.n_pairs,
                )
            )
    return cells


def _pooled_per_pair(
    d: DatasetRun, tables: Sequence[PairTable], config: BenchConfig, runner: Runner
) -> dict[str, list[np.ndarray]]:
    """Each metric's per-pair values for every non-baseline system of a dataset (for correlations)."""
    per_pair: dict[str, list[np.ndarray]] = {}
    for s, t in zip(d.systems, tables):
        if s.baseline:
            continue
        per_pair.setdefault(JUDGEMENT_METRIC, []).append(t.errors)
        for m in config.metrics:
            if m in TABLE_METRIC_NAMES:
                if m != JUDGEMENT_METRIC:
                    metric = runner.table_metric(m)
                    per_pair.setdefault(m, []).append(np.asarray(metric.compute(metric.table_stats(t.stats))))
                continue
            v = s.metrics[m]
            if v.ndim == 2:  # statistics: the pair's own value is the metric's compute of its row
                v = np.asarray(runner.metric(m).compute(v), dtype=float)
            per_pair.setdefault(m, []).append(v)
    return per_pair


def analyse(config: BenchConfig, runs: Sequence[DatasetRun], runner: Runner, created: str) -> BenchmarkResult:
    """The :class:`BenchmarkResult` of a judged and scored run."""
    ontology = runner.evaluator.ontology
    infos = metric_infos(config, runner)
    headline = headline_metrics(ontology)
    higher = {m.name: m.higher_is_better for m in infos}
    names = [m.name for m in infos]
    bs = config.bootstrap
    boards: list[Leaderboard] = []
    ents: list[EntityResult] = []
    groups: list[GroupResult] = []
    summaries: list[SystemSummary] = []
    corrs: list[Correlation] = []
    sites: list[SiteCell] = []
    notes: list[str] = [
        f"Intervals: {int(bs.confidence * 100)} % percentile bootstrap over studies, {bs.resamples} resamples, "
        f"seed {bs.seed}; the same resamples for every system of a dataset (rank intervals from the ranks "
        "in each resample).",
        "Correlations pool the per-pair values of every non-baseline system; bleu4-corpus enters them as sentence-level BLEU-4.",
    ]
    for d in runs:
        if not d.systems:
            continue
        tables = [pair_table(s, ontology, d.ids) for s in d.systems]
        normal = d.normal if d.normal is not None else _normal_flags(d, tables, runner)
        feats = [features(s, t, names, runner) for s, t in zip(d.systems, tables)]
        entries = [(s.name, s.baseline, f, 0) for s, f in zip(d.systems, feats)]
        for k, (stratum, idx) in enumerate(_strata(d, normal)):
            if len(idx) == 0:
                continue
            lb = leaderboard(d.name, stratum, entries, idx, config.rank_by, higher, bs.resamples, bs.seed + k, bs.confidence)
            boards.append(lb)
            if stratum.startswith("site:"):
                sites.extend(_site_cells(d.name, stratum[5:], lb, names, higher))
        for s, t in zip(d.systems, tables):
            summaries.append(
                SystemSummary(
                    system=s.name, dataset=d.name, n_pairs=len(t.spec.errors), values=headline_values(headline, t.spec.block_sums)
                )
            )
            e, g = entity_results(d.name, s, t, d.ids, ontology, config.examples_per_kind)
            ents.extend(e)
            groups.extend(g)
        per_pair = _pooled_per_pair(d, tables, config, runner)
        if per_pair:
            corrs.extend(correlations(d.name, {m: np.concatenate(v) for m, v in per_pair.items()}))
        if d.normal is None:
            notes.append(
                f"{d.name}: normal = the reference states no positive entity "
                f"({int(normal.sum())} normal, {int((~normal).sum())} abnormal studies)."
            )
    systems = list(dict.fromkeys(s.name for d in runs for s in d.systems))
    return BenchmarkResult(
        name=config.name,
        created=created,
        cxreval_version=__version__,
        engine_signature=runner.engine_signature,
        ontology=ontology.signature,
        metrics=infos,
        primary_metric=config.rank_by,
        datasets=[d.name for d in runs],
        systems=systems,
        leaderboards=boards,
        groups=groups,
        entities=ents,
        summaries=summaries,
        correlations=corrs,
        sites=sites,
        notes=notes,
        baselines=[s.name for s in config.systems if s.baseline is not None],
    )
