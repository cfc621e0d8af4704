"""The judgement table: every engine's output, in one columnar form that every score reads.

One row per (pair, entity) that either report mentions (an entity neither mentions is an implicit
TN), with SPEC-CXR's presence / location / severity / comparison verdicts and the evidence from
each report. ``pair_ids`` lists every judged pair, error-free ones included: a pair with no row
is a pair with no finding on either side, not a missing pair. ``judgements.jsonl`` is its rows;
the bench cache stores the same rows compactly (non-TN rows, evidence on error rows only:
:meth:`from_compact` reads that form back).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from cxreval.judge.models import EntityJudgement

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :attr:`JudgementTable.frame`, in ``judgements.jsonl`` field order.
COLUMNS = (
    "pair_id",
    "entity",
    "presence",
    "location",
    "severity",
    "comparison",
    "reference",
    "candidate",
    "reference_rules",
    "candidate_rules",
    "specificity",
)

#: A compact row as the bench cache keeps it: (entity, presence, location, severity, comparison,
#: reference evidence, candidate evidence, reference rules, candidate rules, specificity). Rows
#: stored before cxreval 0.3 end with the evidence, before 0.5 with the rules: :func:`full_compact`
#: gives them empty rules and ``exact`` specificity (the flat rule had no other).
CompactRow = tuple[str, str, str, str, str, str, str, str, str, str]
_COMPACT_FIELDS = len(COLUMNS) - 1
#: What a column holds in rows written before it existed.
_COLUMN_DEFAULTS: dict[str, object] = {
    "reference": "",
    "candidate": "",
    "reference_rules": "",
    "candidate_rules": "",
    "specificity": "exact",
    "reference_span": None,
    "candidate_span": None,
}
_COMPACT_DEFAULTS = tuple(_COLUMN_DEFAULTS[c] for c in COLUMNS[-3:])  # rules, then specificity


def full_compact(row: Sequence[str]) -> CompactRow:
    """A compact row with every field: an older row gets empty rules and ``exact`` specificity."""
    if len(row) == _COMPACT_FIELDS:
        return tuple(row)  # type: ignore[return-value]
    missing = _COMPACT_FIELDS - len(row)
    return (*row, *_COMPACT_DEFAULTS[len(_COMPACT_DEFAULTS) - missing :])  # type: ignore[return-value]


class JudgementTable:
    """Judgement rows of a set of pairs, as a DataFrame with :data:`COLUMNS`.

    ``signature`` says what produced the rows (engine, model, prompt, policies), when known.
    A table built :meth:`from_rows` keeps the row objects, so :meth:`rows` gives them back
    without rebuilding them, and builds its :attr:`frame` only when one is asked for (a reward
    scores one pair at a time and needs none). The frame is not to be changed in place.
    """

    __slots__ = ("_frame", "_objects", "pair_ids", "signature")

    def __init__(
        self,
        pair_ids: Sequence[str],
        frame: pd.DataFrame | None = None,
        signature: str | None = None,
        objects: Sequence[EntityJudgement] | None = None,
    ) -> None:
        if frame is None and objects is None:
            raise ValueError("a judgement table needs its rows: a frame or row objects")
        self.pair_ids: tuple[str, ...] = tuple(pair_ids)
        self.signature = signature
        self._frame = frame
        self._objects = None if objects is None else tuple(objects)

    @classmethod
    def from_rows(cls, rows: Iterable[EntityJudgement], pair_ids: Sequence[str], signature: str | None = None) -> JudgementTable:
        return cls(pair_ids, None, signature, tuple(rows))

    @classmethod
    def from_compact(
        cls, pair_ids: Sequence[str], rows: Sequence[Sequence[Sequence[str]] | None], signature: str | None = None
    ) -> JudgementTable:
        """Pairs with their compact rows; a pair whose rows are ``None`` was not judged and is
        left out (it is neither error-free nor erroneous)."""
        judged = [i for i, r in zip(pair_ids, rows, strict=True) if r is not None]
        records: list[tuple[str, ...]] = [
            (pid, *full_compact(row)) for pid, rs in zip(pair_ids, rows, strict=True) if rs for row in rs
        ]
        return cls(judged, _frame(records), signature)

    @classmethod
    def empty(cls, signature: str | None = None) -> JudgementTable:
        """The table of no pairs (the start of a sum, the header of an empty output)."""
        return cls((), None, signature, ())

    def __len__(self) -> int:
        return len(self.pair_ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JudgementTable):
            return NotImplemented
        return self.pair_ids == other.pair_ids and self.signature == other.signature and self.frame.equals(other.frame)

    __hash__ = None  # type: ignore[assignment]

    @property
    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with :data:`COLUMNS` (built on first use)."""
        if self._frame is None:
            assert self._objects is not None
            self._frame = _frame([tuple(getattr(r, c) for c in COLUMNS) for r in self._objects])
        return self._frame

    @property
    def n_rows(self) -> int:
        return len(self._objects) if self._objects is not None else len(self.frame)

    def column(self, name: str) -> list:
        """One column's values, row by row (from the row objects when the table has them, so no
        frame is built)."""
        if self._objects is not None:
            return list(map(attrgetter(name), self._objects))
        if name not in self.frame and name in _COLUMN_DEFAULTS:  # a frame of an older layout
            return [_COLUMN_DEFAULTS[name]] * len(self.frame)
        return self.frame[name].tolist()

    def rows(self) -> list[EntityJudgement]:
        """The rows as :class:`EntityJudgement` objects (``judgements.jsonl``)."""
        if self._objects is not None:
            return list(self._objects)
        return [EntityJudgement(**dict(zip(COLUMNS, r))) for r in self.frame.itertuples(index=False, name=None)]


def _frame(records: list[tuple[str, ...]]) -> pd.DataFrame:
    import pandas as pd

    if not records:
        return pd.DataFrame({c: pd.Series(dtype=str) for c in COLUMNS})
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))
