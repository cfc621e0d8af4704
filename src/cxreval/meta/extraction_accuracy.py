"""Accuracy of an extractor against a gold standard of expected entities per report.

Used with the IU X-ray MeSH gold standard (:mod:`cxreval.datasets.iu_xray`). Only entities that
the gold standard can express (targets of the ontology's ``mesh`` mapping) are scored: the
coders had no code for the rest, so a mention of them is neither right nor wrong here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from cxreval.datasets.iu_xray import GoldReport, load_families
from cxreval.extract.models import CERTAINTY_POLICIES, EntityState, Extraction
from cxreval.literals import UncertainPolicy
from cxreval.ontology import Ontology
from cxreval.scores.entity import AttributeScore, PresenceScore


class EntityAccuracy(BaseModel):
    model_config = ConfigDict(frozen=True)

    entity: str
    name: str
    presence: PresenceScore


class LabelSetAccuracy(BaseModel):
    """Presence agreement after projecting entities onto an external label set."""

    model_config = ConfigDict(frozen=True)

    labelset: str
    labels: dict[str, PresenceScore]
    micro: PresenceScore
    macro_f1: float | None
    n_labels_macro: int


class Example(BaseModel):
    model_config = ConfigDict(frozen=True)

    uid: str
    sentence: str


class Confusion(BaseModel):
    """A frequent disagreement: ``kind`` FN (missed) or FP (false alarm) for one entity."""

    model_config = ConfigDict(frozen=True)

    entity: str
    kind: str
    count: int
    examples: list[Example]


class ExtractionAccuracy(BaseModel):
    model_config = ConfigDict(frozen=True)

    data: str
    n_reports: int
    min_support: int
    uncertain: str
    engine: str
    ontology: str
    universe: int
    entities: list[EntityAccuracy]
    micro: PresenceScore
    macro_f1: float | None
    labelsets: list[LabelSetAccuracy]
    side: AttributeScore
    severity: AttributeScore
    normal: PresenceScore
    confusions: list[Confusion]


def mesh_universe(ontology: Ontology, labelset: str = "mesh") -> list[str]:
    """Entities that some MeSH code maps to, in ontology order."""
    return [e.id for e in ontology.entities if e.mappings.get(labelset)]


#: Which hedged mentions count as the coders' positives: a named certainty policy of the judge
#: (``positive``, ``negative``, ``probable``, ``probable-alternative``: which hedge grades count,
#: :data:`cxreval.extract.models.CERTAINTY_POLICIES`), or a set of grades
#: (``benchmarks/iu_certainty.py`` scores every set). The engine grades each hedge once
#: (``extract/rules/cues.yaml``); the benchmark keeps no hedge list of its own.
GoldPolicy = UncertainPolicy

#: The policy the IU X-ray benchmark reads the coders with: the grade set that matches them best
#: on the train split (``python benchmarks/iu_certainty.py``; with ``rules@5.c10``: definite +
#: probable + alternative, presence micro-F1 0.931 on train, against 0.921 for ``probable``,
#: 0.917 for ``negative``, 0.904 for ``positive``).
CODERS_POLICY: GoldPolicy = "probable-alternative"


def counts_as_positive(state: EntityState, policy: GoldPolicy | frozenset[str] = CODERS_POLICY) -> bool:
    """Whether an entity state counts as the coders' positive: present always, absent never, a
    hedge when the policy counts its certainty grade (a named policy's grades, or the given set).
    """
    if state.status == "present":
        return True
    if state.status != "uncertain":
        return False
    grades = policy if isinstance(policy, frozenset) else CERTAINTY_POLICIES[policy]
    return state.certainty in grades


def match_report(
    report: GoldReport,
    states: dict[str, EntityState],
    universe: set[str],
    policy: GoldPolicy | frozenset[str] = CODERS_POLICY,
) -> tuple[set[str], set[str], dict[str, str]]:
    """The engine's affirmed entities, its scored predictions, and family substitutions.

    A generic code is matched by any entity of its family (``GoldEntity.accept``); the matched
    entity is credited to the coded one (``substitutes[coded] = found``) and is not a false alarm.
    """
    affirmed = {e for e, s in states.items() if counts_as_positive(s, policy)}
    substitutes: dict[str, str] = {}
    for e, g in report.entities.items():
        if e not in affirmed:
            hit = next((a for a in g.accept if a in affirmed and a not in report.entities), None)
            if hit is not None:
                substitutes[e] = hit
    explained = set(substitutes.values())
    pred = {e for e in affirmed if e in universe and e not in explained} | set(substitutes)
    return affirmed, pred, substitutes


class Disagreement(BaseModel):
    """One (report, entity) where engine and coders differ, with what each side had."""

    model_config = ConfigDict(frozen=True)

    uid: str
    kind: str
    entity: str
    codes: list[str]
    evidence: str


def disagreements(
    gold: Sequence[GoldReport],
    extract: Callable[[str], Extraction],
    ontology: Ontology,
    *,
    uncertain: GoldPolicy | frozenset[str] = CODERS_POLICY,
) -> list[Disagreement]:
    """Every FP and FN of ``extract`` against ``gold``, in report order."""
    universe = set(mesh_universe(ontology))
    out: list[Disagreement] = []
    for report in gold:
        states = extract(report.text).states()
        _, pred, _ = match_report(report, states, universe, uncertain)
        expected = set(report.entities)
        codes = [c for g in report.entities.values() for c in g.codes]
        for e in sorted(expected ^ pred):
            state = states.get(e)
            evidence = state.evidence if state and state.evidence else "(no mention) " + report.text
            out.append(
                Disagreement(uid=report.uid, kind="FN" if e in expected else "FP", entity=e, codes=codes, evidence=evidence)
            )
    return out


def _counts(gold: set[str], pred: set[str], universe: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    out = {}
    for e in universe:
        g, p = e in gold, e in pred
        out[e] = (int(g and p), int(p and not g), int(g and not p))
    return out


def _presence(counts: Sequence[int], n: int) -> PresenceScore:
    """Presence scores of ``counts`` (TP, FP, FN) out of ``n`` decisions (the rest are TN)."""
    tp, fp, fn = counts
    return PresenceScore(tp=tp, fp=fp, fn=fn, tn=n - tp - fp - fn)


def evaluate_extraction(
    gold: Sequence[GoldReport],
    extract: Callable[[str], Extraction],
    ontology: Ontology,
    *,
    data: str,
    engine: str,
    uncertain: GoldPolicy | frozenset[str] = CODERS_POLICY,
    min_support: int = 10,
    labelsets: Sequence[str] = ("chexpert14", "chestxray14"),
    max_examples: int = 3,
    top_confusions: int = 15,
) -> ExtractionAccuracy:
    """Score ``extract`` on ``gold``: per-entity, micro/macro, projections, attributes, normals."""
    universe = mesh_universe(ontology)
    in_universe = set(universe)
    # An entity that a generic heading covers (a port under "Catheters, Indwelling") makes a report
    # abnormal too, though no MeSH pattern of its own names it.
    abnormal = in_universe | {e for members in load_families().values() for e in members}
    n = len(gold)
    totals: dict[str, list[int]] = {e: [0, 0, 0] for e in universe}
    side = [0, 0, 0]  # correct, judged, not-available
    severity = [0, 0, 0]
    normal = [0, 0, 0]  # tp, fp, fn with "normal study" as the positive class
    label_counts: dict[str, dict[str, list[int]]] = {ls: defaultdict(lambda: [0, 0, 0]) for ls in labelsets}
    examples: dict[tuple[str, str], list[Example]] = defaultdict(list)
    confusion_counts: Counter[tuple[str, str]] = Counter()

    for report in gold:
        states: dict[str, EntityState] = extract(report.text).states()
        affirmed, pred, substitutes = match_report(report, states, in_universe, uncertain)
        expected = set(report.entities)
        for e, (tp, fp, fn) in _counts(expected, pred, universe).items():
            t = totals[e]
            t[0] += tp
            t[1] += fp
            t[2] += fn
            if fp or fn:
                kind = "FP" if fp else "FN"
                confusion_counts[(e, kind)] += 1
                if len(examples[(e, kind)]) < max_examples:
                    state = states.get(e)
                    sentence = state.evidence if state and state.evidence else "(no mention) " + report.text[:160]
                    examples[(e, kind)].append(Example(uid=report.uid, sentence=sentence))
            if tp:
                g, p = report.entities[e], states[substitutes.get(e, e)]
                _attribute(side, g.side, p.side)
                _attribute(severity, g.severity, p.severity)
        pred_normal = not (affirmed & abnormal)
        normal[0] += int(report.normal and pred_normal)
        normal[1] += int(pred_normal and not report.normal)
        normal[2] += int(report.normal and not pred_normal)
        for ls in labelsets:
            g_labels = _project(expected, ontology, ls)
            p_labels = _project(pred, ontology, ls)
            for label in g_labels | p_labels:
                c = label_counts[ls][label]
                c[0] += int(label in g_labels and label in p_labels)
                c[1] += int(label in p_labels and label not in g_labels)
                c[2] += int(label in g_labels and label not in p_labels)

    entity_rows = [
        EntityAccuracy(entity=e, name=ontology.entity(e).name, presence=_presence(totals[e], n))
        for e in universe
        if totals[e][0] + totals[e][2] >= min_support
    ]
    micro = _presence([sum(t[i] for t in totals.values()) for i in range(3)], n * len(universe))
    f1s = [r.presence.f1 for r in entity_rows if r.presence.f1 is not None]
    ls_rows = []
    for ls in labelsets:
        labels = {k: _presence(v, n) for k, v in sorted(label_counts[ls].items())}
        supported = [p.f1 for p in labels.values() if p.support >= min_support and p.f1 is not None]
        ls_rows.append(
            LabelSetAccuracy(
                labelset=ls,
                labels=labels,
                micro=_presence([sum(v[i] for v in label_counts[ls].values()) for i in range(3)], n * len(labels)),
                macro_f1=sum(supported) / len(supported) if supported else None,
                n_labels_macro=len(supported),
            )
        )
    confusions = [
        Confusion(entity=e, kind=k, count=c, examples=examples[(e, k)])
        for (e, k), c in confusion_counts.most_common(top_confusions)
    ]
    return ExtractionAccuracy(
        data=data,
        n_reports=n,
        min_support=min_support,
        uncertain=uncertain if isinstance(uncertain, str) else "+".join(sorted(uncertain)) or "none",
        engine=engine,
        ontology=ontology.signature,
        universe=len(universe),
        entities=entity_rows,
        micro=micro,
        macro_f1=sum(f1s) / len(f1s) if f1s else None,
        labelsets=ls_rows,
        side=AttributeScore(correct=side[0], judged=side[1], not_available=side[2]),
        severity=AttributeScore(correct=severity[0], judged=severity[1], not_available=severity[2]),
        normal=_presence(normal, n),
        confusions=confusions,
    )


def _attribute(acc: list[int], gold: str | None, pred: str | None) -> None:
    if gold is None or pred is None:
        acc[2] += 1
        return
    acc[1] += 1
    acc[0] += int(gold == pred)


def _project(entities: set[str], ontology: Ontology, labelset: str) -> set[str]:
    labels: set[str] = set()
    for e in entities:
        labels.update(ontology.entity(e).mappings.get(labelset, ()))
    return labels
