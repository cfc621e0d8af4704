"""Tables of records from CSV, TSV, JSONL, JSON and Parquet files: the one reader every cxreval input
goes through (pairs, reports, label and rating files), with the checks of single values.

Problems are collected in :attr:`RecordTable.problems`, not raised, so that a file is reported
whole; callers raise them together with :func:`raise_problems`."""

from __future__ import annotations

import codecs
import csv
import difflib
import io
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cxreval.io.errors import InputError, InputProblem, Unit, file_error
from cxreval.io.writers import csv_value, formula_like
from cxreval.literals import InputFormat

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

#: The path that means standard input.
STDIN = "-"

# --------------------------------------------------------------------------------------------
# Internal table representation shared by all formats
# --------------------------------------------------------------------------------------------

_ABSENT: Any = object()  # a field that a record does not have at all


@dataclass
class Record:
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
    records: list[Record]
    problems: list[InputProblem] = field(default_factory=list)
    keyed: bool = False  # ReXrank layout: id is the dict key, not a column
    left_out: dict[str, str] = field(default_factory=dict)  # a dataset's studies left out of its pool, and why

    def problem(
        self,
        message: str,
        rec: Record | None = None,
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


def resolve_format(path: Path, file: str, format: str | None) -> str:
    """Pick the reader from ``format=`` or the file suffix; unknown ones are an input error."""
    accepted = ", ".join(f"{fmt} ({'/'.join(sfx)})" for fmt, sfx in FORMATS.items())
    if format is not None:
        fmt = format.lower().lstrip(".")
        fmt = _FORMAT_ALIASES.get(fmt, fmt)
        if fmt not in FORMATS:
            raise file_error(file, f"unknown format {format!r}; accepted formats: {accepted}")
        return fmt
    if file == STDIN:
        raise file_error(
            file, f"standard input has no suffix: name its format with --format (format= in Python); accepted formats: {accepted}"
        )
    fmt_from_suffix = _SUFFIX_TO_FORMAT.get(path.suffix.lower())
    if fmt_from_suffix is None:
        raise file_error(
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
        raise file_error(file, "file not found") from None
    except IsADirectoryError:
        raise file_error(file, "is a directory, not a file") from None
    except OSError as exc:
        raise file_error(file, f"cannot read file: {exc.strerror or exc}") from None


def decode_utf8(data: bytes, file: str) -> str:
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
        raise file_error(
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


def allow_long_fields() -> None:
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
    table.records.extend(delimited_records(io.StringIO(text, newline=""), table, delimiter))
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


def delimited_records(lines: Iterable[str], table: RecordTable, delimiter: str) -> Iterator[Record]:
    """CSV/TSV records read from ``lines`` one by one (the header goes to ``table.columns``,
    problems to ``table.problems``); each record carries the line it starts on."""
    allow_long_fields()
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
        rec = Record(pos=rec_start, values=dict(zip(header, fields, strict=False)))
        if len(fields) != len(header):
            rec.short = len(fields) < len(header)
            table.problems.append(table.problem(f"record has {len(fields)} fields, the header has {len(header)}", rec))
        yield rec

    if header is None:
        raise file_error(file, "file is empty (no header row)", unit="line")
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


def _object_records(table: RecordTable, items: Iterable[tuple[int, Any]], kind: str) -> Iterator[Record]:
    """JSON objects as records, one by one, adding their keys to ``table.columns``."""
    seen: dict[str, None] = dict.fromkeys(table.columns)
    for pos, obj in items:
        rec = Record(pos=pos, values=obj if isinstance(obj, dict) else {})
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
    table.records.extend(jsonl_records(text.split("\n"), table))
    return table


def jsonl_records(lines: Iterable[str], table: RecordTable) -> Iterator[Record]:
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
        raise file_error(file, f"not valid JSON: {exc.msg} (column {exc.colno})", row=exc.lineno) from None
    if isinstance(doc, list):
        table = RecordTable(file=file, unit="item", columns=[], records=[])
        _add_object_records(table, enumerate(doc, start=1), "item")
        return table
    if not isinstance(doc, dict):
        raise file_error(file, f"top level must be a list of objects or an object keyed by id (got {_json_type(doc)})")
    if not keyed_ok:
        raise file_error(
            file,
            "this JSON is an object keyed by id (ReXrank layout), which holds one report per id; "
            "give it as --refs or --cands (read_pair_files() in Python), or give a list of objects",
        )
    table = RecordTable(file=file, unit="item", columns=[], records=[], keyed=True)
    for key in getattr(doc, "duplicates", []):
        table.problems.append(table.problem("study id appears more than once in the file", id=key))
    seen: dict[str, None] = {}
    for key, study in doc.items():
        rec = Record(pos=None, values=study if isinstance(study, dict) else {}, key=key)
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
        raise file_error(file, f"reading Parquet needs pyarrow, in the optional extra 'parquet': {PARQUET_EXTRA}") from None
    return pq


def _read_parquet(path: Path, file: str, wanted: Sequence[str] | None) -> RecordTable:
    """Parquet via pyarrow (the ``parquet`` extra); only the wanted columns (None: every one) are
    converted, keeping their Python types."""
    pq = _pyarrow_parquet(file)

    try:
        pf = pq.ParquetFile(io.BytesIO(sys.stdin.buffer.read()) if file == STDIN else path)
        columns = list(pf.schema_arrow.names)
        present = columns if wanted is None else [c for c in dict.fromkeys(wanted) if c in columns]
        arrow = pf.read(columns=present) if present else None
        n_rows = pf.metadata.num_rows
        data = {c: arrow.column(c).to_pylist() for c in present} if arrow is not None else {}
    except FileNotFoundError:
        raise file_error(file, "file not found") from None
    except Exception as exc:  # pyarrow raises several types (ArrowInvalid, OSError, ...)
        raise file_error(file, f"cannot read as Parquet: {exc}") from None
    records = [Record(pos=i + 1, values={c: data[c][i] for c in present}) for i in range(n_rows)]
    return RecordTable(file=file, unit="row", columns=columns, records=records)


def load_table(
    path: PathLike, format: str | None, wanted: Sequence[str] | None, keyed_ok: bool, *, formula_guards: bool = False
) -> RecordTable:
    """Read any supported file into records, collecting (not raising) every problem found.

    ``wanted``: the columns a Parquet file converts (None: every one); other formats read all.

    ``keyed_ok`` accepts the ReXrank layout (a JSON object keyed by id). ``-`` is standard input.
    Public for readers of other tables (``cxreval agree`` reads label files with it) so that
    every input error in cxreval looks the same. ``formula_guards``: a table cxreval may have
    written (``human_ratings.csv``, a perturbation suite): in CSV / TSV, the ``'`` that
    :func:`cxreval.io.writers.write_csv` puts before a cell that would start a spreadsheet formula
    is removed, so ids and reports read back as they were.
    """
    file = os.fspath(path)
    p = Path(path)
    fmt = resolve_format(p, file, format)
    if fmt == "parquet":
        if file != STDIN and not p.exists():
            raise file_error(file, "file not found")
        return _read_parquet(p, file, wanted)
    text = decode_utf8(_read_bytes(p, file), file)
    if fmt in ("csv", "tsv"):
        table = _read_delimited(text, file, "," if fmt == "csv" else "\t")
        return _without_formula_guards(table) if formula_guards else table
    if fmt == "jsonl":
        return _read_jsonl(text, file)
    return _read_json(text, file, keyed_ok)


def _without_formula_guards(table: RecordTable) -> RecordTable:
    """The table with :func:`cxreval.io.writers.csv_value` applied to its header and every cell."""
    table.columns = [csv_value(c) for c in table.columns]
    for rec in table.records:
        rec.values = {csv_value(k): csv_value(v) if isinstance(v, str) else v for k, v in rec.values.items()}
    return table


# --------------------------------------------------------------------------------------------
# Validation of values
# --------------------------------------------------------------------------------------------


def missing_column(table: RecordTable, name: str, what: str = "column") -> InputProblem:
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
            table.problems.append(missing_column(table, name, what))
    return present


def _get(table: RecordTable, rec: Record, name: str) -> Any:
    """Field value, or _ABSENT after reporting it (unless a short CSV record already was)."""
    value = rec.values.get(name, _ABSENT)
    if value is _ABSENT and not rec.short:
        table.problems.append(table.problem("missing field", rec, name))
    return value


def record_id(table: RecordTable, rec: Record, id_col: str, present: set[str]) -> str | None:
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


def report_text(table: RecordTable, rec: Record, col: str, present: set[str]) -> str | None:
    """Stripped report text, or None after reporting why it cannot be used."""
    value = _field(table, rec, col, present)
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


def kept_text(table: RecordTable, rec: Record, col: str, present: set[str]) -> str | None:
    """A kept extra column as text: strings stripped, numbers/booleans as text, null as ''."""
    value = _field(table, rec, col, present)
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


# --------------------------------------------------------------------------------------------
# Value checks for readers of cxreval's other tables (human ratings, perturbation suites, the IU
# X-ray reports): they load a file with load_table, name their columns with check_columns and
# record_id, and check each value with the helpers below, which add an InputProblem (file,
# position, field) to the table instead of raising, so raise_problems lists every problem of
# every file at once.
# --------------------------------------------------------------------------------------------


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
    text = decode_utf8(_read_bytes(Path(path), file), file)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise file_error(file, f"not valid JSON: {exc.msg} (column {exc.colno})", row=exc.lineno) from None
