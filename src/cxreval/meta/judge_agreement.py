"""Where two engines judge the same pairs differently: the rule engine against an LLM engine,
entity by entity, before a team trusts either.

Both engines judge every pair; an entity a judgement table has no row for is TN (neither report
states it). Per entity, over the pairs scored by both: how many pairs either engine lists it on,
how often their presence verdicts (TP / FP / FN / TN) agree there, Cohen's kappa of the presence
verdicts over all pairs, and how often they count the same number of errors for it. Each
disagreement is a row of ``disagreements.csv`` with both verdicts and both engines' evidence;
``cxreval meta judge-agreement --review-db`` draws a sample of the disagreeing pairs into a review
database, where reviewers settle which engine read the pair right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from cxreval.judge.models import EntityJudgement, row_errors
from cxreval.ontology import Ontology
from cxreval.render import Column, Table, number
from cxreval.scores.resampling import cohens_kappa
from cxreval.scores.signature import Signature

#: A row's verdict as one text: presence, then the attributes and specificity it judges.
Verdict = tuple[str, str, str, str, str]
_TN: Verdict = ("TN", "not-available", "not-available", "other", "exact")


def _verdict(row: EntityJudgement | None) -> Verdict:
    if row is None:
        return _TN
    return (row.presence, row.location, row.severity, row.comparison, row.specificity)


def _errors(v: Verdict) -> int:
    return row_errors(v[0], v[1], v[2], v[3], v[4])


class EntityAgreement(BaseModel):
    """How two engines agree on one entity."""

    model_config = ConfigDict(frozen=True)

    entity: str
    name: str
    listed: int
    """Pairs on which either engine gives a verdict other than TN."""
    presence_agree: int
    """Of those, pairs on which both give the same presence verdict."""
    errors_agree: int
    """Of those, pairs on which both count the same number of errors for the entity."""
    kappa: float | None
    """Cohen's kappa of the presence verdicts over every pair both scored (None: undefined)."""

    @property
    def presence_agreement(self) -> float | None:
        return self.presence_agree / self.listed if self.listed else None

    @property
    def error_agreement(self) -> float | None:
        return self.errors_agree / self.listed if self.listed else None


class Disagreement(BaseModel):
    """One pair and entity the two engines judge differently (presence, an attribute or the specificity)."""

    model_config = ConfigDict(frozen=True)

    pair_id: str
    entity: str
    first: Verdict
    second: Verdict
    first_evidence: tuple[str, str]
    second_evidence: tuple[str, str]


class JudgeAgreement(BaseModel):
    """Per-entity agreement of two engines on the pairs both scored, and every disagreement."""

    model_config = ConfigDict(frozen=True)

    first: str
    second: str
    n_pairs: int
    entities: list[EntityAgreement]
    disagreements: list[Disagreement]
    signature: str

    @property
    def disagreeing_pairs(self) -> list[str]:
        """Pairs with at least one disagreement, in the order of the pairs."""
        return list(dict.fromkeys(d.pair_id for d in self.disagreements))


@dataclass(frozen=True)
class _Side:
    rows: dict[tuple[str, str], EntityJudgement]

    @classmethod
    def of(cls, rows: Sequence[EntityJudgement]) -> _Side:
        return cls({(r.pair_id, r.entity): r for r in rows})

    def get(self, pair_id: str, entity: str) -> EntityJudgement | None:
        return self.rows.get((pair_id, entity))


def judge_agreement(
    first: Sequence[EntityJudgement],
    second: Sequence[EntityJudgement],
    pair_ids: Sequence[str],
    ontology: Ontology,
    *,
    names: tuple[str, str],
    signatures: tuple[Signature, Signature],
) -> JudgeAgreement:
    """Compare two engines' judgement rows over ``pair_ids`` (the pairs both scored). The signature
    names both engines (``rules@...~llm-pairwise@...``), the second one's model and prompt, and
    each engine's options prefixed by its name."""
    a, b = _Side.of(first), _Side.of(second)
    entities, disagreements = [], []
    for e in ontology.entities:
        verdicts = [(p, _verdict(a.get(p, e.id)), _verdict(b.get(p, e.id))) for p in pair_ids]
        listed = [(p, va, vb) for p, va, vb in verdicts if va[0] != "TN" or vb[0] != "TN"]
        for p, va, vb in listed:
            if va != vb:
                ra, rb = a.get(p, e.id), b.get(p, e.id)
                disagreements.append(
                    Disagreement(
                        pair_id=p,
                        entity=e.id,
                        first=va,
                        second=vb,
                        first_evidence=(ra.reference, ra.candidate) if ra else ("", ""),
                        second_evidence=(rb.reference, rb.candidate) if rb else ("", ""),
                    )
                )
        if not listed:
            continue
        kappa = cohens_kappa([va[0] for _, va, _ in verdicts], [vb[0] for _, _, vb in verdicts]).kappa
        entities.append(
            EntityAgreement(
                entity=e.id,
                name=e.name,
                listed=len(listed),
                presence_agree=sum(va[0] == vb[0] for _, va, vb in listed),
                errors_agree=sum(_errors(va) == _errors(vb) for _, va, vb in listed),
                kappa=kappa,
            )
        )
    order = {p: i for i, p in enumerate(pair_ids)}
    disagreements.sort(key=lambda d: (order[d.pair_id], d.entity))
    options = {f"{name}.{k}": v for name, sig in zip(names, signatures, strict=True) for k, v in sig.options.items()}
    sig = Signature(
        metric="judge-agreement",
        ontology=ontology.signature,
        engine=f"{signatures[0].engine}~{signatures[1].engine}",
        model=signatures[1].model,
        prompt=signatures[1].prompt,
        options={"first": names[0], "second": names[1], **options},
    )
    return JudgeAgreement(
        first=names[0],
        second=names[1],
        n_pairs=len(pair_ids),
        entities=sorted(entities, key=lambda x: (-x.listed, x.entity)),
        disagreements=disagreements,
        signature=str(sig),
    )


def agreement_table(result: JudgeAgreement, top: int | None = None) -> Table:
    """Per entity: pairs listed, presence agreement, error agreement, kappa (most listed first)."""
    columns = [
        Column("entity", "left"),
        Column("pairs listed", keep=5),
        Column("presence agree", keep=4),
        Column("errors agree", keep=3),
        Column("kappa", keep=2),
    ]
    shown = result.entities if top is None else result.entities[:top]
    rows = [[e.name, str(e.listed), number(e.presence_agreement), number(e.error_agreement), number(e.kappa)] for e in shown]
    title = f"{result.first} against {result.second} on {result.n_pairs} pairs ({len(result.disagreeing_pairs)} disagree)"
    return Table(columns, rows, title=title, signature=result.signature, note="all in agreement.csv")


def entity_rows(result: JudgeAgreement) -> list[list[object]]:
    """``agreement.csv``: a header, then one row per entity (unrounded)."""
    head: list[object] = ["entity", "name", "pairs_listed", "presence_agree", "presence_agreement"]
    head += ["errors_agree", "error_agreement", "kappa", "signature"]
    rows = [head]
    for e in result.entities:
        rows.append(
            [
                e.entity,
                e.name,
                e.listed,
                e.presence_agree,
                e.presence_agreement,
                e.errors_agree,
                e.error_agreement,
                e.kappa,
                result.signature,
            ]
        )
    return rows


def disagreement_rows(result: JudgeAgreement) -> list[list[object]]:
    """``disagreements.csv``: a header, then one row per pair and entity the engines judge differently."""
    fields = ("presence", "location", "severity", "comparison", "specificity")
    head: list[object] = ["pair_id", "entity"]
    for side in (result.first, result.second):
        head += [f"{side}_{f}" for f in fields] + [f"{side}_reference_evidence", f"{side}_candidate_evidence"]
    rows = [head]
    for d in result.disagreements:
        rows.append([d.pair_id, d.entity, *d.first, *d.first_evidence, *d.second, *d.second_evidence])
    return rows
