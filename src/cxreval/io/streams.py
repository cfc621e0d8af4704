"""A pairs file read in bounded memory (:class:`PairStream`) and cut into chunks that workers
read by byte range (:class:`PairChunk`), with the same checks and messages as
:func:`~cxreval.io.read_pairs`."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cxreval.io.errors import InputError, InputProblem, file_error
from cxreval.io.pairs import ReportPair, RowChecker, meta_dict, warn_copied_counts
from cxreval.io.records import (
    STDIN,
    PathLike,
    RecordTable,
    allow_long_fields,
    delimited_records,
    jsonl_records,
    missing_column,
    resolve_format,
)
from cxreval.literals import InputFormat

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
        self.format = resolve_format(Path(path), self.file, format)
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
            return resolve_format(Path(path), os.fspath(path), format) in STREAM_FORMATS
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
        checker = RowChecker(
            rows, self.id_col, [self.reference_col, self.candidate_col], self.meta_cols, self.system_col, unique=unique
        )
        jsonl = self.format == "jsonl"

        def pairs() -> Iterator[ReportPair]:
            read = self._lines() if lines is None else lines
            records = (
                jsonl_records(read, structure)
                if jsonl
                else delimited_records(read, structure, "," if self.format == "csv" else "\t")
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
                        meta=meta_dict(row, self.meta_cols),
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
                problems.missing = [missing_column(structure, c, what) for c in absent]
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
            raise file_error(self.file, "file not found") from None
        except IsADirectoryError:
            raise file_error(self.file, "is a directory, not a file") from None
        except OSError as exc:
            raise file_error(self.file, f"cannot read file: {exc.strerror or exc}") from None
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
    allow_long_fields()
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
        raise file_error(file, f"cannot read file: {exc.strerror or exc}") from None
    return spool


def _decoded_lines(fh: Any, file: str, *, split_cr: bool = False) -> Iterator[str]:
    """Lines of a binary file as text. UTF-8 never puts a newline byte inside a character, so
    decoding line by line is exact; the message of a bad byte is :func:`decode_utf8`'s (its line is
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
            raise file_error(
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
