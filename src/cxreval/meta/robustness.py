"""Discrimination and robustness of report metrics on a perturbation suite (ReEvalMed's D and R).

A metric **penalises** a variant when its score for (reference, candidate) is worse than its
score for (reference, reference), the identity pair, in the metric's own direction
(``higher_is_better``) by more than ``tol``. Comparing with the identity pair rather than with a
fixed "perfect" value keeps metrics honest whose identity score is not their maximum.

- **Discrimination**: share of clinically significant variants the metric penalises.
- **Right entity** (entity-level engines only): share of significant variants penalised *and*
  judged wrong on the target entity (its row is FP / FN, location or severity not-aligned, or a
  comparison error).
- **Robustness**: share of clinically insignificant variants the metric does *not* penalise.

Each share comes with a Clopper-Pearson 95 % interval (:func:`cxreval.scores.resampling.clopper_pearson`),
per perturbation type and overall. A pair the metric could not score (NaN) is counted in ``n_nan``
and left out of the share.

Every figure is given per **target variant** (``PerturbedPair.targets``: ``mesh`` or ``engine``,
see :mod:`cxreval.meta.perturb`): a variant's rows count its own significant pairs and the
``shared`` insignificant ones, so the insignificant rows are the same under both variants. A
suite with no labelled variant (only insignificant types) has one variant, ``shared``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from cxreval.judge.models import EntityJudgement
from cxreval.meta.perturb import ALL_TYPES, SHARED, SIGNIFICANT, TARGET_VARIANTS, PerturbedPair
from cxreval.metrics.base import ReportMetric
from cxreval.render import Column, Table, to_csv, to_json, to_latex, to_markdown
from cxreval.scores.resampling import clopper_pearson
from cxreval.scores.signature import Signature

if TYPE_CHECKING:  # pragma: no cover
    from cxreval.metrics.spec import SpecErrors

DEFAULT_TOL = 1e-9


@runtime_checkable
class EntityLevelMetric(Protocol):
    """A report metric that also says which entities it judged wrong (cxreval's engines)."""

    name: str
    higher_is_better: bool

    @property
    def signature(self) -> Signature: ...

    def score_and_judge(
        self, references: Sequence[str], candidates: Sequence[str]
    ) -> tuple[np.ndarray, list[list[EntityJudgement]]]:
        """Scores (NaN where unscored) and each pair's judgement rows, in input order."""
        ...


def EvaluatorMetric(evaluator: object | None = None) -> SpecErrors:
    """SPEC-CXR report errors of an :class:`~cxreval.evaluate.Evaluator` (any engine), entity-level:
    the registered ``spec-errors`` metric itself, with its judgement rows (``score_and_judge``)."""
    from cxreval.evaluate import Evaluator
    from cxreval.metrics.spec import SpecErrors

    ev = evaluator if evaluator is not None else Evaluator()
    return SpecErrors.from_runner(ev.engine_runner)  # type: ignore[attr-defined,return-value]


def is_error_row(row: EntityJudgement) -> bool:
    """The row counts an error: FP / FN, an attribute not aligned, or a comparison error."""
    return row.error_count > 0


def penalised(score: np.ndarray, identity: np.ndarray, higher_is_better: bool, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Boolean per pair: the candidate scores worse than the identity pair (NaN -> False)."""
    s, i = np.asarray(score, float), np.asarray(identity, float)
    with np.errstate(invalid="ignore"):
        return (s < i - tol) if higher_is_better else (s > i + tol)


class MetricRun(BaseModel):
    """One metric's raw outcome on a suite, pair by pair (suite order)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    signature: str
    higher_is_better: bool
    scores: list[float]
    identity: list[float]
    penalised: list[bool]
    right_entity: list[bool] | None = None


class Share(BaseModel):
    """k of n with its Clopper-Pearson interval (``None`` when n = 0)."""

    model_config = ConfigDict(frozen=True)

    k: int
    n: int
    rate: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, k: int, n: int, confidence: float = 0.95) -> Share:
        if n == 0:
            return cls(k=0, n=0, rate=None, low=None, high=None)
        lo, hi = clopper_pearson(k, n, confidence)
        return cls(k=k, n=n, rate=k / n, low=float(lo), high=float(hi))


class TypeRow(BaseModel):
    """One metric on one perturbation type (or ``overall-significant`` / ``overall-insignificant``)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    perturbation: str
    significant: bool
    n: int
    targets: str = "engine"
    """The target variant (``mesh`` / ``engine``; ``shared`` for a suite without one)."""
    n_nan: int
    discrimination: Share | None = None
    right_entity: Share | None = None
    robustness: Share | None = None

    @property
    def main(self) -> Share:
        """Discrimination for significant types, robustness for insignificant ones."""
        share = self.discrimination if self.significant else self.robustness
        assert share is not None
        return share


class RobustnessReport(BaseModel):
    """Discrimination / robustness of several metrics on one suite."""

    model_config = ConfigDict(frozen=True)

    suite: str
    n_pairs: int
    counts: dict[str, int]
    metrics: list[str]
    signatures: dict[str, str]
    rows: list[TypeRow]
    tol: float = DEFAULT_TOL
    variants: list[str] = ["engine"]
    """Target variants of the suite, in report order (``mesh`` before ``engine``)."""
    counts_by_variant: dict[str, dict[str, int]] = {}
    """Pairs per type for each variant (its own significant pairs and the shared ones)."""

    def row(self, metric: str, perturbation: str, targets: str | None = None) -> TypeRow:
        """The row of a metric and type; ``targets`` picks the variant (default: the first one)."""
        targets = targets or self.variants[0]
        return next(r for r in self.rows if r.metric == metric and r.perturbation == perturbation and r.targets == targets)


def suite_variants(pairs: Sequence[PerturbedPair]) -> list[str]:
    """The target variants labelled in a suite (``mesh`` before ``engine``), else ``["shared"]``."""
    found = {p.targets for p in pairs}
    return [v for v in TARGET_VARIANTS if v in found] or [SHARED]


def variant_pairs(pairs: Sequence[PerturbedPair], variant: str) -> list[int]:
    """Indices of the pairs a variant's figures count: its own and the shared ones."""
    return [i for i, p in enumerate(pairs) if p.targets in (variant, SHARED)]


def _unique_identity(metric: ReportMetric | EntityLevelMetric, references: Sequence[str]) -> dict[str, float]:
    uniq = list(dict.fromkeys(references))
    if isinstance(metric, EntityLevelMetric):
        scores, _ = metric.score_and_judge(uniq, uniq)
    else:
        scores = metric.score_pairs(uniq, uniq)
    return dict(zip(uniq, np.asarray(scores, dtype=float)))


def run_metric(metric: ReportMetric | EntityLevelMetric, pairs: Sequence[PerturbedPair], tol: float = DEFAULT_TOL) -> MetricRun:
    """Score every pair and its identity pair; mark penalised pairs and right-entity hits."""
    refs = [p.reference for p in pairs]
    cands = [p.candidate for p in pairs]
    ident = _unique_identity(metric, refs)
    identity = np.array([ident[r] for r in refs])
    right: list[bool] | None = None
    if isinstance(metric, EntityLevelMetric):
        scores, rows = metric.score_and_judge(refs, cands)
        scores = np.asarray(scores, dtype=float)
        pen = penalised(scores, identity, metric.higher_is_better, tol)
        right = [
            bool(pen[i]) and p.target_entity is not None and any(r.entity == p.target_entity and is_error_row(r) for r in rows[i])
            for i, p in enumerate(pairs)
        ]
    else:
        scores = np.asarray(metric.score_pairs(refs, cands), dtype=float)
        pen = penalised(scores, identity, metric.higher_is_better, tol)
    return MetricRun(
        metric=metric.name,
        signature=str(metric.signature),
        higher_is_better=metric.higher_is_better,
        scores=scores.tolist(),
        identity=identity.tolist(),
        penalised=[bool(x) for x in pen],
        right_entity=right,
    )


def summarise(run: MetricRun, pairs: Sequence[PerturbedPair]) -> list[TypeRow]:
    """Per-type and overall rows of one metric, for each target variant of the suite."""
    return [r for v in suite_variants(pairs) for r in _summarise(run, pairs, v)]


def _summarise(run: MetricRun, pairs: Sequence[PerturbedPair], variant: str) -> list[TypeRow]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i in variant_pairs(pairs, variant):
        p = pairs[i]
        groups[p.perturbation].append(i)
        groups["overall-significant" if p.significant else "overall-insignificant"].append(i)
    order = [t for t in ALL_TYPES if t in groups] + [g for g in ("overall-significant", "overall-insignificant") if g in groups]
    rows = []
    for g in order:
        idx = groups[g]
        sig = g == "overall-significant" or g in SIGNIFICANT
        ok = [i for i in idx if np.isfinite(run.scores[i]) and np.isfinite(run.identity[i])]
        k = sum(run.penalised[i] for i in ok)
        if sig:
            right = Share.of(sum(run.right_entity[i] for i in ok), len(ok)) if run.right_entity is not None else None
            rows.append(
                TypeRow(
                    metric=run.metric,
                    perturbation=g,
                    significant=True,
                    n=len(idx),
                    targets=variant,
                    n_nan=len(idx) - len(ok),
                    discrimination=Share.of(k, len(ok)),
                    right_entity=right,
                )
            )
        else:
            rows.append(
                TypeRow(
                    metric=run.metric,
                    perturbation=g,
                    significant=False,
                    n=len(idx),
                    targets=variant,
                    n_nan=len(idx) - len(ok),
                    robustness=Share.of(len(ok) - k, len(ok)),
                )
            )
    return rows


def score_suite(
    pairs: Sequence[PerturbedPair],
    metrics: Sequence[ReportMetric | EntityLevelMetric],
    *,
    suite: str = "",
    tol: float = DEFAULT_TOL,
) -> tuple[RobustnessReport, list[MetricRun]]:
    """Run every metric on the suite; the report and the raw per-pair runs."""
    if not pairs:
        raise ValueError("empty suite")
    runs = [run_metric(m, pairs, tol) for m in metrics]
    counts: dict[str, int] = defaultdict(int)
    for p in pairs:
        counts[p.perturbation] += 1
    rows = [r for run in runs for r in summarise(run, pairs)]
    variants = suite_variants(pairs)
    by_variant: dict[str, dict[str, int]] = {}
    for v in variants:
        c: dict[str, int] = defaultdict(int)
        for i in variant_pairs(pairs, v):
            c[pairs[i].perturbation] += 1
        by_variant[v] = dict(c)
    return RobustnessReport(
        suite=suite,
        n_pairs=len(pairs),
        counts=dict(counts),
        metrics=[r.metric for r in runs],
        signatures={r.metric: r.signature for r in runs},
        rows=rows,
        tol=tol,
        variants=variants,
        counts_by_variant=by_variant,
    ), runs


def failures(run: MetricRun, pairs: Sequence[PerturbedPair], *, limit: int | None = None) -> list[PerturbedPair]:
    """Variants the metric got wrong: significant not penalised (or wrong entity), insignificant penalised."""
    out = []
    for i, p in enumerate(pairs):
        if not (np.isfinite(run.scores[i]) and np.isfinite(run.identity[i])):
            continue
        if p.significant:
            good = run.right_entity[i] if run.right_entity is not None else run.penalised[i]
        else:
            good = not run.penalised[i]
        if not good:
            out.append(p)
            if limit is not None and len(out) >= limit:
                break
    return out


def cell_text(row: TypeRow | None) -> str:
    """A table cell: the main share, with the right-entity share in brackets where there is one."""
    if row is None:
        return ""
    main = row.main
    text = "n/a" if main.rate is None else f"{main.rate:.3f}"
    if row.significant and row.right_entity is not None and row.right_entity.rate is not None:
        text += f" ({row.right_entity.rate:.3f})"
    return text


def robustness_table(report: RobustnessReport) -> Table:
    """The table: one line per perturbation type, per metric D (right entity) or R.

    With two target variants each metric has a column per variant side by side
    (``spec-errors [mesh]``, ``spec-errors [engine]``) and ``n`` gives both counts (``mesh/engine``).
    Each metric's signature is kept as a comment.
    """
    ms, vs = report.metrics, report.variants
    two = len(vs) > 1
    columns = [Column("type", "left"), Column("sig.", "left", keep=1), Column("n " + "/".join(vs) if two else "n", keep=2)]
    columns += [Column(f"{m} [{v}]" if two else m, keep=3) for m in ms for v in vs]
    rows = []
    types = [t for t in ALL_TYPES if t in report.counts] + ["overall-significant", "overall-insignificant"]
    for t in types:
        by = {(r.metric, r.targets): r for r in report.rows if r.perturbation == t}
        if not by:
            continue
        first = next(iter(by.values()))
        ns = "/".join(str(next((r.n for (m, v), r in by.items() if v == x), 0)) for x in vs)
        rows.append([t, "yes" if first.significant else "no", ns, *(cell_text(by.get((m, v))) for m in ms for v in vs)])
    comments = [f"{m}: {sig}" for m, sig in report.signatures.items()]
    return Table(columns, rows, title=f"Discrimination and robustness on {report.suite}", comments=comments, note="all in --out")


#: The writers :func:`format_table` offers.
TABLE_FORMATS = {"markdown": to_markdown, "latex": to_latex, "csv": to_csv, "json": to_json}


def format_table(report: RobustnessReport, fmt: str = "markdown") -> str:
    """:func:`robustness_table` in one of :data:`TABLE_FORMATS` (Markdown by default)."""
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; one of {', '.join(TABLE_FORMATS)}")
    return TABLE_FORMATS[fmt](robustness_table(report))
