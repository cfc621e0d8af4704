"""Read reference and candidate reports from user files into validated :class:`ReportPair` objects.

Everything downstream (extraction, scoring, judging) assumes clean input: one non-empty text per
side, unique ids. This module is the single place where user files are checked, so that a bad
file fails early with *every* problem listed (file, position, field, what is wrong) instead of
failing half-way through a scoring run or, worse, silently scoring fewer reports than were given.
No row is ever skipped or repaired; any problem raises :class:`InputError`.

Formats (chosen from the suffix unless ``format=`` / ``--format`` is given; ``-`` reads standard
input and needs the format named):

``csv`` / ``tsv``
    Header row required. Parsed with the standard :mod:`csv` module, so every value stays a
    ``str`` and nothing ("NA", "null", "") turns into NaN; the same parser yields the line on
    which each record starts, so positions always match the parsed records (quoted fields may
    span several lines). Positions are **line N**: the 1-based line where the record starts
    (the header is line 1). Header names are stripped of surrounding whitespace.
``jsonl`` (``.jsonl``, ``.ndjson``)
    One JSON object per line; blank lines are ignored. Positions are **line N** (1-based).
``parquet``
    Read with pyarrow. Positions are **row N**: the 1-based data row index.
``json``
    Either a list of objects (read like JSONL; positions are **item N**, the 1-based list
    index) or the ReXrank layout: an object keyed by study id whose values hold ``report``,
    ``section_findings``, ``section_impression``, ... (problems name the study **id**). The field
    read is the one the caller names (``text_col``); with none named, references read the field
    of ``section`` and candidates read ``model_prediction``, the field ReXrank's prediction
    files use. A named field is never replaced by another one.

JSON values keep their types (the :mod:`json` module is used rather than pandas, which would
coerce numbers and dates), so a number, null or list where a report is expected is reported.
Text files must be UTF-8; a UTF-8 byte order mark is accepted. Ids are compared as strings,
stripped of surrounding whitespace (integer ids in JSON/Parquet become their decimal string),
except leading whitespace before ``=``, ``+``, ``-`` or ``@``, which is kept: stripping it would
turn text into a spreadsheet formula.
Report text is kept as is except that surrounding whitespace is stripped.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import hashlib
import io
import json
import math
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cxreval.literals import InputFormat, Section
from cxreval.outputs import csv_value, formula_like

__all__ = [
    "FORMATS",
    "SECTIONS",
    "PREDICTION_FIELD",
    "CopiedCandidatesWarning",
    "InputError",
    "InputProblem",
    "PairStream",
    "ReportPair",
    "read_pair_files",
    "read_pairs",
    "read_reports",
    "warn_if_copied",
    "Record",
    "Uniqueness",
    "bool_value",
    "load_whole_table",
    "number_value",
    "raise_problems",
    "read_json_value",
    "require_records",
    "table_format",
    "text_value",
]

PathLike = str | os.PathLike[str]

#: Accepted ``format=`` values (:data:`cxreval.literals.INPUT_FORMATS`, in order) and the file
#: suffixes that select them.
FORMATS: dict[InputFormat, tuple[str, ...]] = {
    "csv": (".csv",),
    "tsv": (".tsv",),
    "jsonl": (".jsonl", ".ndjson"),
    "parquet": (".parquet",),
    "json": (".json",),
}
_SUFFIX_TO_FORMAT = {suffix: fmt for fmt, suffixes in FORMATS.items() for suffix in suffixes}
_FORMAT_ALIASES = {"ndjson": "jsonl"}

#: ``section=`` values for the ReXrank JSON layout (:data:`cxreval.literals.REPORT_SECTIONS`, in
#: order) and the study field each one reads.
SECTIONS: dict[Section, str] = {
    "report": "report",
    "findings": "section_findings",
    "impression": "section_impression",
}

#: The field a ReXrank-layout *candidates* file holds the generated report in.
PREDICTION_FIELD = "model_prediction"

#: Above this share of candidates identical to their reference, readers warn loudly.
COPIED_WARN_SHARE = 0.5

#: The path that means standard input.
STDIN = "-"

#: How many problems ``str(InputError)`` lists before summarising the rest.
MAX_LISTED_PROBLEMS = 20

Unit = Literal["line", "row", "item"]


class ReportPair(BaseModel):
    """One reference report and the candidate (generated) report to score against it."""

    model_config = ConfigDict(frozen=True)

    pair_id: str
    reference: str
    candidate: str
    meta: dict[str, str] = Field(default_factory=dict)
    """Extra columns the caller asked to keep (model, dataset, site, ...), as text."""
    system: str | None = None
    """The system (model) that wrote the candidate, for long-format input with a system column."""


class InputProblem(BaseModel):
    """One thing wrong with an input file, precise enough to find and fix it.

    ``row`` is a 1-based position whose meaning is given by ``unit``: ``line`` (CSV/TSV record
    start line, JSONL line), ``row`` (Parquet data row) or ``item`` (JSON list index). It is
    ``None`` for file-level problems (missing column, unreadable file) and for ReXrank-layout
    studies, which are named by ``id`` instead.
    """

    model_config = ConfigDict(frozen=True)

    file: str
    row: int | None = None
    field: str | None = None
    message: str
    unit: Unit = "row"
    id: str | None = None

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            pos = f"{self.unit} {self.row}"
            if self.id is not None:
                pos += f" (id {self.id!r})"
            where.append(pos)
        elif self.id is not None:
            where.append(f"id {self.id!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}"


class InputError(ValueError):
    """Input files that cannot be used; ``problems`` holds every problem found, not just the first."""

    def __init__(self, problems: Iterable[InputProblem], not_kept: int = 0) -> None:
        self.problems: list[InputProblem] = list(problems)
        self.not_kept = not_kept
        """Problems found but not kept (a streamed check keeps :data:`MAX_KEPT_PROBLEMS`)."""
        super().__init__(self._render())

    @property
    def n_problems(self) -> int:
        """Every problem found, kept or not."""
        return len(self.problems) + self.not_kept

    def _render(self) -> str:
        n = self.n_problems
        head = f"{n} problem{'s' if n != 1 else ''} in input:"
        lines = [f"  - {p}" for p in self.problems[:MAX_LISTED_PROBLEMS]]
        if n > MAX_LISTED_PROBLEMS:
            more = n - MAX_LISTED_PROBLEMS
            lines.append(f"  ... and {more} more problem{'s' if more != 1 else ''}")
        return "\n".join([head, *lines])

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the exception picklable (e.g. across multiprocessing) despite the custom __init__.
        return (type(self), (self.problems, self.not_kept))


class CopiedCandidatesWarning(UserWarning):
    """Most candidates are identical to their reference: probably the wrong column was read."""


#: Names that moved to :mod:`cxreval.scores.fingerprint` in 0.8.1; read here with a
#: DeprecationWarning until 0.9.
_MOVED = frozenset(
    {
        "references_fingerprint",
        "candidates_fingerprint",
        "reference_digest",
        "fingerprint_hex",
        "fingerprints_comparable",
        "FINGERPRINT_PREFIX",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        warnings.warn(
            f"cxreval.io.{name} moved to cxreval.scores.fingerprint.{name} (0.8.1); the old path goes in 0.9",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("cxreval.scores.fingerprint"), name)
    raise AttributeError(f"module 'cxreval.io' has no attribute {name!r}")


def warn_if_copied(references: Sequence[str], candidates: Sequence[str], *, source: str) -> float:
    """Share of candidates identical to their reference; warns above :data:`COPIED_WARN_SHARE`.

    A candidate column that silently holds the reference text scores perfectly, so readers call
    this on every input and the CLI prints the warning loudly.
    """
    same = sum(r == c for r, c in zip(references, candidates, strict=True))
    return warn_copied_counts(same, len(candidates), source)


def warn_copied_counts(same: int, n: int, source: str) -> float:
    """:func:`warn_if_copied` from counts: ``same`` of ``n`` candidates equal their reference."""
    if n == 0:
        return 0.0
    share = same / n
    if share > COPIED_WARN_SHARE:
        warnings.warn(
            f"{same} of {n} candidates ({share:.0%}) in {source} are identical to their reference: "
            "is the candidate column really the generated report?",
            CopiedCandidatesWarning,
            stacklevel=3,
        )
    return share


# --------------------------------------------------------------------------------------------
# Internal table representation shared by all formats
# --------------------------------------------------------------------------------------------

_ABSENT: Any = object()  # a field that a record does not have at all


@dataclass
class _Record:
    pos: int | None  # 1-based position in `unit`s; None for keyed (ReXrank) studies
    values: Mapping[str, Any]
    key: str | None = None  # raw study id of a keyed-layout record
    short: bool = False  # CSV record with fewer fields than the header (already reported)
    ident: str | None = None  # normalised id once known, to name the record in later problems


@dataclass
class RecordTable:
    file: str
    unit: Unit
    columns: list[str]  # names present (header / union of object keys), in first-seen order
    records: list[_Record]
    problems: list[InputProblem] = field(default_factory=list)
    keyed: bool = False  # ReXrank layout: id is the dict key, not a column

    def problem(
        self,
        message: str,
        rec: _Record | None = None,
        field: str | None = None,
        id: str | None = None,
    ) -> InputProblem:
        """Build a problem located at ``rec`` in this table (or at file level)."""
        if rec is not None and id is None:
            id = rec.key if rec.key is not None else rec.ident
        return InputProblem(
            file=self.file,
            row=None if rec is None else rec.pos,
            unit=self.unit,
            field=field,
            id=id,
            message=message,
        )


def _file_error(file: str, message: str, row: int | None = None, unit: Unit = "line") -> InputError:
    return InputError([InputProblem(file=file, row=row, unit=unit, message=message)])


def _resolve_format(path: Path, file: str, format: str | None) -> str:
    """Pick the reader from ``format=`` or the file suffix; unknown ones are an input error."""
    accepted = ", ".join(f"{fmt} ({'/'.join(sfx)})" for fmt, sfx in FORMATS.items())
    if format is not None:
        fmt = format.lower().lstrip(".")
        fmt = _FORMAT_ALIASES.get(fmt, fmt)
        if fmt not in FORMATS:
            raise _file_error(file, f"unknown format {format!r}; accepted formats: {accepted}")
        return fmt
    if file == STDIN:
        raise _file_error(
            file, f"standard input has no suffix: name its format with --format (format= in Python); accepted formats: {accepted}"
        )
    fmt_from_suffix = _SUFFIX_TO_FORMAT.get(path.suffix.lower())
    if fmt_from_suffix is None:
        raise _file_error(
            file,
            f"cannot tell the format from suffix {path.suffix or '(none)'!r}; accepted formats: "
            f"{accepted}; name one with --format (format= in Python)",
        )
    return fmt_from_suffix


def _read_bytes(path: Path, file: str) -> bytes:
    if file == STDIN:
        return sys.stdin.buffer.read()
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise _file_error(file, "file not found") from None
    except IsADirectoryError:
        raise _file_error(file, "is a directory, not a file") from None
    except OSError as exc:
        raise _file_error(file, f"cannot read file: {exc.strerror or exc}") from None


def _decode(data: bytes, file: str) -> str:
    """Decode UTF-8 (optional BOM); a bad byte is reported by line and 0-based file byte offset."""
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        line = data.count(b"\n", 0, offset) + 1
        hint = ""
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            hint = " (the file looks like UTF-16; save it as UTF-8)"
        raise _file_error(
            file,
            f"not valid UTF-8: byte 0x{data[offset]:02x} at byte offset {offset} (0-based, from the start of the file){hint}",
            row=line,
        ) from None


def _json_type(value: Any) -> str:
    """Name a value's type the way a user of the file would (JSON names where they apply)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    return type(value).__name__


# --------------------------------------------------------------------------------------------
# Format readers: each returns a RecordTable with structural problems collected, never raising for
# row-level trouble (only for problems that stop the whole file being parsed).
# --------------------------------------------------------------------------------------------


def _allow_long_fields() -> None:
    """Lift the csv module's 128 KB field limit: a long report is a report, not an error."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:  # C long is 32 bits on some platforms
            limit //= 2


def _read_delimited(text: str, file: str, delimiter: str) -> RecordTable:
    """CSV/TSV via the csv module; records carry the line they start on."""
    table = RecordTable(file=file, unit="line", columns=[], records=[])
    table.records.extend(_delimited_records(io.StringIO(text, newline=""), table, delimiter))
    return table


class _KeptLines:
    """Lines handed to the csv reader, keeping those of the record being read (to re-check it)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.taken: list[str] = []

    def __iter__(self) -> _KeptLines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.taken.append(line)
        return line


def _delimited_records(lines: Iterable[str], table: RecordTable, delimiter: str) -> Iterator[_Record]:
    """CSV/TSV records read from ``lines`` one by one (the header goes to ``table.columns``,
    problems to ``table.problems``); each record carries the line it starts on."""
    _allow_long_fields()
    file = table.file
    kept = _KeptLines(lines)
    reader = csv.reader(kept, delimiter=delimiter)
    header: list[str] | None = None
    start = 1
    last: tuple[int, int, list[str]] | None = None  # (start line, end line, its lines) of the last record
    while True:
        kept.taken = []
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            table.problems.append(InputProblem(file=file, row=start, unit="line", message=f"cannot parse record: {exc}"))
            start = reader.line_num + 1
            continue
        rec_start, start = start, reader.line_num + 1
        if not fields:  # blank line between records
            continue
        last = (rec_start, reader.line_num, kept.taken)
        if header is None:
            header = [name.strip() for name in fields]
            table.columns = header
            continue
        rec = _Record(pos=rec_start, values=dict(zip(header, fields, strict=False)))
        if len(fields) != len(header):
            rec.short = len(fields) < len(header)
            table.problems.append(table.problem(f"record has {len(fields)} fields, the header has {len(header)}", rec))
        yield rec

    if header is None:
        raise _file_error(file, "file is empty (no header row)", unit="line")
    for name in dict.fromkeys(header):
        if name and header.count(name) > 1:
            table.problems.append(
                InputProblem(
                    file=file,
                    row=1,
                    unit="line",
                    field=name,
                    message=f"column appears {header.count(name)} times in the header",
                )
            )
    # Non-strict csv parsing silently swallows the rest of the file into a quoted field that is
    # never closed; re-parse the last record strictly to catch that.
    if last is not None and last[1] > last[0]:
        try:
            list(csv.reader(io.StringIO("".join(last[2]), newline=""), delimiter=delimiter, strict=True))
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                table.problems.append(
                    InputProblem(
                        file=file,
                        row=last[0],
                        unit="line",
                        message="quoted field is never closed (runs to the end of the file)",
                    )
                )


def _add_object_records(table: RecordTable, items: Iterable[tuple[int, Any]], kind: str) -> None:
    """Add JSON objects as records; non-objects are problems. ``kind`` names the container."""
    table.records.extend(_object_records(table, items, kind))


def _object_records(table: RecordTable, items: Iterable[tuple[int, Any]], kind: str) -> Iterator[_Record]:
    """JSON objects as records, one by one, adding their keys to ``table.columns``."""
    seen: dict[str, None] = dict.fromkeys(table.columns)
    for pos, obj in items:
        rec = _Record(pos=pos, values=obj if isinstance(obj, dict) else {})
        if not isinstance(obj, dict):
            table.problems.append(table.problem(f"{kind} is not a JSON object (got {_json_type(obj)})", rec))
            continue
        new = [name for name in obj if name not in seen]
        if new:
            seen.update(dict.fromkeys(new))
            table.columns = list(seen)
        yield rec
    table.columns = list(seen)


def _read_jsonl(text: str, file: str) -> RecordTable:
    """JSON Lines: one object per line, line numbers as positions, blank lines ignored."""
    table = RecordTable(file=file, unit="line", columns=[], records=[])
    table.records.extend(_jsonl_records(text.split("\n"), table))
    return table


def _jsonl_records(lines: Iterable[str], table: RecordTable) -> Iterator[_Record]:
    """JSON Lines records read from ``lines`` one by one (problems to ``table.problems``)."""

    def parsed() -> Iterator[tuple[int, Any]]:
        for lineno, line in enumerate(lines, start=1):
            line = line.removesuffix("\n")  # a file's lines keep their newline; split text has none
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                table.problems.append(
                    InputProblem(
                        file=table.file, row=lineno, unit="line", message=f"not valid JSON: {exc.msg} (column {exc.colno})"
                    )
                )

    return _object_records(table, parsed(), "line")


class _Obj(dict[str, Any]):
    """A JSON object that remembers keys given more than once (json.load keeps only the last)."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _Obj:
    obj = _Obj(pairs)
    counts = Counter(k for k, _ in pairs)
    obj.duplicates = [k for k, n in counts.items() if n > 1]
    return obj


def _read_json(text: str, file: str, keyed_ok: bool) -> RecordTable:
    """A ``.json`` file: a list of objects, or (when ``keyed_ok``) the ReXrank layout."""
    try:
        doc = json.loads(text, object_pairs_hook=_pairs_hook)
    except json.JSONDecodeError as exc:
        raise _file_error(file, f"not valid JSON: {exc.msg} (column {exc.colno})", row=exc.lineno) from None
    if isinstance(doc, list):
        table = RecordTable(file=file, unit="item", columns=[], records=[])
        _add_object_records(table, enumerate(doc, start=1), "item")
        return table
    if not isinstance(doc, dict):
        raise _file_error(file, f"top level must be a list of objects or an object keyed by id (got {_json_type(doc)})")
    if not keyed_ok:
        raise _file_error(
            file,
            "this JSON is an object keyed by id (ReXrank layout), which holds one report per id; "
            "give it as --refs or --cands (read_pair_files() in Python), or give a list of objects",
        )
    table = RecordTable(file=file, unit="item", columns=[], records=[], keyed=True)
    for key in getattr(doc, "duplicates", []):
        table.problems.append(table.problem("study id appears more than once in the file", id=key))
    seen: dict[str, None] = {}
    for key, study in doc.items():
        rec = _Record(pos=None, values=study if isinstance(study, dict) else {}, key=key)
        if not isinstance(study, dict):
            table.problems.append(table.problem(f"study is not a JSON object (got {_json_type(study)})", rec))
            continue
        for name in study:
            seen.setdefault(name, None)
        table.records.append(rec)
    table.columns = list(seen)
    return table


PARQUET_EXTRA = "pip install 'cxreval[parquet]'"


def _pyarrow_parquet(file: str) -> Any:
    """``pyarrow.parquet``, or an InputError naming the file and the extra to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _file_error(file, f"reading Parquet needs pyarrow, in the optional extra 'parquet': {PARQUET_EXTRA}") from None
    return pq


def _read_parquet(path: Path, file: str, wanted: Sequence[str]) -> RecordTable:
    """Parquet via pyarrow (the ``parquet`` extra); only the wanted columns are converted, keeping
    their Python types."""
    pq = _pyarrow_parquet(file)

    try:
        pf = pq.ParquetFile(io.BytesIO(sys.stdin.buffer.read()) if file == STDIN else path)
        columns = list(pf.schema_arrow.names)
        present = [c for c in dict.fromkeys(wanted) if c in columns]
        arrow = pf.read(columns=present) if present else None
        n_rows = pf.metadata.num_rows
        data = {c: arrow.column(c).to_pylist() for c in present} if arrow is not None else {}
    except FileNotFoundError:
        raise _file_error(file, "file not found") from None
    except Exception as exc:  # pyarrow raises several types (ArrowInvalid, OSError, ...)
        raise _file_error(file, f"cannot read as Parquet: {exc}") from None
    records = [_Record(pos=i + 1, values={c: data[c][i] for c in present}) for i in range(n_rows)]
    return RecordTable(file=file, unit="row", columns=columns, records=records)


def load_table(
    path: PathLike, format: str | None, wanted: Sequence[str], keyed_ok: bool, *, formula_guards: bool = False
) -> RecordTable:
    """Read any supported file into records, collecting (not raising) every problem found.

    ``keyed_ok`` accepts the ReXrank layout (a JSON object keyed by id). ``-`` is standard input.
    Public for readers of other tables (``cxreval agree`` reads label files with it) so that
    every input error in cxreval looks the same. ``formula_guards``: a table cxreval may have
    written (``human_ratings.csv``, a perturbation suite): in CSV / TSV, the ``'`` that
    :func:`cxreval.outputs.write_csv` puts before a cell that would start a spreadsheet formula
    is removed, so ids and reports read back as they were.
    """
    file = os.fspath(path)
    p = Path(path)
    fmt = _resolve_format(p, file, format)
    if fmt == "parquet":
        if file != STDIN and not p.exists():
            raise _file_error(file, "file not found")
        return _read_parquet(p, file, wanted)
    text = _decode(_read_bytes(p, file), file)
    if fmt in ("csv", "tsv"):
        table = _read_delimited(text, file, "," if fmt == "csv" else "\t")
        return _without_formula_guards(table) if formula_guards else table
    if fmt == "jsonl":
        return _read_jsonl(text, file)
    return _read_json(text, file, keyed_ok)


def _without_formula_guards(table: RecordTable) -> RecordTable:
    """The table with :func:`cxreval.outputs.csv_value` applied to its header and every cell."""
    table.columns = [csv_value(c) for c in table.columns]
    for rec in table.records:
        rec.values = {csv_value(k): csv_value(v) if isinstance(v, str) else v for k, v in rec.values.items()}
    return table


# --------------------------------------------------------------------------------------------
# Validation of values
# --------------------------------------------------------------------------------------------


def _missing_column(table: RecordTable, name: str, what: str = "column") -> InputProblem:
    present = ", ".join(repr(c) for c in table.columns) or "(none)"
    close = difflib.get_close_matches(name, table.columns, n=3, cutoff=0.6)
    if not close:  # catch case-only differences too ("ID" vs "id")
        close = [c for c in table.columns if c.lower() == name.lower()]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    hint += _delimiter_hint(table)
    return InputProblem(file=table.file, field=name, unit=table.unit, message=f"missing {what}; {what}s present: {present}{hint}")


def _delimiter_hint(table: RecordTable) -> str:
    """A one-column header holding ``;`` or a tab: the file is not delimited the way we read it."""
    if len(table.columns) != 1 or table.unit != "line":
        return ""
    header = table.columns[0]
    if "\t" in header:
        return "; the header is one column holding tabs: the file looks tab-separated (give --format tsv)"
    if ";" in header:
        return (
            "; the header is one column holding ';': the file looks semicolon-separated "
            "(save it comma- or tab-separated; tabs: --format tsv)"
        )
    return ""


def check_columns(table: RecordTable, names: Iterable[str]) -> set[str]:
    """Report wanted columns that no record has; return the set of those that are present."""
    present: set[str] = set()
    what = "field" if table.keyed else "column"
    for name in dict.fromkeys(names):
        if name in table.columns:
            present.add(name)
        else:
            table.problems.append(_missing_column(table, name, what))
    return present


def _get(table: RecordTable, rec: _Record, name: str) -> Any:
    """Field value, or _ABSENT after reporting it (unless a short CSV record already was)."""
    value = rec.values.get(name, _ABSENT)
    if value is _ABSENT and not rec.short:
        table.problems.append(table.problem("missing field", rec, name))
    return value


def record_id(table: RecordTable, rec: _Record, id_col: str, present: set[str]) -> str | None:
    """Normalised id of a record (stripped string), or None after reporting why there is none."""
    if table.keyed:
        raw: Any = rec.key
        field_name = None
    else:
        if id_col not in present:
            return None
        raw = _get(table, rec, id_col)
        field_name = id_col
    if raw is _ABSENT:
        return None
    if raw is None:
        table.problems.append(table.problem("empty id (null)", rec, field_name))
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        table.problems.append(table.problem(f"id must be text or an integer, got {_json_type(raw)}", rec, field_name))
        return None
    ident = _stripped_id(raw)
    if not ident:
        table.problems.append(table.problem("empty id", rec, field_name))
        return None
    return ident


def _stripped_id(raw: str) -> str:
    """An id stripped of surrounding whitespace, except leading whitespace that keeps it from
    starting a spreadsheet formula: ``"\\t=2+2"`` stays as given (stripped, it would be ``=2+2``)."""
    ident = raw.strip()
    if formula_like(ident) and raw[:1].isspace():
        return raw.rstrip()
    return ident


def _text_of(table: RecordTable, rec: _Record, col: str, present: set[str]) -> str | None:
    """Stripped report text, or None after reporting why it cannot be used."""
    if col not in present:
        return None
    value = _get(table, rec, col)
    if value is _ABSENT:
        return None
    if not isinstance(value, str):
        table.problems.append(table.problem(f"expected report text, got {_json_type(value)}", rec, col))
        return None
    text = value.strip()
    if not text:
        table.problems.append(table.problem("empty report" if not value else "empty report (whitespace only)", rec, col))
        return None
    return text


def _meta_of(table: RecordTable, rec: _Record, col: str, present: set[str]) -> str | None:
    """A kept extra column as text: strings stripped, numbers/booleans as text, null as ''."""
    if col not in present:
        return None
    value = _get(table, rec, col)
    if value is _ABSENT:
        return None
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    table.problems.append(table.problem(f"expected text or a number, got {_json_type(value)}", rec, col))
    return None


@dataclass
class _Row:
    ident: str
    rec: _Record
    texts: dict[str, str]
    meta: dict[str, str]


def _extract(
    table: RecordTable,
    id_col: str,
    text_cols: Sequence[str],
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
) -> list[_Row]:
    """Validate every record; problems go to ``table.problems``, complete rows are returned.

    Ids must be unique, or unique within each system when ``system_col`` is given (long format:
    one row per study and system).
    """
    checker = _RowChecker(table, id_col, text_cols, meta_cols, system_col)
    if not table.records:
        checker.no_records()
        return []
    checker.find_columns()
    return [row for rec in table.records if (row := checker.check(rec)) is not None]


class _RowChecker:
    """The checks of one record (id, texts, kept columns, unique id), shared by the reader of a
    whole table and the streamed reader; problems go to ``table.problems``."""

    def __init__(
        self,
        table: RecordTable,
        id_col: str,
        text_cols: Sequence[str],
        meta_cols: Sequence[str] = (),
        system_col: str | None = None,
        *,
        unique: bool = True,
    ) -> None:
        self.table = table
        self.id_col = id_col
        self.text_cols = list(text_cols)
        self.system_col = system_col
        self.extra = [*meta_cols, *([system_col] if system_col else [])]
        self.wanted = [*([] if table.keyed else [id_col]), *self.text_cols, *self.extra]
        self.present: set[str] = set()
        self.unique = unique
        """Check that ids are unique (a second reading of a checked file need not: it would hold every id)."""

        self.first_seen: dict[tuple[str | None, str], int | None] = {}  # positions only: memory stays small

    def find_columns(self) -> None:
        """Name the wanted columns the table lacks (once its columns are known)."""
        self.present = check_columns(self.table, self.wanted)

    def assume_columns(self) -> None:
        """Check records before the columns are known (JSON Lines, streamed): every wanted column
        is taken as present, and :meth:`settle_columns` fixes that at the end."""
        self.present = set(self.wanted)

    def settle_columns(self) -> None:
        """After :meth:`assume_columns`: a wanted column no record had is one missing column, not a
        missing field on every record."""
        absent = [c for c in self.wanted if c not in self.table.columns]
        if not absent:
            return
        self.table.problems[:] = [q for q in self.table.problems if not (q.field in absent and q.message == "missing field")]
        what = "field" if self.table.keyed else "column"
        self.table.problems[:0] = [_missing_column(self.table, c, what) for c in absent]

    def no_records(self) -> None:
        """The problems of a table without records."""
        # Header-only CSV/Parquet: missing columns are still worth naming; JSON has no header.
        if self.table.columns:
            check_columns(self.table, self.wanted)
        if not self.table.problems:
            self.table.problems.append(InputProblem(file=self.table.file, unit=self.table.unit, message="file has no records"))

    def check(self, rec: _Record) -> _Row | None:
        """The record as a complete row, or None after reporting what is wrong with it."""
        table, present, system_col = self.table, self.present, self.system_col
        ident = rec.ident = record_id(table, rec, self.id_col, present)
        texts = {c: _text_of(table, rec, c, present) for c in self.text_cols}
        meta = {c: _meta_of(table, rec, c, present) for c in self.extra}
        system = meta.get(system_col) if system_col else None
        if system_col and system == "":
            table.problems.append(table.problem("empty system name", rec, system_col))
            return None
        if ident is not None and self.unique:
            key = (system, ident)
            if key in self.first_seen:
                pos = self.first_seen[key]
                where = "earlier in the file" if pos is None else f"first at {table.unit} {pos}"
                of = f" for system {system!r}" if system_col else ""
                table.problems.append(
                    table.problem(f"duplicate id {ident!r}{of} ({where})", rec, None if table.keyed else self.id_col)
                )
                return None
            self.first_seen[key] = rec.pos
        if ident is None or any(v is None for v in texts.values()) or any(v is None for v in meta.values()):
            return None
        return _Row(ident, rec, texts, meta)  # type: ignore[arg-type]


def _section_field(section: str) -> str:
    if section not in SECTIONS:
        raise ValueError(f"section must be one of {', '.join(map(repr, SECTIONS))}, got {section!r}")
    return SECTIONS[section]


def _text_field(
    table: RecordTable, text_col: str | None, section: str | None, default: str, keyed_default: str | None
) -> str | None:
    """The field a table's report text is read from: the one named, or the layout's default.

    Tabular files read ``text_col`` (or ``default``). A ReXrank-layout file reads ``text_col``
    when named, else ``section``'s field, else ``keyed_default``; with none of these it records a
    problem (returns ``None``) rather than guess, because the layout holds several texts.
    """
    if not table.keyed:
        return text_col or default
    if text_col is not None and section is not None:
        table.problems.append(
            InputProblem(
                file=table.file,
                unit=table.unit,
                field=text_col,
                message=f"name the field either as a column ({text_col!r}) or as a section ({section!r}), not both",
            )
        )
        return None
    if text_col is not None:
        return text_col
    if section is not None:
        return _section_field(section)
    if keyed_default is not None:
        return keyed_default
    table.problems.append(
        InputProblem(
            file=table.file,
            unit=table.unit,
            message="a ReXrank-layout file holds several texts per study; name the field to read "
            f"(fields present: {', '.join(map(repr, table.columns)) or '(none)'})",
        )
    )
    return None


def _meta_dict(row: _Row, meta_cols: Sequence[str]) -> dict[str, str]:
    return {c: row.meta[c] for c in meta_cols}


# --------------------------------------------------------------------------------------------
# Public readers
# --------------------------------------------------------------------------------------------


def read_pairs(
    path: PathLike,
    *,
    id_col: str = "id",
    reference_col: str = "reference",
    candidate_col: str = "candidate",
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
    format: str | None = None,
) -> list[ReportPair]:
    """Read one file holding an id, a reference and a candidate report per record.

    ``meta_cols`` are extra columns to keep in :attr:`ReportPair.meta`. With ``system_col`` the
    file is in long format (one row per study and system; ids unique within a system) and each
    pair carries its :attr:`ReportPair.system`. Pairs come back in file order. ``path`` may be
    ``-`` for standard input (then ``format`` is needed). Raises :class:`InputError` listing every
    problem in the file; warns (:class:`CopiedCandidatesWarning`) when most candidates equal
    their reference.
    """
    wanted = [id_col, reference_col, candidate_col, *meta_cols, *([system_col] if system_col else [])]
    table = load_table(path, format, wanted, keyed_ok=False)
    rows = _extract(table, id_col, [reference_col, candidate_col], meta_cols, system_col)
    if table.problems:
        raise InputError(table.problems)
    pairs = [
        ReportPair(
            pair_id=r.ident,
            reference=r.texts[reference_col],
            candidate=r.texts[candidate_col],
            meta=_meta_dict(r, meta_cols),
            system=r.meta[system_col] if system_col else None,
        )
        for r in rows
    ]
    _warn_copied(pairs, f"{table.file} (column {candidate_col!r})")
    return pairs


#: Formats :class:`PairStream` reads record by record (the others are read whole).
STREAM_FORMATS: tuple[InputFormat, ...] = ("csv", "tsv", "jsonl")
#: Bytes of a pairs file in one chunk of :meth:`PairStream.plan` (about 800 IU X-ray pairs).
CHUNK_BYTES = 1 << 19
#: Bytes read at a time while a file is cut into chunks.
_SCAN_BLOCK = 8 << 20
#: Problems a streamed check keeps (a file with millions of bad rows must not fill memory).
MAX_KEPT_PROBLEMS = 1_000


class PairStream:
    """A pairs file read in bounded memory: :meth:`check`, then iterate.

    :meth:`check` reads the whole file once and raises :class:`InputError` listing every
    problem in the order :func:`read_pairs` lists them (at most :data:`MAX_KEPT_PROBLEMS` are
    kept; the rest are counted), warns about copied candidates and counts the pairs of each
    system. Iterating then reads the file again and yields the :class:`ReportPair` objects
    :func:`read_pairs` returns, one at a time. Only a regular file is read twice: standard
    input, a pipe or a process substitution is first copied to a temporary file. A file that
    changes between or during the readings stops with an :class:`InputError`. The check keeps
    one entry per id (to find duplicates, about 150 bytes a pair); the second reading keeps none.
    Formats: :data:`STREAM_FORMATS`.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        id_col: str = "id",
        reference_col: str = "reference",
        candidate_col: str = "candidate",
        meta_cols: Sequence[str] = (),
        system_col: str | None = None,
        format: str | None = None,
    ) -> None:
        self.file = os.fspath(path)
        self.format = _resolve_format(Path(path), self.file, format)
        if self.format not in STREAM_FORMATS:
            raise ValueError(
                f"{self.file}: {self.format} files are read whole (read_pairs); streamed formats are {', '.join(STREAM_FORMATS)}"
            )
        self.id_col, self.reference_col, self.candidate_col = id_col, reference_col, candidate_col
        self.meta_cols = list(meta_cols)
        self.system_col = system_col
        self.systems: dict[str | None, int] = {}
        """Pairs per system, in order of first appearance (``{None: n}`` without a system column)."""
        self._checked: tuple[int, int] | None = None  # (size, mtime_ns) of the checked file
        self._spool: Any = None
        if self.file == STDIN or not _is_regular_file(self.file):
            self._spool = _spooled(self.file)

    @classmethod
    def streams(cls, path: PathLike, format: str | None = None) -> bool:
        """Whether ``path`` is in a format this class reads record by record."""
        try:
            return _resolve_format(Path(path), os.fspath(path), format) in STREAM_FORMATS
        except InputError:
            return False

    @property
    def n_pairs(self) -> int:
        return sum(self.systems.values())

    def check(self) -> int:
        """Read the whole file once; raise :class:`InputError` with every problem; return the pairs."""
        self._checked = None
        self.systems = {}
        copied: dict[str | None, list[int]] = {}
        pairs, problems = self._read(unique=True)
        for pair in pairs:
            self.systems[pair.system] = self.systems.get(pair.system, 0) + 1
            counts = copied.setdefault(pair.system, [0, 0])
            counts[0] += pair.reference == pair.candidate
            counts[1] += 1
        if problems.found:
            raise problems.error()
        source = f"{self.file} (column {self.candidate_col!r})"
        for system, (same, n) in copied.items():
            warn_copied_counts(same, n, source if system is None else f"{source}, system {system!r}")
        self._checked = self._stamp()
        return self.n_pairs

    def __iter__(self) -> Iterator[ReportPair]:
        if self._checked is None:
            raise RuntimeError("PairStream.check() must run before the pairs are read")
        if self._stamp() != self._checked:
            raise self._changed()
        pairs, problems = self._read(unique=False)  # ids were checked; holding them again would grow with the file
        seen: dict[str | None, int] = {}
        for pair in pairs:
            seen[pair.system] = seen.get(pair.system, 0) + 1
            if seen[pair.system] > self.systems.get(pair.system, 0):
                raise self._changed()
            yield pair
        if problems.found or seen != self.systems or self._stamp() != self._checked:
            raise self._changed(problems.error().problems if problems.found else ())

    def _changed(self, problems: Iterable[InputProblem] = ()) -> InputError:
        return InputError([InputProblem(file=self.file, message="the file changed after it was checked; run again"), *problems])

    def _stamp(self) -> tuple[int, int]:
        if self._spool is not None:
            return (0, 0)
        st = os.stat(self.file)
        return (st.st_size, st.st_mtime_ns)

    def _read(self, *, unique: bool, lines: Iterable[str] | None = None) -> tuple[Iterator[ReportPair], _Problems]:
        """The pairs of the records without a problem, and the problems (complete once the pairs are).
        ``lines``: the lines to read (default the whole file's)."""
        problems = _Problems(self.file)
        structure = RecordTable(file=self.file, unit="line", columns=[], records=[])  # the parser's problems
        rows = RecordTable(file=self.file, unit="line", columns=[], records=[])  # the records' problems
        checker = _RowChecker(
            rows, self.id_col, [self.reference_col, self.candidate_col], self.meta_cols, self.system_col, unique=unique
        )
        jsonl = self.format == "jsonl"

        def pairs() -> Iterator[ReportPair]:
            read = self._lines() if lines is None else lines
            records = (
                _jsonl_records(read, structure)
                if jsonl
                else _delimited_records(read, structure, "," if self.format == "csv" else "\t")
            )
            n_records = 0
            for rec in records:
                if n_records == 0:  # JSON Lines name their columns as they go: assume, settle at the end
                    checker.present = set(checker.wanted) if jsonl else set(checker.wanted) & set(structure.columns)
                n_records += 1
                row = checker.check(rec)
                problems.keep(structure.problems, rows.problems)
                if row is not None:
                    yield ReportPair(
                        pair_id=row.ident,
                        reference=row.texts[self.reference_col],
                        candidate=row.texts[self.candidate_col],
                        meta=_meta_dict(row, self.meta_cols),
                        system=row.meta[self.system_col] if self.system_col else None,
                    )
            problems.keep(structure.problems, rows.problems)  # those found after the last record
            if n_records == 0:
                checker.table = structure
                checker.no_records()
                problems.keep(structure.problems, rows.problems)
            else:
                what = "column"
                absent = [c for c in dict.fromkeys(checker.wanted) if c not in structure.columns]
                problems.missing = [_missing_column(structure, c, what) for c in absent]
                if jsonl:
                    problems.settle(absent)
            problems.done = True

        return pairs(), problems

    def _lines(self) -> Iterator[str]:
        """The file's lines, decoded one by one (UTF-8, an optional BOM); a bad byte stops the
        read with the same message :func:`read_pairs` gives. CSV/TSV lines also end at a lone
        carriage return, as :func:`read_pairs` reads them; JSON Lines end at line feeds only."""
        split_cr = self.format != "jsonl"
        if self._spool is not None:
            self._spool.seek(0)
            yield from _decoded_lines(self._spool, self.file, split_cr=split_cr)
            return
        try:
            fh = open(self.file, "rb")  # noqa: SIM115 - closed below, after the generator is done
        except FileNotFoundError:
            raise _file_error(self.file, "file not found") from None
        except IsADirectoryError:
            raise _file_error(self.file, "is a directory, not a file") from None
        except OSError as exc:
            raise _file_error(self.file, f"cannot read file: {exc.strerror or exc}") from None
        with fh:
            yield from _decoded_lines(fh, self.file, split_cr=split_cr)

    def plan(self, chunk_bytes: int = CHUNK_BYTES) -> list[PairChunk] | None:
        """The file cut into byte ranges of about ``chunk_bytes`` that workers read themselves
        (:class:`PairChunk`), found without parsing a record: a range ends after a line feed that
        is outside any quoted field (an even count of ``"`` before it; every line feed of JSON
        Lines). None where the file must be read here, in order: standard input or a pipe, an
        empty file, a CSV/TSV file whose header never ends. A cut a stray ``"`` put inside a
        quoted field is caught by the reading: :meth:`PairChunk.read` then finds a problem, and
        the caller reads the file in order (:meth:`check`) instead."""
        if self._spool is not None:
            return None
        try:
            stamp = self._stamp()
            with open(self.file, "rb") as fh:
                head, ends = _record_ends(fh, chunk_bytes, quoted=self.format != "jsonl")
        except OSError:
            return None
        if head is None or not ends or ends[-1] != stamp[0]:
            return None
        columns = (self.id_col, self.reference_col, self.candidate_col, tuple(self.meta_cols), self.system_col)
        starts = [head, *ends[:-1]]
        prefix = b"" if self.format == "jsonl" else _read_range(self.file, 0, head)
        return [PairChunk(self.file, self.format, columns, prefix, a, b, stamp) for a, b in zip(starts, ends) if b > a]


def _record_ends(fh: Any, chunk_bytes: int, *, quoted: bool) -> tuple[int | None, list[int]]:
    """(where the header record ends, where each chunk ends) in a binary file: each end just after
    a line feed at an even count of quote characters (``quoted``: CSV/TSV) at least ``chunk_bytes``
    after the last end; the last end is the file's size. JSON Lines have no header (0)."""
    head: int | None = None if quoted else 0
    ends: list[int] = []
    base = parity = 0
    target = 0 if quoted else chunk_bytes
    while block := fh.read(_SCAN_BLOCK):
        i = 0
        while target - base < len(block):
            j = block.find(b"\n", max(target - base, i))
            if j < 0:
                break
            if quoted:
                parity = (parity + block.count(b'"', i, j)) & 1
                i = j
                if parity:
                    target = base + j + 1  # inside a quoted field: the next line feed may end the record
                    continue
            end = base + j + 1
            if head is None:
                head = end
            else:
                ends.append(end)
            target = end + chunk_bytes
        if quoted:
            parity = (parity + block.count(b'"', i)) & 1
        base += len(block)
    if head is not None and (not ends or ends[-1] < base) and base > head:
        ends.append(base)
    return head, ends


def _ends_outside_quotes(text: str, delimiter: str) -> bool:
    """Whether ``text`` parses as CSV strictly to its end: a chunk whose cut fell inside a quoted
    field ends in an unclosed quote (``unexpected end of data``)."""
    _allow_long_fields()
    try:
        for _ in csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), delimiter=delimiter, strict=True):
            pass
    except csv.Error:
        return False
    return True


def _read_range(file: str, start: int, end: int) -> bytes:
    with open(file, "rb") as fh:
        fh.seek(start)
        return fh.read(end - start)


@dataclass(frozen=True)
class PairChunk:
    """A byte range of a pairs file that a worker process reads, checks and turns into pairs
    itself (:meth:`PairStream.plan`): only the range's bytes travel, never its pairs."""

    file: str
    format: str
    #: id, reference, candidate, kept and system columns, as :class:`PairStream` names them.
    columns: tuple[str, str, str, tuple[str, ...], str | None]
    #: The header record (CSV/TSV), read before the range's lines; empty for JSON Lines.
    head: bytes
    start: int
    end: int
    #: (size, modification time) of the file when it was cut.
    stamp: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    def read(self) -> tuple[list[ReportPair], bool]:
        """The range's pairs, and whether the reading was clean: no problem in any record and the
        file unchanged since it was cut. Not clean: the caller reads the file in order, where
        every problem is named with its file, line and field (:meth:`PairStream.check`)."""
        id_col, reference_col, candidate_col, meta_cols, system_col = self.columns
        stream = PairStream(
            self.file,
            id_col=id_col,
            reference_col=reference_col,
            candidate_col=candidate_col,
            meta_cols=meta_cols,
            system_col=system_col,
            format=self.format,
        )
        try:
            with open(self.file, "rb") as fh:
                if self._stamp(fh) != self.stamp:
                    return [], False
                fh.seek(self.start)
                body = fh.read(self.nbytes)
                if self._stamp(fh) != self.stamp:  # written to while this range was read
                    return [], False
            if not body.strip(b"\r\n"):
                return [], True  # empty lines between records: no record, no problem
            if self.start > 0 and body.startswith(codecs.BOM_UTF8) and not self.head:
                return [], False  # a BOM inside the file is text, not a file's mark: read in order
            text = (self.head + body).decode("utf-8", errors="strict").removeprefix("\ufeff")
            if self.format != "jsonl" and not _ends_outside_quotes(text, "," if self.format == "csv" else "\t"):
                return [], False  # a stray quote put the cut inside a quoted field: read in order
            # the lines of the text decoded once: a line feed ends a line, and for CSV / TSV a lone
            # carriage return too (as _decoded_lines splits the file when it is read in order)
            lines = io.StringIO(text, newline="\n" if self.format == "jsonl" else "")
            pairs, problems = stream._read(unique=False, lines=lines)
            out = list(pairs)
        except (InputError, OSError, UnicodeDecodeError):
            return [], False
        return out, not problems.found

    @staticmethod
    def _stamp(fh: Any) -> tuple[int, int]:
        st = os.fstat(fh.fileno())
        return (st.st_size, st.st_mtime_ns)

    def census(self) -> ChunkCensus:
        """Read the range and count its pairs (:class:`ChunkCensus`); not clean where a record has
        a problem, the file changed, or an id repeats inside the range."""
        pairs, clean = self.read()
        ids = [_id_hash(p.system, p.pair_id) for p in pairs]
        if not clean or len(set(ids)) != len(ids):
            return ChunkCensus(False)
        counts: dict[str | None, list[int]] = {}
        for p in pairs:
            n = counts.setdefault(p.system, [0, 0])
            n[0] += 1
            n[1] += p.reference == p.candidate
        return ChunkCensus(True, tuple((system, n, same) for system, (n, same) in counts.items()), b"".join(ids))


@dataclass(frozen=True)
class ChunkCensus:
    """What checking one :class:`PairChunk` found: whether it read clean, each system's pairs (in
    order of first appearance: the system, its pairs, how many copy their reference), and an
    8-byte hash of each (system, id), for a repeat across chunks."""

    clean: bool
    systems: tuple[tuple[str | None, int, int], ...] = ()
    ids: bytes = b""


def _id_hash(system: str | None, pair_id: str) -> bytes:
    key = pair_id if system is None else f"{system}\x00{pair_id}"
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()


class _Problems:
    """A streamed check's problems, in :func:`read_pairs`' order (the parser's, then missing
    columns, then the records'), at most :data:`MAX_KEPT_PROBLEMS` kept and the rest counted."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.structure: list[InputProblem] = []
        self.rows: list[InputProblem] = []
        self.missing: list[InputProblem] = []
        self.not_kept = 0
        self.not_kept_missing_field: Counter[str | None] = Counter()
        self.done = False

    def keep(self, structure: list[InputProblem], rows: list[InputProblem]) -> None:
        """Move new problems out of the readers' lists, keeping no more than the cap."""
        for source, kept in ((structure, self.structure), (rows, self.rows)):
            for q in source:
                if len(self.structure) + len(self.rows) < MAX_KEPT_PROBLEMS:
                    kept.append(q)
                else:
                    self.not_kept += 1
                    if q.message == "missing field":
                        self.not_kept_missing_field[q.field] += 1
            source.clear()

    def settle(self, absent: Sequence[str]) -> None:
        """A column no record has is one missing column, not a missing field on every record."""
        self.rows = [q for q in self.rows if not (q.field in absent and q.message == "missing field")]
        self.not_kept -= sum(self.not_kept_missing_field[c] for c in absent)

    @property
    def found(self) -> bool:
        return bool(self.structure or self.missing or self.rows or self.not_kept)

    def error(self) -> InputError:
        return InputError([*self.structure, *self.missing, *self.rows], not_kept=self.not_kept)


def _is_regular_file(file: str) -> bool:
    import stat

    try:
        return stat.S_ISREG(os.stat(file).st_mode)
    except OSError:
        return True  # let the reader name the problem (not found, a directory, ...)


def _spooled(file: str) -> Any:
    """A temporary copy of standard input, a pipe or a process substitution (read once only)."""
    import shutil
    import tempfile

    spool = tempfile.TemporaryFile()
    if file == STDIN:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        return spool
    try:
        with open(file, "rb") as fh:
            shutil.copyfileobj(fh, spool)
    except OSError as exc:
        spool.close()
        raise _file_error(file, f"cannot read file: {exc.strerror or exc}") from None
    return spool


def _decoded_lines(fh: Any, file: str, *, split_cr: bool = False) -> Iterator[str]:
    """Lines of a binary file as text. UTF-8 never puts a newline byte inside a character, so
    decoding line by line is exact; the message of a bad byte is :func:`_decode`'s (its line is
    counted in line feeds, as there). ``split_cr``: a lone carriage return also ends a line, as
    in ``io.StringIO(text, newline="")`` (how :func:`read_pairs` reads CSV/TSV)."""
    offset = 0
    for lineno, raw in enumerate(fh, start=1):
        skip = len(codecs.BOM_UTF8) if lineno == 1 and raw.startswith(codecs.BOM_UTF8) else 0
        try:
            line = raw[skip:].decode("utf-8")
        except UnicodeDecodeError as exc:
            at = offset + skip + exc.start
            hint = (
                " (the file looks like UTF-16; save it as UTF-8)"
                if lineno == 1 and raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
                else ""
            )
            raise _file_error(
                file,
                f"not valid UTF-8: byte 0x{raw[skip + exc.start]:02x} at byte offset {at} "
                f"(0-based, from the start of the file){hint}",
                row=lineno,
            ) from None
        offset += len(raw)
        if split_cr and "\r" in line:
            yield from _LONE_CR.split(line)
        else:
            yield line


#: The end of a line at a carriage return not followed by a line feed.
_LONE_CR = re.compile(r"(?<=\r)(?!\n)(?=.)", re.S)


def _reports_rows(
    table: RecordTable,
    id_col: str,
    text_col: str | None,
    section: str | None,
    *,
    default: str,
    keyed_default: str | None,
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
) -> tuple[list[_Row], str | None]:
    """Validated rows of a one-text-per-id table and the text field they were read from."""
    col = _text_field(table, text_col, section, default, keyed_default)
    if col is None:
        return [], None
    return _extract(table, id_col, [col], meta_cols, system_col), col


def read_reports(
    path: PathLike,
    *,
    id_col: str = "id",
    text_col: str | None = None,
    format: str | None = None,
    section: str | None = None,
    keyed_default: str | None = None,
) -> dict[str, str]:
    """Read one report text per id, in file order.

    Tabular files (CSV, TSV, JSONL, Parquet, JSON list) read ``id_col`` and ``text_col``
    (default ``report``); ``section`` does not apply to them. A ReXrank-layout JSON (object keyed
    by study id) reads the field named by ``text_col``, or else the one ``section`` picks:
    ``report`` (full "Findings: ... Impression: ..." text), ``findings`` (``section_findings``) or
    ``impression`` (``section_impression``), or else ``keyed_default`` (for example
    :data:`PREDICTION_FIELD` for a file of generated reports); naming none is an error, never a
    guess.
    """
    if section is not None:
        _section_field(section)  # an unknown section is a programming error, raised at once
    table = load_table(path, format, [id_col, text_col or "report"], keyed_ok=True)
    rows, col = _reports_rows(table, id_col, text_col, section, default="report", keyed_default=keyed_default)
    if table.problems:
        raise InputError(table.problems)
    assert col is not None
    return {r.ident: r.texts[col] for r in rows}


def _loose_id(ident: str) -> str:
    """An id with the differences spreadsheets introduce removed: leading zeros and a ``.0``."""
    m = re.fullmatch(r"0*(\d+)(?:\.0+)?", ident)
    return (m.group(1) or "0") if m else ident


def read_pair_files(
    refs_path: PathLike,
    cands_path: PathLike,
    *,
    id_col: str | None = None,
    ref_id_col: str | None = None,
    cand_id_col: str | None = None,
    reference_col: str | None = None,
    candidate_col: str | None = None,
    reference_format: str | None = None,
    candidate_format: str | None = None,
    section: str | None = None,
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
) -> list[ReportPair]:
    """Join a references file and a candidates file on id, in candidate-file order.

    The text read is the column named: ``reference_col`` (default ``reference``) and
    ``candidate_col`` (default ``candidate``) in tabular files. In a ReXrank-layout JSON the
    references read ``reference_col`` if named, else the field of ``section`` (default
    ``report``); candidates read ``candidate_col`` if named, else ``model_prediction``.
    ``section`` applies to a ReXrank-layout references file only; naming it for a tabular one is
    an error. ``ref_id_col`` / ``cand_id_col`` default to ``id_col`` (default ``id``); naming an id
    column for a ReXrank-layout file (keyed by id) is an error. ``meta_cols`` are read from
    the candidates file when it has them, else from the references file. With ``system_col`` the
    candidates file is in long format (one row per study and system) and every system must
    cover every reference.

    Problems in both files are collected and raised together; only when both files are clean
    are the ids matched, and then every id present in one file only is a problem, in both
    directions (with a hint when the ids differ only by leading zeros or ``.0``).
    """
    if section is not None:
        _section_field(section)  # an unknown section is a programming error, raised at once
    ref_id = ref_id_col or id_col or "id"
    cand_id = cand_id_col or id_col or "id"
    system = [system_col] if system_col else []
    refs = load_table(refs_path, reference_format, [ref_id, reference_col or "reference", *meta_cols], keyed_ok=True)
    cands = load_table(cands_path, candidate_format, [cand_id, candidate_col or "candidate", *meta_cols, *system], keyed_ok=True)
    cand_meta = [c for c in meta_cols if c in cands.columns or c not in refs.columns]
    ref_meta = [c for c in meta_cols if c not in cand_meta]
    ref_rows, ref_col = _reports_rows(
        refs, ref_id, reference_col, section, default="reference", keyed_default=SECTIONS["report"], meta_cols=ref_meta
    )
    cand_rows, cand_col = _reports_rows(
        cands,
        cand_id,
        candidate_col,
        None,
        default="candidate",
        keyed_default=PREDICTION_FIELD,
        meta_cols=cand_meta,
        system_col=system_col,
    )
    for table, named in ((refs, ref_id_col or id_col), (cands, cand_id_col or id_col)):
        if table.keyed and named is not None:  # a column the user named must be the one read
            table.problems.append(
                InputProblem(
                    file=table.file,
                    unit=table.unit,
                    field=named,
                    message="a ReXrank-layout file is keyed by study id, so an id column does not apply to it; "
                    "leave --id-col / --ref-id-col / --cand-id-col out for this file",
                )
            )
    if section is not None and not refs.keyed:
        refs.problems.append(
            InputProblem(
                file=refs.file,
                unit=refs.unit,
                message=f"--section {section} applies to a references file in ReXrank JSON layout; this file is "
                "tabular: name its text column with --reference-col",
            )
        )
    problems = [*refs.problems, *cands.problems]
    if problems:
        raise InputError(problems)
    assert ref_col is not None and cand_col is not None
    ref_by_id = {r.ident: r for r in ref_rows}
    by_system: dict[str | None, set[str]] = {}
    for r in cand_rows:
        name = r.meta[system_col] if system_col else None
        by_system.setdefault(name, set()).add(r.ident)
        if r.ident not in ref_by_id:
            problems.append(cands.problem(f"id has no reference in {refs.file}", r.rec, id=r.ident))
    for name, ids in by_system.items():
        of = f" from system {name!r}" if system_col else ""
        for r in ref_rows:
            if r.ident not in ids:
                problems.append(refs.problem(f"id has no candidate{of} in {cands.file}", r.rec, id=r.ident))
    if problems:
        loose_refs = {_loose_id(i) for i in ref_by_id}
        near = [(r.ident, i) for r in cand_rows if r.ident not in ref_by_id for i in [_loose_id(r.ident)] if i in loose_refs]
        if near:
            by_loose = {_loose_id(i): i for i in ref_by_id}
            cid, loose = near[0]
            problems.append(
                InputProblem(
                    file=cands.file,
                    field=cand_id,
                    unit=cands.unit,
                    message=f"{len(near)} candidate ids match a reference id only when leading zeros or '.0' are "
                    f"ignored (e.g. {cid!r} vs {by_loose[loose]!r}); write the ids the same way in both files",
                )
            )
        raise InputError(problems)
    pairs = [
        ReportPair(
            pair_id=r.ident,
            reference=ref_by_id[r.ident].texts[ref_col],
            candidate=r.texts[cand_col],
            meta={c: (r.meta[c] if c in cand_meta else ref_by_id[r.ident].meta[c]) for c in meta_cols},
            system=r.meta[system_col] if system_col else None,
        )
        for r in cand_rows
    ]
    _warn_copied(pairs, f"{cands.file} (field {cand_col!r})")
    return pairs


def _warn_copied(pairs: Sequence[ReportPair], source: str) -> None:
    """:func:`warn_if_copied` per system (a long file's one copied system must not hide in the pool)."""
    by_system: dict[str | None, list[ReportPair]] = {}
    for p in pairs:
        by_system.setdefault(p.system, []).append(p)
    for system, group in by_system.items():
        where = source if system is None else f"{source}, system {system!r}"
        warn_if_copied([p.reference for p in group], [p.candidate for p in group], source=where)


# --------------------------------------------------------------------------------------------
# Value checks for readers of cxreval's other tables (human ratings, perturbation suites, the IU
# X-ray reports): they load a file with load_table, name their columns with check_columns and
# record_id, and check each value with the helpers below, which add an InputProblem (file,
# position, field) to the table instead of raising, so raise_problems lists every problem of
# every file at once.
# --------------------------------------------------------------------------------------------

#: One record of a :class:`~cxreval.io.RecordTable` (its position, values and id), for annotations.
Record = _Record

TRUE_WORDS = frozenset({"true", "1", "yes", "y", "t"})
FALSE_WORDS = frozenset({"false", "0", "no", "n", "f"})


def table_format(path: str | os.PathLike[str], format: str | None = None, default: str | None = "csv") -> str | None:
    """The format named, else the one the suffix picks (see :data:`cxreval.io.FORMATS`), else ``default``.

    Readers that used to read any file as CSV keep doing so for suffixes cxreval does not know.
    """
    if format is not None:
        return format
    suffix = Path(path).suffix.lower()
    return next((fmt for fmt, suffixes in FORMATS.items() if suffix in suffixes), default)


def load_whole_table(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    default: str | None = "csv",
    keyed_ok: bool = False,
    formula_guards: bool = False,
) -> RecordTable:
    """:func:`~cxreval.io.load_table` with every column read (Parquet converts only the columns named).

    For tables whose columns are found from the header (rater columns, label columns).
    """
    fmt = table_format(path, format, default)
    wanted: list[str] = []
    if fmt == "parquet" and os.fspath(path) != STDIN and Path(path).is_file():
        pq = _pyarrow_parquet(os.fspath(path))

        try:
            wanted = list(pq.ParquetFile(path).schema_arrow.names)
        except Exception:  # noqa: BLE001 - load_table reports an unreadable file with its position
            wanted = []
    return load_table(path, fmt, wanted, keyed_ok=keyed_ok, formula_guards=formula_guards)


def _field(table: RecordTable, rec: Record, col: str, present: set[str]) -> Any:
    """The field's value, or _ABSENT when its column is missing (reported by check_columns) or the
    record lacks it (reported here, unless a short CSV record was reported already)."""
    return _get(table, rec, col) if col in present else _ABSENT


def text_value(
    table: RecordTable,
    rec: Record,
    col: str,
    present: set[str],
    *,
    empty_ok: bool = False,
    numbers_ok: bool = False,
    what: str = "text",
) -> str | None:
    """The field as text, exactly as written, or None after reporting why it cannot be used.

    A value that is not a string (a JSON number, null, list; a Parquet number) is a problem,
    except integers when ``numbers_ok`` (they become their decimal string, like ids). An empty
    or whitespace-only value is a problem unless ``empty_ok``. Columns not in ``present`` were
    reported by :func:`~cxreval.io.check_columns` and give None.
    """
    value = _field(table, rec, col, present)
    if value is _ABSENT:
        return None
    if numbers_ok and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is None and empty_ok:
        return ""
    if not isinstance(value, str):
        table.problems.append(table.problem(f"expected {what}, got {_json_type(value)}", rec, col))
        return None
    if not empty_ok and not value.strip():
        table.problems.append(table.problem(f"empty {what}" + (" (whitespace only)" if value else ""), rec, col))
        return None
    return value


def number_value(table: RecordTable, rec: Record, col: str, present: set[str]) -> float | None:
    """The field as a number; empty (or null) is NaN, anything else that is not a number is a problem."""
    value = _field(table, rec, col, present)
    if value is _ABSENT:
        return None
    if value is None:
        return math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return math.nan
        try:
            return float(text)
        except ValueError:
            pass
    table.problems.append(table.problem(f"{value!r} is not a number", rec, col))
    return None


def bool_value(
    table: RecordTable,
    rec: Record,
    col: str,
    present: set[str],
    *,
    true: Iterable[str] = TRUE_WORDS,
    false: Iterable[str] = FALSE_WORDS,
) -> bool | None:
    """The field as a yes/no value: a JSON boolean, 1 / 0, or one of the words (case-insensitive)."""
    value = _field(table, rec, col, present)
    if value is _ABSENT:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    trues, falses = set(true), set(false)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in trues:
            return True
        if word in falses:
            return False
    accepted = " / ".join(sorted(trues)) + " or " + " / ".join(sorted(falses))
    table.problems.append(table.problem(f"{value!r} is not a yes/no value ({accepted})", rec, col))
    return None


class Uniqueness:
    """Reports a key (an id, a (study, candidate) pair) that an earlier record of the table already had."""

    def __init__(self, table: RecordTable, what: str = "id") -> None:
        self.table = table
        self.what = what
        self.first: dict[Any, Record] = {}

    def is_new(self, key: Any, rec: Record, field: str | None, shown: str | None = None) -> bool:
        """True for a key not seen before; otherwise adds a problem naming the first record."""
        first = self.first.get(key)
        if first is None:
            self.first[key] = rec
            return True
        where = "earlier in the file" if first.pos is None else f"first at {self.table.unit} {first.pos}"
        shown = shown if shown is not None else repr(key)
        self.table.problems.append(self.table.problem(f"duplicate {self.what} {shown} ({where})", rec, field))
        return False


def require_records(table: RecordTable) -> None:
    """Report a table with no records (unless something else is wrong with it already)."""
    if not table.records and not table.problems:
        table.problems.append(InputProblem(file=table.file, unit=table.unit, message="file has no records"))


def raise_problems(*tables: RecordTable, extra: Iterable[InputProblem] = (), error: type[InputError] = InputError) -> None:
    """Raise ``error`` listing the problems of every table (in order), then ``extra``; nothing if none."""
    problems = [p for t in tables for p in t.problems] + list(extra)
    if problems:
        raise error(problems)


def read_json_value(path: str | os.PathLike[str]) -> Any:
    """A whole JSON document (not a table), read as UTF-8; an unreadable file raises :class:`InputError`."""
    file = os.fspath(path)
    text = _decode(_read_bytes(Path(path), file), file)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _file_error(file, f"not valid JSON: {exc.msg} (column {exc.colno})", row=exc.lineno) from None
