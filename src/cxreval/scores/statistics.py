"""A judgement table read once into additive statistics: what every SPEC number is computed from.

As sacreBLEU splits a metric into statistics per segment and a score of their sum, cxreval reads a
judgement table once (:class:`TableStatistics`) into integer counts per pair, and every SPEC
metric (:mod:`cxreval.metrics.table`) is a ``compute`` of their sums. The statistics of a set of
pairs are the sum of its pairs' statistics, so the whole table, the chunks of a streamed run and
the resamples of a bootstrap are scored by the same ``compute``.

Blocks (:meth:`TableStatistics.block`, ``(n_pairs, k)``; :meth:`TableStatistics.total`, their sum):

- ``presence``: TP, FP, FN per entity of the ontology, entity after entity (``3 E`` columns);
- ``location``, ``severity``: (aligned, aligned or not-aligned) on the TP rows of the entities
  the attribute applies to; ``comparison``: (``other``, any) on those rows;
- ``errors``: the pair's SPEC-CXR errors (:data:`~cxreval.judge.models.ERROR_KINDS`), and 1;
- ``error-free``: 1 if the pair has no error, and 1;
- ``critical-error-free``: 1 if the pair has no error on an entity the ontology marks critical, and 1;
- ``specificity-errors``: the pair's errors of the finding hierarchy (less or more specific), and 1.

The last three are a pair-mean's ``[value, defined]``: a pair that was not judged (an LLM answer
that stayed unusable) is all zeros there, so it counts in no mean. Implicit TN rows (an entity
neither report mentions) need no storage: every number here is a function of the rows present.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cxreval.judge.models import ERROR_KINDS
from cxreval.literals import COUNTED_PRESENCE

if TYPE_CHECKING:
    from cxreval.judge.table import JudgementTable
    from cxreval.ontology import Ontology

ATTRIBUTES = ("location", "severity", "comparison")
#: The blocks of :class:`TableStatistics`, in the order a combined cache lays them out.
BLOCKS = ("presence", *ATTRIBUTES, "errors", "error-free", "critical-error-free", "specificity-errors")
#: The error kinds of the finding hierarchy (a candidate less or more specific than its reference).
SPECIFICITY_KINDS = ("less_specific", "more_specific")
#: The error kinds, in ``errors.csv`` column order.
ERROR_COLUMNS = tuple(ERROR_KINDS)


@dataclass(frozen=True)
class _Rows:
    """The table's rows as integer codes (one entry per row)."""

    pair: np.ndarray  # index into the pair ids
    entity: np.ndarray  # index into the ontology's entities; -1 for an entity it does not know
    presence: np.ndarray  # index into COUNTED_PRESENCE (TP, FP, FN); -1 for TN
    kinds: np.ndarray  # (rows, K) bool: the row shows error kind k
    critical: np.ndarray  # bool: the row's entity is critical
    correct: np.ndarray  # (rows, 3) bool per attribute, TP rows of entities it applies to
    judged: np.ndarray  # (rows, 3) bool
    not_available: np.ndarray  # (rows, 3) bool (location and severity: "not-available")
    denied: np.ndarray  # bool: an FN row whose candidate wrote the entity and negated or hedged it (not a normal statement)


def _codes(values: list[str], index: dict[str, int]) -> np.ndarray:
    return np.fromiter(map(index.get, values, repeat(-1)), dtype=np.int64, count=len(values))


def _encode(values: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Integer codes of a column's values and the code of each distinct value (a handful)."""
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return _codes(values, index), index


def _is(codes: np.ndarray, index: dict[str, int], wanted: Collection[str]) -> np.ndarray:
    """Where a coded column holds one of ``wanted`` (a lookup over its few distinct values)."""
    return np.fromiter((v in wanted for v in index), dtype=bool, count=len(index))[codes]


@dataclass(frozen=True)
class _OntologyCodes:
    """What the statistics need of an ontology, as arrays indexed by entity (-1: unknown, False)."""

    index: dict[str, int]
    critical: np.ndarray  # (E + 1,) bool
    applies: np.ndarray  # (3, E + 1) bool: the attribute applies to the entity


_ONTOLOGIES: dict[int, tuple[object, _OntologyCodes]] = {}


def _ontology_codes(ontology: Ontology) -> _OntologyCodes:
    """The ontology's arrays, built once per ontology object (a reward reads one pair at a time)."""
    held = _ONTOLOGIES.get(id(ontology))
    if held is not None and held[0] is ontology:
        return held[1]
    ents = ontology.entities
    codes = _OntologyCodes(
        index={e.id: i for i, e in enumerate(ents)},
        critical=np.array([e.critical for e in ents] + [False], dtype=bool),
        applies=np.array([[a in e.attributes for e in ents] + [False] for a in ATTRIBUTES], dtype=bool),
    )
    if len(_ONTOLOGIES) > 16:
        _ONTOLOGIES.clear()
    _ONTOLOGIES[id(ontology)] = (ontology, codes)
    return codes


def _read_rows(table: JudgementTable, ontology: Ontology, pair_index: dict[str, int]) -> _Rows:
    """Code every row of ``table`` (one pass over each column; no DataFrame needed)."""
    pair_ids = table.column("pair_id")
    pair = _codes(pair_ids, pair_index)
    if (pair < 0).any():
        unknown = sorted({p for p, c in zip(pair_ids, pair, strict=True) if c < 0})[:5]
        raise ValueError(f"judgement rows for pairs not in pair_ids: {unknown}")
    onto = _ontology_codes(ontology)
    entity = _codes(table.column("entity"), onto.index)
    fields = {f: _encode(table.column(f)) for f in ("presence", *ATTRIBUTES, "specificity")}
    pres_codes, pres_index = fields["presence"]
    presence = np.full(len(pair), -1, dtype=np.int64)
    for k, value in enumerate(COUNTED_PRESENCE):
        presence[_is(pres_codes, pres_index, (value,))] = k
    kinds = np.zeros((len(pair), len(ERROR_KINDS)), dtype=bool)
    for k, (f, bad) in enumerate(ERROR_KINDS.values()):
        kinds[:, k] = _is(*fields[f], bad)
    tp = (entity >= 0) & (presence == 0)
    correct, judged, na = (np.zeros((len(pair), len(ATTRIBUTES)), dtype=bool) for _ in range(3))
    for k, attr in enumerate(ATTRIBUTES):
        applies = onto.applies[k][entity] & tp
        codes, index = fields[attr]
        if attr == "comparison":
            correct[:, k], judged[:, k] = applies & _is(codes, index, ("other",)), applies
        else:
            correct[:, k] = applies & _is(codes, index, ("aligned",))
            judged[:, k] = correct[:, k] | (applies & _is(codes, index, ("not-aligned",)))
            na[:, k] = applies & _is(codes, index, ("not-available",))
    said = np.fromiter(map(bool, table.column("candidate")), dtype=bool, count=len(pair))
    said |= np.fromiter((s is not None for s in table.column("candidate_span")), dtype=bool, count=len(pair))
    blanket = np.fromiter((r.startswith("normal.") for r in table.column("candidate_rules")), dtype=bool, count=len(pair))
    denied = (presence == 2) & said & ~blanket  # a blanket normal statement ("lungs are clear") denies nothing
    return _Rows(pair, entity, presence, kinds, onto.critical[entity], correct, judged, na, denied)


class TableStatistics:
    """The additive statistics of a judgement table over ``pair_ids`` (see the module doc).

    ``pair_ids`` defaults to the table's; a pair listed there that the table does not hold
    (an LLM failure) is a pair that was not judged: zero in every block.
    """

    def __init__(self, table: JudgementTable, ontology: Ontology, pair_ids: Sequence[str] | None = None) -> None:
        self.pair_ids: tuple[str, ...] = table.pair_ids if pair_ids is None else tuple(pair_ids)
        self.ontology = ontology
        index = {p: i for i, p in enumerate(self.pair_ids)}
        if len(index) != len(self.pair_ids):
            raise ValueError("pair ids repeat: every pair needs an id of its own")
        judged = _codes(list(table.pair_ids), index)
        if (judged < 0).any() or len(set(table.pair_ids)) != len(table.pair_ids):
            unknown = [p for p, c in zip(table.pair_ids, judged, strict=True) if c < 0][:5]
            raise ValueError(f"the table's pairs must be among pair_ids, once each (not among them: {unknown})")
        self.judged = np.zeros(len(self.pair_ids), dtype=bool)
        self.judged[judged] = True
        self._rows = _read_rows(table, ontology, index)

    @property
    def n_pairs(self) -> int:
        return len(self.pair_ids)

    @property
    def n_judged(self) -> int:
        return int(self.judged.sum())

    def _per_pair(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self._rows.pair[mask], minlength=self.n_pairs).astype(np.int64)

    def error_kinds(self, *, critical_only: bool = False) -> np.ndarray:
        """Errors per pair and kind ``(n_pairs, K)`` (:data:`ERROR_COLUMNS` order)."""
        r = self._rows
        out = np.zeros((self.n_pairs, len(ERROR_COLUMNS)), dtype=np.int64)
        keep = r.kinds.any(axis=1)
        if critical_only:
            keep &= r.critical
        np.add.at(out, r.pair[keep], r.kinds[keep].astype(np.int64))
        return out

    def denials(self) -> np.ndarray:
        """Per pair, the FN rows whose candidate wrote the entity and denied (or hedged) it: the
        candidate said the finding is not there, where an omission says nothing."""
        return self._per_pair(self._rows.denied)

    def invented_critical(self) -> np.ndarray:
        """Per pair, the FP rows of entities the ontology marks critical (an added critical finding)."""
        r = self._rows
        return self._per_pair((r.presence == 1) & r.critical)

    def errors(self) -> np.ndarray:
        """SPEC-CXR errors per pair (0 for a pair not judged)."""
        return self.error_kinds().sum(axis=1)

    def critical_errors(self, *, specificity: bool = True) -> np.ndarray:
        """Errors per pair on the entities the ontology marks critical (``specificity=False``: but
        the errors of the finding hierarchy, where the critical finding was reported)."""
        kinds = self.error_kinds(critical_only=True)
        if not specificity:
            kinds = kinds[:, [k for k, name in enumerate(ERROR_COLUMNS) if name not in SPECIFICITY_KINDS]]
        return kinds.sum(axis=1)

    def error_table(self) -> pd.DataFrame:
        """``errors.csv``'s counts: per judged pair, ``errors`` then one column per error kind."""
        kinds = self.error_kinds()[self.judged]
        index = pd.Index([p for p, j in zip(self.pair_ids, self.judged, strict=True) if j], name="pair_id")
        out = pd.DataFrame(kinds, index=index, columns=list(ERROR_COLUMNS))
        out.insert(0, "errors", kinds.sum(axis=1))
        return out

    def presence(self) -> np.ndarray:
        """TP, FP, FN per pair and entity ``(n_pairs, E, 3)``."""
        r = self._rows
        out = np.zeros((self.n_pairs, len(self.ontology.entities), 3), dtype=np.int64)
        keep = (r.presence >= 0) & (r.entity >= 0)
        np.add.at(out, (r.pair[keep], r.entity[keep], r.presence[keep]), 1)
        return out

    def presence_sparse(self) -> Any:
        """:meth:`presence` as a sparse ``(n_pairs, 3 E)`` matrix: the ``presence`` block without
        its zeros (most pairs mention few of the entities)."""
        from scipy import sparse

        r = self._rows
        keep = (r.presence >= 0) & (r.entity >= 0)
        cols = r.entity[keep] * 3 + r.presence[keep]
        return sparse.csr_matrix(
            (np.ones(len(cols)), (r.pair[keep], cols)), shape=(self.n_pairs, 3 * len(self.ontology.entities))
        )  # duplicates add up

    def _attribute(self, k: int) -> np.ndarray:
        r = self._rows
        return np.stack([self._per_pair(r.correct[:, k]), self._per_pair(r.judged[:, k])], axis=1)

    def _pair_mean(self, values: np.ndarray) -> np.ndarray:
        return np.stack([np.where(self.judged, values, 0), self.judged.astype(np.int64)], axis=1)

    def block(self, name: str) -> np.ndarray:
        """The statistics of block ``name`` per pair, ``(n_pairs, k)`` floats (see the module doc)."""
        if name == "presence":
            out = self.presence().reshape(self.n_pairs, 3 * len(self.ontology.entities))
        elif name in ATTRIBUTES:
            out = self._attribute(ATTRIBUTES.index(name))
        elif name == "errors":
            out = self._pair_mean(self.errors())
        elif name == "error-free":
            out = self._pair_mean((self.errors() == 0).astype(np.int64))
        elif name == "critical-error-free":
            out = self._pair_mean((self.critical_errors() == 0).astype(np.int64))
        elif name == "specificity-errors":
            kinds = [ERROR_COLUMNS.index(k) for k in SPECIFICITY_KINDS]
            out = self._pair_mean(self.error_kinds()[:, kinds].sum(axis=1))
        else:
            raise KeyError(f"no statistic block {name!r}; blocks: {', '.join(BLOCKS)}")
        return out.astype(float)

    def total(self, name: str) -> np.ndarray:
        """The sum of :meth:`block` ``name`` over every pair, ``(k,)`` (exact: integer counts)."""
        if name == "presence":
            return self.entity_presence().reshape(-1).astype(float)
        return self.block(name).sum(axis=0)

    def entity_presence(self) -> np.ndarray:
        """TP, FP, FN per entity over every pair ``(E, 3)``, without a per-pair array."""
        r = self._rows
        keep = (r.presence >= 0) & (r.entity >= 0)
        n_ent = len(self.ontology.entities)
        flat = np.bincount(r.entity[keep] * 3 + r.presence[keep], minlength=3 * n_ent)
        return flat.reshape(n_ent, 3).astype(np.int64)

    def entity_counts(self) -> pd.DataFrame:
        """Per-entity counts over every pair: TP, FP, FN and, per attribute, correct / judged /
        not-available (:func:`cxreval.scores.entity.scores_of_counts` reads it)."""
        r = self._rows
        n_ent = len(self.ontology.entities)
        known = r.entity >= 0
        columns: dict[str, np.ndarray] = dict(zip(COUNTED_PRESENCE, self.entity_presence().T, strict=True))
        for k, attr in enumerate(ATTRIBUTES):
            for suffix, flags in (("correct", r.correct), ("judged", r.judged), ("na", r.not_available)):
                columns[f"{attr}_{suffix}"] = np.bincount(r.entity[known & flags[:, k]], minlength=n_ent)
        return pd.DataFrame(
            {c: v.astype(np.int64) for c, v in columns.items()}, index=pd.Index(self.ontology.entity_ids, name="entity")
        )

    def reference_positive(self) -> np.ndarray:
        """Per pair, whether the reference states a positive entity (a TP or FN row)."""
        r = self._rows
        return self._per_pair((r.presence == 0) | (r.presence == 2)) > 0
