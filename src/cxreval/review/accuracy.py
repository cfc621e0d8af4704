"""The engine's accuracy against reviewers, re-weighted for the sampling; agreement between
reviewers; the entities the engine gets wrong most often.

What counts (docs/review.md):

- An *observation* is one reviewer's verdict on one field of one entity of a pair that reviewer
  marked checked. The engine's value is its judgement row, or, for an entity the reviewer added
  (the engine gave no row), "mentioned in neither report" (TN, not-available, other).
- presence counts on every observation; location, severity and comparison only on entities that
  have the attribute in the ontology and that the engine or the reviewer judged present in at
  least one report (where both say TN, no attribute can be stated).
- A pair reviewed by several reviewers gives one observation per reviewer: each reading is
  evidence about the engine.

Estimates: *unweighted* accuracy = correct / observations with an exact Clopper-Pearson
interval (:func:`cxreval.scores.resampling.clopper_pearson`, beta quantiles); *weighted* accuracy is the
Horvitz-Thompson ratio estimate sum(w_p correct_p) / sum(w_p observations_p), where w_p = N_h /
r_h (pairs in the pair's stratum / pairs of it reviewed so far, so a sample reviewed only in
part is still weighted right), with a percentile interval from a stratified bootstrap over the
reviewed pairs (seeded; settings in each signature). Kappas are :mod:`cxreval.scores.resampling`'s too.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from cxreval.render import Column, Table, number
from cxreval.render import to_latex as to_latex_table
from cxreval.review.db import FIELDS, IMPLICIT, EntityInfo, ReviewDB
from cxreval.scores.resampling import clopper_pearson, cohens_kappa, fleiss_kappa
from cxreval.scores.signature import Signature

#: SPEC-CXR's own validation (two reviewers, 50 pairs; MICCAI 2025, section 3.4): accuracy per field.
SPEC_CXR_REPORTED = {"presence": 0.918, "location": 0.872, "severity": 0.845, "comparison": 0.753}


@dataclass(frozen=True)
class Observation:
    """One reviewer's verdict on one field of one entity, beside the engine's."""

    pair_id: str
    reviewer: str
    entity: str
    field: str
    engine: str
    reviewer_value: str
    weight: float
    stratum: str

    @property
    def correct(self) -> bool:
        return self.engine == self.reviewer_value


class FieldAccuracy(BaseModel):
    """The engine's accuracy on one field: unweighted with an exact interval, weighted with a
    bootstrap interval; each with its signature."""

    field: str
    observations: int
    correct: int
    pairs: int
    accuracy: float | None
    low: float | None
    high: float | None
    signature: str
    weighted_accuracy: float | None
    weighted_low: float | None
    weighted_high: float | None
    weighted_signature: str
    spec_cxr_reported: float


class Agreement(BaseModel):
    """Agreement between reviewers on one field, on the pairs reviewed more than once."""

    field: str
    method: str
    raters: int
    items: int
    observed: float | None
    kappa: float | None
    signature: str


class Example(BaseModel):
    """One disagreement between the engine and a reviewer, with the evidence and the note."""

    pair_id: str
    reviewer: str
    field: str
    engine: str
    reviewer_value: str
    reference_evidence: str
    candidate_evidence: str
    note: str


class EntityErrors(BaseModel):
    """An entity the engine gets wrong: errors per field, weighted error count, examples."""

    entity: str
    name: str
    critical: bool
    observations: int
    errors: int
    weighted_errors: float
    by_field: dict[str, int]
    examples: list[Example]
    signature: str


class ReviewStats(BaseModel):
    """Everything ``cxreval review stats`` reports."""

    database: str
    reviewers: list[str]
    pairs_sampled: int
    pairs_reviewed: int
    pairs_in_results: int
    pairs_represented: int
    reviews: int
    settings: dict[str, str]
    fields: list[FieldAccuracy]
    agreement: list[Agreement]
    worst_entities: list[EntityErrors]

    def without_text(self) -> ReviewStats:
        """These statistics with no report text, to share them (``--no-text``): each example keeps
        its pair id, reviewer, field and both values, and loses the evidence sentences and the
        reviewer's note (which may quote the report). Every number is unchanged."""
        bare = {"reference_evidence": "", "candidate_evidence": "", "note": ""}
        worst = [e.model_copy(update={"examples": [x.model_copy(update=bare) for x in e.examples]}) for e in self.worst_entities]
        return self.model_copy(update={"worst_entities": worst, "settings": {**self.settings, "report_text": "left out"}})


# -- observations ------------------------------------------------------------------------------


def applicable(field: str, entity: EntityInfo | None, engine_presence: str, reviewer_presence: str) -> bool:
    """Whether a field counts on an entity (module docstring): presence always; an attribute only
    where the entity has it and one side judged the entity present somewhere."""
    if field == "presence":
        return True
    if entity is None or field not in entity.attributes:
        return False
    return engine_presence != "TN" or reviewer_presence != "TN"


def observations(db: ReviewDB, reviewers: Sequence[str] | None = None) -> list[Observation]:
    """Every observation of the checked (reviewer, pair)s, optionally of some reviewers only."""
    pairs = {p.pair_id: p for p in db.pairs()}
    entities = db.entities()
    weights = effective_weights(db)
    engine: dict[tuple[str, str], dict[str, str]] = {
        (r.pair_id, r.entity): {f: getattr(r, f) for f in FIELDS} for r in db.engine_rows()
    }
    checked = db.checked()
    out: list[Observation] = []
    for a in db.answers():
        if (a.reviewer, a.pair_id) not in checked or (reviewers and a.reviewer not in reviewers):
            continue
        mine = {f: getattr(a, f) for f in FIELDS}
        theirs = engine.get((a.pair_id, a.entity), IMPLICIT)
        for f in FIELDS:
            if applicable(f, entities.get(a.entity), theirs["presence"], mine["presence"]):
                out.append(
                    Observation(
                        a.pair_id, a.reviewer, a.entity, f, theirs[f], mine[f], weights[a.pair_id], pairs[a.pair_id].stratum
                    )
                )
    return out


def effective_weights(db: ReviewDB) -> dict[str, float]:
    """Per sampled pair, N_h / r_h: stratum size over the stratum's pairs checked by anyone
    (0 for pairs nobody has checked)."""
    pairs = db.pairs()
    reviewed = {pid for _, pid in db.checked()}
    per_stratum = Counter(p.stratum for p in pairs if p.pair_id in reviewed)
    size = {s["key"]: s["size"] for s in db.strata()}
    return {p.pair_id: (size[p.stratum] / per_stratum[p.stratum] if p.pair_id in reviewed else 0.0) for p in pairs}


# -- accuracy ----------------------------------------------------------------------------------


def weighted_accuracy(
    obs: Sequence[Observation], *, resamples: int, seed: int, confidence: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """Horvitz-Thompson ratio estimate and its stratified-bootstrap percentile interval.

    The bootstrap resamples reviewed pairs with replacement within each sampling stratum (the
    design the sample was drawn with), keeping each pair's observations together.
    """
    per_pair: dict[str, list[float]] = {}
    stratum_of: dict[str, str] = {}
    for o in obs:
        k_n_w = per_pair.setdefault(o.pair_id, [0.0, 0.0, o.weight])
        k_n_w[0] += o.correct
        k_n_w[1] += 1
        stratum_of[o.pair_id] = o.stratum
    if not per_pair:
        return None, None, None
    ids = sorted(per_pair)
    k = np.array([per_pair[i][0] for i in ids])
    n = np.array([per_pair[i][1] for i in ids])
    w = np.array([per_pair[i][2] for i in ids])
    estimate = float((w * k).sum() / (w * n).sum())
    if resamples <= 0:
        return estimate, None, None
    rng = np.random.default_rng(seed)
    num = np.zeros(resamples)
    den = np.zeros(resamples)
    for stratum in sorted(set(stratum_of.values())):
        members = np.array([j for j, i in enumerate(ids) if stratum_of[i] == stratum])
        picks = members[rng.integers(0, len(members), size=(resamples, len(members)))]
        num += (w[picks] * k[picks]).sum(axis=1)
        den += (w[picks] * n[picks]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = num / den
    values = values[np.isfinite(values)]
    alpha = (1 - confidence) / 2
    return estimate, float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def _interval(k: int, n: int, confidence: float) -> tuple[float | None, float | None]:
    """Clopper-Pearson interval of k / n as floats; (None, None) when n is 0."""
    if n == 0:
        return None, None
    low, high = clopper_pearson(k, n, confidence)
    return float(low), float(high)


# -- agreement ---------------------------------------------------------------------------------


def agreement(db: ReviewDB, base: Signature) -> list[Agreement]:
    """Per field, agreement between reviewers on the pairs checked by two or more of them:
    Cohen's kappa when the same two reviewers rated every item, Fleiss' kappa otherwise (on
    the items with the most common number of raters)."""
    checkers: dict[str, list[str]] = defaultdict(list)
    for reviewer, pid in sorted(db.checked()):
        checkers[pid].append(reviewer)
    multi = {pid: rs for pid, rs in checkers.items() if len(rs) >= 2}
    entities = db.entities()
    engine = {(r.pair_id, r.entity): {f: getattr(r, f) for f in FIELDS} for r in db.engine_rows()}
    answers = {(a.reviewer, a.pair_id, a.entity): {f: getattr(a, f) for f in FIELDS} for a in db.answers()}
    out = []
    for f in FIELDS:
        items: list[tuple[tuple[str, ...], list[str]]] = []
        for pid, raters in sorted(multi.items()):
            names = sorted({e for (r, p, e) in answers if p == pid and r in raters} | {e for p, e in engine if p == pid})
            for e in names:
                eng = engine.get((pid, e), IMPLICIT)
                values = [answers.get((r, pid, e), IMPLICIT) for r in raters]
                if f != "presence" and not any(applicable(f, entities.get(e), eng["presence"], v["presence"]) for v in values):
                    continue
                items.append((tuple(raters), [v[f] for v in values]))
        sig = base.with_metric("review-kappa").model_copy(update={"options": {**base.options, "field": f}})
        if not items:
            out.append(Agreement(field=f, method="none", raters=0, items=0, observed=None, kappa=None, signature=str(sig)))
            continue
        m = Counter(len(r) for r, _ in items).most_common(1)[0][0]
        used = [(r, v) for r, v in items if len(r) == m]
        observed = sum(len(set(v)) == 1 for _, v in used) / len(used)
        people = {r for r, _ in used}
        if m == 2 and len(people) == 1:
            kappa, method = cohens_kappa([v[0] for _, v in used], [v[1] for _, v in used]).kappa, "cohen"
        else:
            kappa, method = fleiss_kappa([v for _, v in used]).kappa, "fleiss"
        sig = sig.model_copy(update={"options": {**sig.options, "kappa": method}})
        out.append(
            Agreement(field=f, method=method, raters=m, items=len(used), observed=observed, kappa=kappa, signature=str(sig))
        )
    return out


# -- everything --------------------------------------------------------------------------------


def review_stats(
    db: ReviewDB,
    *,
    resamples: int = 2000,
    seed: int | None = None,
    confidence: float = 0.95,
    top: int = 10,
    examples: int = 3,
    reviewers: Sequence[str] | None = None,
) -> ReviewStats:
    """The engine's accuracy per field (unweighted and weighted), reviewer agreement, and the
    entities most often wrong; every number signed."""
    meta = db.meta()
    base = Signature.parse(meta["results_signature"])
    boot_seed = int(meta["seed"]) if seed is None else seed
    common = {"sample_seed": meta["seed"], "sample_n": meta["n_sampled"], "strata": "presence-group"}
    base = base.model_copy(update={"options": {**base.options, **common}})
    obs = observations(db, reviewers)
    accuracies = []
    for f in FIELDS:
        mine = [o for o in obs if o.field == f]
        k, n = sum(o.correct for o in mine), len(mine)
        low, high = _interval(k, n, confidence)
        w_est, w_low, w_high = weighted_accuracy(mine, resamples=resamples, seed=boot_seed, confidence=confidence)
        plain = base.with_metric("review-accuracy").model_copy(
            update={
                "options": {
                    **base.options,
                    "field": f,
                    "weights": "none",
                    "ci": "clopper-pearson",
                    "confidence": f"{confidence:g}",
                }
            }
        )
        weighted = (
            base.with_metric("review-accuracy")
            .model_copy(update={"options": {**base.options, "field": f, "weights": "horvitz-thompson"}})
            .with_intervals(method="bootstrap-percentile-stratified", resamples=resamples, seed=boot_seed, confidence=confidence)
        )
        accuracies.append(
            FieldAccuracy(
                field=f,
                observations=n,
                correct=k,
                pairs=len({o.pair_id for o in mine}),
                accuracy=k / n if n else None,
                low=low,
                high=high,
                signature=str(plain),
                weighted_accuracy=w_est,
                weighted_low=w_low,
                weighted_high=w_high,
                weighted_signature=str(weighted),
                spec_cxr_reported=SPEC_CXR_REPORTED[f],
            )
        )
    checked = db.checked()
    reviewed = {pid for r, pid in checked if not reviewers or r in reviewers}
    pairs = db.pairs()
    strata_reviewed = {p.stratum for p in pairs if p.pair_id in reviewed}
    represented = sum(s["size"] for s in db.strata() if s["key"] in strata_reviewed)
    return ReviewStats(
        database=str(db.path),
        reviewers=sorted({r for r, _ in checked if not reviewers or r in reviewers}),
        pairs_sampled=len(pairs),
        pairs_reviewed=len(reviewed),
        pairs_in_results=int(meta["n_pairs"]),
        pairs_represented=represented,
        reviews=sum(1 for r, _ in checked if not reviewers or r in reviewers),
        settings={
            "confidence": f"{confidence:g}",
            "bootstrap_resamples": str(resamples),
            "bootstrap_seed": str(boot_seed),
            "sample_seed": meta["seed"],
            "critical_boost": meta["critical_boost"],
            "results_signature": meta["results_signature"],
        },
        fields=accuracies,
        agreement=agreement(db, base),
        worst_entities=worst_entities(db, obs, base, top=top, examples=examples),
    )


def worst_entities(
    db: ReviewDB, obs: Sequence[Observation], base: Signature, *, top: int = 10, examples: int = 3
) -> list[EntityErrors]:
    """The entities with the largest weighted count of wrong fields, with a few examples each."""
    entities = db.entities()
    evidence = {(r.pair_id, r.entity): (r.reference_evidence, r.candidate_evidence) for r in db.engine_rows()}
    notes = db.notes()
    by_entity: dict[str, list[Observation]] = defaultdict(list)
    for o in obs:
        by_entity[o.entity].append(o)
    out = []
    for e, mine in by_entity.items():
        wrong = [o for o in mine if not o.correct]
        if not wrong:
            continue
        info = entities.get(e)
        sig = base.with_metric("review-errors").model_copy(
            update={"options": {**base.options, "entity": e, "weights": "horvitz-thompson"}}
        )
        out.append(
            EntityErrors(
                entity=e,
                name=info.name if info else e,
                critical=bool(info and info.critical),
                observations=len(mine),
                errors=len(wrong),
                weighted_errors=sum(o.weight for o in wrong),
                by_field={f: sum(o.field == f for o in wrong) for f in FIELDS},
                examples=[
                    Example(
                        pair_id=o.pair_id,
                        reviewer=o.reviewer,
                        field=o.field,
                        engine=o.engine,
                        reviewer_value=o.reviewer_value,
                        reference_evidence=evidence.get((o.pair_id, e), ("", ""))[0],
                        candidate_evidence=evidence.get((o.pair_id, e), ("", ""))[1],
                        note=notes.get((o.reviewer, o.pair_id), ""),
                    )
                    for o in wrong[:examples]
                ],
                signature=str(sig),
            )
        )
    out.sort(key=lambda x: (-x.weighted_errors, -x.errors, x.entity))
    return out[:top]


# -- rendering ---------------------------------------------------------------------------------


def _ci(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "n/a"
    pct = f"{100 * value:.1f}"
    return pct if low is None or high is None else f"{pct} [{100 * low:.1f}, {100 * high:.1f}]"


def to_csv(stats: ReviewStats) -> str:
    """One row per number: section, field or entity, value, interval, counts, method, signature."""
    from cxreval.io.writers import csv_text

    rows: list[list[float | int | str | None]] = [["section", "name", "value", "low", "high", "n", "k", "method", "signature"]]
    for a in stats.fields:
        rows.append(["accuracy", a.field, a.accuracy, a.low, a.high, a.observations, a.correct, "clopper-pearson", a.signature])
        rows.append(
            [
                "weighted_accuracy",
                a.field,
                a.weighted_accuracy,
                a.weighted_low,
                a.weighted_high,
                a.observations,
                a.correct,
                "horvitz-thompson+bootstrap",
                a.weighted_signature,
            ]
        )
    for g in stats.agreement:
        rows.append(["kappa", g.field, g.kappa, None, None, g.items, None, g.method, g.signature])
    for e in stats.worst_entities:
        rows.append(
            ["entity_errors", e.entity, e.weighted_errors, None, None, e.observations, e.errors, "horvitz-thompson", e.signature]
        )
    return csv_text(rows)


def accuracy_table(stats: ReviewStats) -> Table:
    """SPEC-CXR's validation table: the engine's accuracy per field against the reviewers, with
    intervals, the re-weighted estimate and SPEC-CXR's own figure (per cent)."""
    columns = [
        Column("field", "left", latex="Field"),
        Column("judgements", keep=3, latex="Judgements"),
        Column("correct", keep=1, latex="Correct"),
        Column("accuracy [95% CI]", keep=5, latex=r"Accuracy (\%)"),
        Column("weighted [95% CI]", keep=4, latex=r"Weighted (\%)"),
        Column("SPEC-CXR", keep=2, latex=r"SPEC-CXR (\%)"),
    ]
    rows = [
        [
            a.field,
            str(a.observations),
            str(a.correct),
            _ci(a.accuracy, a.low, a.high),
            _ci(a.weighted_accuracy, a.weighted_low, a.weighted_high),
            f"{100 * a.spec_cxr_reported:.1f}",
        ]
        for a in stats.fields
    ]
    comments = [f"cxreval review stats: {stats.database}"]
    comments += [f"{a.field}: {a.signature}" for a in stats.fields]
    comments += [f"{a.field} weighted: {a.weighted_signature}" for a in stats.fields]
    return Table(columns, rows, title="Engine accuracy against reviewers (%)", note="all in --json", comments=comments)


def reviewer_agreement_table(stats: ReviewStats) -> Table:
    """Agreement between reviewers on the pairs checked twice or more, per field."""
    columns = [
        Column("field", "left"),
        Column("method", "left", keep=1),
        Column("raters", keep=2),
        Column("items", keep=3),
        Column("observed", keep=4),
        Column("kappa", keep=5),
    ]
    rows = [
        [g.field, g.method, str(g.raters), str(g.items), number(g.observed), number(g.kappa)] for g in stats.agreement if g.items
    ]
    return Table(columns, rows, title="Agreement between reviewers (pairs checked twice or more)", note="all in --json")


def entities_table(stats: ReviewStats) -> Table:
    """The entities the engine gets wrong most often, with one example each."""
    columns = [
        Column("entity", "left"),
        Column("wrong / judged", keep=4),
        Column("weighted", keep=3),
        Column("fields", "left", keep=2),
        Column("example", "left", keep=1),
    ]
    rows = []
    for e in stats.worst_entities:
        ex = e.examples[0]
        rows.append(
            [
                e.name + (" (critical)" if e.critical else ""),
                f"{e.errors} / {e.observations}",
                f"{e.weighted_errors:.1f}",
                ", ".join(f"{f} {n}" for f, n in e.by_field.items() if n),
                f"{ex.pair_id}: {ex.field} {ex.engine} -> {ex.reviewer_value}",
            ]
        )
    return Table(columns, rows, title="Entities the engine gets wrong most often", note="all in --json")


def to_latex(stats: ReviewStats) -> str:
    """SPEC-CXR's validation table (:func:`accuracy_table`) as booktabs LaTeX, the database and
    the signatures as comments."""
    table = accuracy_table(stats)
    rows = [[r[0].capitalize(), *r[1:]] for r in table.text_rows()]
    return to_latex_table(Table(table.columns, rows, comments=table.comments))


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>cxreval review: {{ s.database }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: .6em 0 1.4em; } th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; color: #555; word-break: break-all; } .crit { color: #a00; font-weight: 600; }
</style></head><body>
<section id="review">
<h2>Engine accuracy against reviewers</h2>
<p>{{ s.pairs_reviewed }} of {{ s.pairs_sampled }} sampled pairs checked ({{ s.reviews }} reviews by
{{ s.reviewers | join(", ") or "nobody yet" }}); the weighted estimate stands for {{ s.pairs_represented }}
of {{ s.pairs_in_results }} pairs.</p>
<table><tr><th>field</th><th>judgements</th><th>correct</th><th>accuracy % [CI]</th><th>weighted % [CI]</th><th>SPEC-CXR %</th></tr>
{% for a in s.fields %}<tr><td>{{ a.field }}</td><td class="n">{{ a.observations }}</td><td class="n">{{ a.correct }}</td>
<td class="n">{{ ci(a.accuracy, a.low, a.high) }}</td><td class="n">{{ ci(a.weighted_accuracy, a.weighted_low, a.weighted_high) }}</td>
<td class="n">{{ "%.1f" % (100 * a.spec_cxr_reported) }}</td></tr>
{% endfor %}</table>
{% if s.fields %}<p>accuracy: <code>{{ s.fields[0].signature }}</code><br>weighted: <code>{{ s.fields[0].weighted_signature }}</code></p>{% endif %}
{% set rated = s.agreement | selectattr("items") | list %}{% if rated %}
<h3>Agreement between reviewers</h3>
<table><tr><th>field</th><th>method</th><th>raters</th><th>items</th><th>observed</th><th>kappa</th></tr>
{% for g in rated %}<tr><td>{{ g.field }}</td><td>{{ g.method }}</td><td class="n">{{ g.raters }}</td><td class="n">{{ g.items }}</td>
<td class="n">{{ num(g.observed) }}</td><td class="n">{{ num(g.kappa) }}</td></tr>
{% endfor %}</table><p><code>{{ rated[0].signature }}</code></p>{% endif %}
{% if s.worst_entities %}<h3>Entities the engine gets wrong most often</h3>
<table><tr><th>entity</th><th>wrong / judged</th><th>weighted</th><th>example</th></tr>
{% for e in s.worst_entities %}{% set ex = e.examples[0] %}<tr><td{% if e.critical %} class="crit"{% endif %}>{{ e.name }}</td>
<td class="n">{{ e.errors }} / {{ e.observations }}</td><td class="n">{{ "%.1f" % e.weighted_errors }}</td>
<td>{{ ex.pair_id }}: {{ ex.field }} {{ ex.engine }} &rarr; {{ ex.reviewer_value }}{% if ex.reference_evidence %}
<br><small>reference: {{ ex.reference_evidence }}</small>{% endif %}{% if ex.candidate_evidence %}
<br><small>candidate: {{ ex.candidate_evidence }}</small>{% endif %}</td></tr>
{% endfor %}</table>{% endif %}
</section></body></html>
"""


def to_html(stats: ReviewStats) -> str:
    """The review section as a self-contained page (no request leaves it: CSP ``default-src 'none'``)."""
    from jinja2 import Environment

    env = Environment(autoescape=True, trim_blocks=False)
    return env.from_string(_HTML).render(s=stats, ci=_ci, num=lambda v: "n/a" if v is None else f"{v:.3f}")


__all__ = [
    "SPEC_CXR_REPORTED",
    "Agreement",
    "EntityErrors",
    "FieldAccuracy",
    "Observation",
    "ReviewStats",
    "agreement",
    "observations",
    "review_stats",
    "to_csv",
    "to_html",
    "to_latex",
    "accuracy_table",
    "reviewer_agreement_table",
    "entities_table",
    "weighted_accuracy",
]
