"""The judgement table on disk: ``judgements.jsonl.gz``, and its Parquet twin.

A results folder keeps the rows of :class:`~cxreval.judge.table.JudgementTable` in
``judgements.jsonl.gz``: JSON Lines, gzip-compressed (one gzip member per chunk of pairs, so the
processes that judge chunks compress their own and the file is their bytes end to end; ``zcat``,
``gzip.open`` and ``pandas.read_json`` read it whole). Two styles of rows (:data:`ROW_STYLES`):

- ``compact`` (the default): only the rows that are not implied (:attr:`EntityJudgement.implied`:
  a TN row without error counts in no score, as for an entity neither report mentions), each
  without the fields that hold their default (``location`` / ``severity`` ``not-available``,
  ``comparison`` ``other``, ``specificity`` ``exact``, empty evidence and rules), and evidence as
  ``[start, end]``, character offsets into the pair's reference or candidate text, where the
  evidence is a slice of it (the rule engine's always is; an LLM's quote may not be, and is then
  written as text). The texts are shown again when the input is at hand (:func:`read_rows` with
  ``texts``); ``scores.json`` holds the fingerprints of the references and candidates it was
  scored on, so a wrong input is refused, not sliced. The folder holds no report sentence (the
  rule lines still quote the cue words they matched, and an LLM's loose quote stays text).
- ``full``: every row with its evidence as text (the rows of ``judgements.jsonl`` up to cxreval 0.7).

Every score of a table read back from either style is the one of the table that was written
(``tests/test_judgement_files.py``). Folders of cxreval 0.7 and before hold ``judgements.jsonl``
(:data:`LEGACY_JUDGEMENTS`), which :func:`read_rows` reads as it is.

With ``pyarrow`` installed (``pip install cxreval[parquet]``), ``judgements.parquet`` holds the
same rows as columns (:data:`PARQUET_COLUMNS`; evidence as ``*_start`` / ``*_end`` offsets, or text).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cxreval.judge.models import EntityJudgement
from cxreval.judge.table import COLUMNS
from cxreval.literals import ROW_STYLES, RowStyle

if TYPE_CHECKING:
    import pyarrow as pa

    from cxreval.io.writers import AtomicFile

#: The rows of a results folder (cxreval 0.8 on).
JUDGEMENTS = "judgements.jsonl.gz"
#: The same rows as a Parquet table, when pyarrow is installed.
JUDGEMENTS_PARQUET = "judgements.parquet"
#: The rows as cxreval 0.7 and before wrote them: plain JSON Lines, every row, evidence as text.
LEGACY_JUDGEMENTS = "judgements.jsonl"


#: Per pair id, its (reference, candidate) texts: what evidence offsets point into.
Texts = Mapping[str, tuple[str, str]]

#: Fields a compact row leaves out when they hold their default, and the defaults themselves: the
#: model's, so a row read back (missing fields take the model's defaults) is the row written.
_DEFAULTS = {
    name: EntityJudgement.model_fields[name].default for name in COLUMNS if not EntityJudgement.model_fields[name].is_required()
}
_SIDES = (("reference", 0), ("candidate", 1))
#: gzip's level for the rows: 6 (zlib's default) is within 3 % of 9's size on judgement rows, at half its time.
GZIP_LEVEL = 6

#: The columns of ``judgements.parquet``, in order (evidence: text, or offsets into the pair's text).
PARQUET_COLUMNS = (
    "pair_id",
    "entity",
    "presence",
    "location",
    "severity",
    "comparison",
    "specificity",
    "reference",
    "reference_start",
    "reference_end",
    "candidate",
    "candidate_start",
    "candidate_end",
    "reference_rules",
    "candidate_rules",
)


@dataclass(frozen=True)
class RowsFormat:
    """How a run writes its judgement rows: the style of ``judgements.jsonl.gz``, and whether
    ``judgements.parquet`` is written beside it."""

    style: RowStyle = "compact"
    parquet: bool = False

    @classmethod
    def choose(cls, style: RowStyle = "compact", parquet: bool | None = None) -> RowsFormat:
        """The format a user asks for: ``parquet`` None writes the Parquet twin when pyarrow is
        installed; True without pyarrow is an error (it is not silently left out)."""
        if style not in ROW_STYLES:
            raise ValueError(f"rows must be one of {', '.join(ROW_STYLES)}, got {style!r}")
        if parquet is None:
            parquet = parquet_available()
        elif parquet and not parquet_available():
            raise ValueError("judgements.parquet needs pyarrow: pip install 'cxreval[parquet]'")
        return cls(style, parquet)


class JudgementsFileError(ValueError):
    """A judgements file that cannot be read (damaged, or texts that are not the ones scored);
    the message names the file and line."""


def kept_rows(rows: Iterable[EntityJudgement], style: RowStyle) -> Iterator[EntityJudgement]:
    """The rows a file of ``style`` holds: all of them, or (``compact``) those not implied."""
    if style not in ROW_STYLES:
        raise ValueError(f"rows must be one of {', '.join(ROW_STYLES)}, got {style!r}")
    return iter(rows) if style == "full" else (r for r in rows if not r.implied)


def evidence_span(evidence: str, text: str | None) -> tuple[int, int] | None:
    """``(start, end)`` of ``evidence`` in ``text``; None where it is empty or no slice of it."""
    if text is not None and evidence:
        start = text.find(evidence)
        if start >= 0:
            return start, start + len(evidence)
    return None


def _span(evidence: str, text: str | None) -> list[int] | str:
    """``[start, end]`` of ``evidence`` in ``text``, or the evidence itself where it is not a slice of it."""
    span = evidence_span(evidence, text)
    return evidence if span is None else list(span)


def compact_record(row: EntityJudgement, texts: tuple[str, str] | None) -> dict[str, Any]:
    """One row of a compact file: the fields that do not hold their default, evidence as offsets
    into ``texts`` (the pair's reference and candidate) where it is a slice of them."""
    record: dict[str, Any] = {"pair_id": row.pair_id, "entity": row.entity, "presence": row.presence}
    for name in COLUMNS[3:]:
        value = getattr(row, name)
        if value != _DEFAULTS[name]:
            record[name] = value
    for side, k in _SIDES:
        if side in record:
            record[side] = _span(record[side], None if texts is None else texts[k])
        elif (span := getattr(row, f"{side}_span")) is not None:  # read back without its texts: offsets kept
            record[side] = list(span)
    return record


def encode_rows(rows: Iterable[EntityJudgement], texts: Texts | None = None, style: RowStyle = "compact") -> bytes:
    """Rows as one gzip member of ``judgements.jsonl.gz`` (members joined end to end are the file).

    ``texts``: the pairs' texts, for evidence offsets (a pair not in it keeps its evidence as text).
    The bytes depend only on the rows and texts (no time stamp), so a run is reproducible.
    """
    if style == "full":
        lines = [row.model_dump_json() for row in kept_rows(rows, style)]
    else:
        get = (lambda pid: None) if texts is None else texts.get
        lines = [
            json.dumps(compact_record(r, get(r.pair_id)), ensure_ascii=False, separators=(",", ":"))
            for r in kept_rows(rows, style)
        ]
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


#: Pairs whose rows one gzip member holds when a whole table is written at once (a stream
#: writes one member per chunk it judges).
MEMBER_PAIRS = 1_000


def encode_members(
    rows: Iterable[EntityJudgement], texts: Texts | None = None, style: RowStyle = "compact", pairs: int = MEMBER_PAIRS
) -> Iterator[bytes]:
    """:func:`encode_rows` of a whole table, one member per ``pairs`` consecutive pairs' rows (so
    memory holds one member's rows, not the file's)."""
    block: list[EntityJudgement] = []
    seen = 0
    last: str | None = None
    for row in rows:
        if row.pair_id != last:
            last = row.pair_id
            seen += 1
            if seen > pairs:
                yield encode_rows(block, texts, style)
                block, seen = [], 1
        block.append(row)
    if block:
        yield encode_rows(block, texts, style)


def judgements_file(folder: str | Path) -> Path | None:
    """The rows file of a results folder (this release's, else a legacy one), None when there is none."""
    for name in (JUDGEMENTS, LEGACY_JUDGEMENTS):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def read_rows(path: str | Path, texts: Texts | None = None) -> list[EntityJudgement]:
    """The rows of a judgements file (either style, or a legacy ``judgements.jsonl``).

    Evidence given as offsets is sliced from ``texts`` (pair id -> (reference, candidate)) where
    the pair is in it; otherwise it reads as empty text, its offsets kept in
    ``reference_span`` / ``candidate_span``. Raises :class:`JudgementsFileError` naming the file
    and line of a row that cannot be read, or whose offsets fall outside the text given.
    """
    path = Path(path)
    opened: IO[str]
    try:
        opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")
        with opened as fh:
            return [_row(line, texts, path, n) for n, line in enumerate(fh, start=1) if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise JudgementsFileError(f"{path}: cannot be read ({exc})") from None


def _row(line: str, texts: Texts | None, path: Path, lineno: int) -> EntityJudgement:
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        pair = None if texts is None else texts.get(str(record.get("pair_id")))
        for side, k in _SIDES:
            value = record.get(side)
            if isinstance(value, list):
                record[side], record[f"{side}_span"] = _sliced(value, None if pair is None else pair[k], side)
        return EntityJudgement.model_validate(record)
    except ValueError as exc:
        raise JudgementsFileError(f"{path}, line {lineno}: not a judgement ({exc})") from None


def _sliced(span: list[Any], text: str | None, side: str) -> tuple[str, tuple[int, int]]:
    """(evidence, its offsets) of a ``[start, end]`` span: the slice of ``text``, or "" without it."""
    if len(span) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in span) or not 0 <= span[0] <= span[1]:
        raise ValueError(f"{side}: {span!r} is not a [start, end] pair of offsets")
    start, end = span
    if text is None:
        return "", (start, end)
    if end > len(text):
        raise ValueError(
            f"{side} evidence at {start}:{end} lies past the end of the pair's {side} text "
            f"({len(text)} characters): the texts given are not the ones scored"
        )
    return text[start:end], (start, end)


# -- the Parquet twin ------------------------------------------------------------------------------


def parquet_available() -> bool:
    """Whether pyarrow is installed (the Parquet twin is written by default then)."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def rows_arrow(rows: Iterable[EntityJudgement], texts: Texts | None = None, style: RowStyle = "compact") -> pa.Table:
    """The rows ``style`` keeps as an Arrow table of :data:`PARQUET_COLUMNS` (evidence: offsets
    into ``texts`` in the compact style where it is a slice of them, else text; null where none)."""
    import pyarrow as pa

    columns: dict[str, list[Any]] = {c: [] for c in PARQUET_COLUMNS}
    get = (lambda pid: None) if texts is None or style == "full" else texts.get
    for r in kept_rows(rows, style):
        for name in (
            "pair_id",
            "entity",
            "presence",
            "location",
            "severity",
            "comparison",
            "specificity",
            "reference_rules",
            "candidate_rules",
        ):
            columns[name].append(getattr(r, name))
        pair = get(r.pair_id)
        for side, k in _SIDES:
            where = _span(getattr(r, side), None if pair is None else pair[k])
            if where == "" and (span := getattr(r, f"{side}_span")) is not None:  # read back without its texts
                where = list(span)
            text, start, end = (None, *where) if isinstance(where, list) else (where or None, None, None)
            columns[side].append(text)
            columns[f"{side}_start"].append(start)
            columns[f"{side}_end"].append(end)
    return pa.Table.from_pydict(columns, schema=parquet_schema())


def parquet_schema() -> pa.Schema:
    """The schema of ``judgements.parquet``: text columns, and 32-bit offsets."""
    import pyarrow as pa

    return pa.schema([(c, pa.int32() if c.endswith(("_start", "_end")) else pa.string()) for c in PARQUET_COLUMNS])


class ParquetRows:
    """``judgements.parquet`` of a run whose rows come chunk by chunk.

    Each chunk's rows are appended, as an Arrow stream, to a spool file beside ``path`` (a hidden
    ``.judgements.parquet.*.tmp``, deleted when the run ends, and by the next run into the folder
    if this one is killed): no file stays open between chunks, however many folders a run fills.
    :meth:`finish` writes the Parquet file at ``path`` from the spool, one row group per chunk.
    """

    def __init__(self, path: str | Path, spool: AtomicFile) -> None:
        """``path``: where the Parquet file is written (the run's partial name); ``spool``: a
        closed temporary file for the chunks (:meth:`~cxreval.io.writers.OutputManifest.scratch`)."""
        self.path = Path(path)
        self._spool = spool

    def add(self, table: pa.Table) -> None:
        """Append a chunk's rows (an Arrow table of :func:`parquet_schema`)."""
        import pyarrow as pa

        if table.num_rows:
            with open(self._spool.tmp, "ab") as fh, pa.ipc.new_stream(fh, table.schema) as stream:
                stream.write_table(table)

    def add_file(self, path: str | Path) -> None:
        """Append the rows a worker wrote to ``path`` (:func:`write_arrow`), and delete the file."""
        self._spool.append_file(path)

    def finish(self) -> None:
        """Write the Parquet file from the spool (zstd-compressed), and delete the spool."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            # read as a file, not mapped: a mapped spool would count in this process's memory whole
            with (
                pq.ParquetWriter(str(self.path), parquet_schema(), compression="zstd") as writer,
                pa.OSFile(self._spool.tmp) as source,
            ):
                while source.tell() < source.size():
                    writer.write_table(pa.ipc.open_stream(source).read_all())
        finally:
            self._spool.discard()


def write_arrow(table: pa.Table, path: str | Path) -> None:
    """Write ``table`` for :meth:`ParquetRows.add_file` (Arrow's stream format: no encoding work)."""
    import pyarrow as pa

    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
