"""Entity-level scores from the judgement table (SPEC-CXR section 2).

Presence: precision, recall and F1 per entity, per group, macro and micro. A ratio with a zero
denominator is undefined (``None``), never 0: an entity that no report of either side affirms
has no F1, and averaging it in as 0 or 1 would distort the macro mean. Attribute accuracy
(location, severity, comparison) counts TP rows only, so a missed finding is not penalised
twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from pydantic import BaseModel, ConfigDict, computed_field

from cxreval.judge.models import EntityJudgement
from cxreval.ontology import Ontology
from cxreval.scores.ratios import f1_score, mean_defined, ratio
from cxreval.scores.statistics import ATTRIBUTES


class AttributeScore(BaseModel):
    """Accuracy of one attribute on TP rows: ``correct / judged``; not-available rows aside."""

    model_config = ConfigDict(frozen=True)

    correct: int = 0
    judged: int = 0
    not_available: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        return self.correct / self.judged if self.judged else None


class PresenceScore(BaseModel):
    """Presence counts and the ratios that follow from them."""

    model_config = ConfigDict(frozen=True)

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def support(self) -> int:
        """Reference positives."""
        return self.tp + self.fn

    @computed_field  # type: ignore[prop-decorator]
    @property
    def precision(self) -> float | None:
        return ratio(self.tp, self.tp + self.fp)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recall(self) -> float | None:
        return ratio(self.tp, self.tp + self.fn)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def f1(self) -> float | None:
        return f1_score(self.tp, self.fp, self.fn)


class EntityScore(BaseModel):
    model_config = ConfigDict(frozen=True)

    entity: str
    name: str
    kind: str
    group: str
    presence: PresenceScore
    location: AttributeScore
    severity: AttributeScore
    comparison: AttributeScore


class GroupScore(BaseModel):
    """Counts pooled over a group's entities (micro within the group)."""

    model_config = ConfigDict(frozen=True)

    group: str
    name: str
    n_entities: int
    presence: PresenceScore
    location: AttributeScore
    severity: AttributeScore
    comparison: AttributeScore


class Averages(BaseModel):
    """Macro (mean over entities with a defined value) and micro (pooled counts) averages."""

    model_config = ConfigDict(frozen=True)

    macro_precision: float | None
    macro_recall: float | None
    macro_f1: float | None
    n_entities_f1_defined: int
    n_entities: int
    micro: PresenceScore
    location: AttributeScore
    severity: AttributeScore
    comparison: AttributeScore


def judgement_frame(rows: Sequence[EntityJudgement]) -> pd.DataFrame:
    """The judgement table as a DataFrame (columns as in ``judgements.jsonl``)."""
    cols = ["pair_id", "entity", "presence", "location", "severity", "comparison", "specificity"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=str) for c in cols})
    return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in rows], columns=cols)


def count_table(frame: pd.DataFrame, ontology: Ontology) -> pd.DataFrame:
    """Per-entity counts of judgement rows: TP/FP/FN and, per attribute, correct / judged /
    not-available (:meth:`cxreval.scores.statistics.TableStatistics.entity_counts`, the one
    place they are counted).

    Counts add: the table of a whole set of pairs is the sum of its chunks' tables, which is how
    a streamed evaluation scores pairs it no longer holds (:class:`cxreval.scores.spec_tables.SpecTotals`).
    """
    from cxreval.judge.table import JudgementTable
    from cxreval.scores.statistics import TableStatistics

    pair_ids = list(dict.fromkeys(frame["pair_id"].tolist())) if not frame.empty else []
    return TableStatistics(JudgementTable(pair_ids, frame), ontology).entity_counts()


def _attr(row: pd.Series, attr: str) -> AttributeScore:
    return AttributeScore(
        correct=int(row[f"{attr}_correct"]),
        judged=int(row[f"{attr}_judged"]),
        not_available=int(row[f"{attr}_na"]),
    )


def _presence(row: pd.Series, n_pairs: int) -> PresenceScore:
    tp, fp, fn = int(row["TP"]), int(row["FP"]), int(row["FN"])
    return PresenceScore(tp=tp, fp=fp, fn=fn, tn=n_pairs - tp - fp - fn)


def entity_scores(frame: pd.DataFrame, ontology: Ontology, n_pairs: int) -> list[EntityScore]:
    """One :class:`EntityScore` per ontology entity, in ontology order."""
    return scores_of_counts(count_table(frame, ontology), ontology, n_pairs)


def scores_of_counts(counts: pd.DataFrame, ontology: Ontology, n_pairs: int) -> list[EntityScore]:
    """One :class:`EntityScore` per ontology entity from a :func:`count_table` of ``n_pairs`` pairs."""
    out: list[EntityScore] = []
    for e in ontology.entities:
        row = counts.loc[e.id]
        out.append(
            EntityScore(
                entity=e.id,
                name=e.name,
                kind=e.kind,
                group=e.group,
                presence=_presence(row, n_pairs),
                **{a: _attr(row, a) for a in ATTRIBUTES},
            )
        )
    return out


def _pool(scores: Sequence[EntityScore]) -> tuple[PresenceScore, dict[str, AttributeScore]]:
    presence = PresenceScore(
        tp=sum(s.presence.tp for s in scores),
        fp=sum(s.presence.fp for s in scores),
        fn=sum(s.presence.fn for s in scores),
        tn=sum(s.presence.tn for s in scores),
    )
    attrs = {
        a: AttributeScore(
            correct=sum(getattr(s, a).correct for s in scores),
            judged=sum(getattr(s, a).judged for s in scores),
            not_available=sum(getattr(s, a).not_available for s in scores),
        )
        for a in ATTRIBUTES
    }
    return presence, attrs


def group_scores(scores: Sequence[EntityScore], ontology: Ontology) -> list[GroupScore]:
    out: list[GroupScore] = []
    for g in ontology.groups:
        members = [s for s in scores if s.group == g.id]
        presence, attrs = _pool(members)
        out.append(GroupScore(group=g.id, name=g.name, n_entities=len(members), presence=presence, **attrs))
    return out


def averages(scores: Sequence[EntityScore]) -> Averages:
    presence, attrs = _pool(scores)
    return Averages(
        macro_precision=mean_defined(s.presence.precision for s in scores),
        macro_recall=mean_defined(s.presence.recall for s in scores),
        macro_f1=mean_defined(s.presence.f1 for s in scores),
        n_entities_f1_defined=sum(s.presence.f1 is not None for s in scores),
        n_entities=len(scores),
        micro=presence,
        **attrs,
    )
