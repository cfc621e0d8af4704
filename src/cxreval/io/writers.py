"""Writing results safely: the output folder is checked before any work, files appear whole,
a folder holds one whole run, and CSV cells never start a spreadsheet formula.

Every file cxreval writes goes through :func:`atomic_writer` (a temporary file in the same
folder, renamed over the target only once it is complete) or an :class:`OutputRun`: a run's
files are written beside the earlier run's under partial names (``errors.csv.partial``) and each
replaces its twin only when the whole run is complete, so Ctrl-C, SIGTERM or a crash leaves the
earlier run whole. Every CSV is written by :func:`write_csv` (OWASP's defence against CSV
injection), and :func:`csv_value` undoes it for cxreval's own readers.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from glob import escape as glob_escape
from pathlib import Path
from typing import IO, Any, Self

__all__ = [
    "AtomicFile",
    "OutputError",
    "OutputManifest",
    "OutputRun",
    "atomic_write_text",
    "atomic_writer",
    "check_out_dir",
    "csv_cell",
    "csv_text",
    "csv_value",
    "frame_rows",
    "process_alive",
    "sigterm_raises",
    "write_csv",
]


class OutputError(ValueError):
    """The output folder cannot be used (a file is in the way, or it cannot be written)."""


def check_out_dir(path: str | os.PathLike[str], *, flag: str = "--out") -> Path:
    """Prove ``path`` usable as an output folder before minutes of scoring are spent.

    An existing folder must be writable; a missing one must be creatable (its nearest existing
    parent writable). Nothing is left behind: the folder itself is made when results are saved.
    Raises :class:`OutputError` naming the path and the reason. An existing folder is fine (a
    rerun overwrites what it writes and resumes from caches).
    """
    out = Path(path)
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "a file is in the way" if probe == out else f"{probe} is a file, not a folder"
        raise OutputError(f"{flag} {out}: {what}; {flag} names a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".cxreval-write-test-"):
            pass
    except OSError as exc:
        raise OutputError(f"{flag} {out}: cannot write there ({exc.strerror or exc})") from None
    return out


class AtomicFile:
    """A text file being written that replaces ``path`` only on :meth:`commit`.

    The content goes to a temporary file in the same folder; :meth:`commit` syncs and renames it
    over ``path``, :meth:`discard` deletes it. A streamed evaluation keeps several open while its
    chunks arrive, and commits them together at the end.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        newline: str | None = None,
        tmp: str | os.PathLike[str] | None = None,
        binary: bool = False,
    ) -> None:
        """``tmp``: the name to write under (an :class:`OutputRun`'s partial name); default a hidden
        temporary name. ``binary``: :attr:`fh` takes bytes (a gzip or Parquet file)."""
        self.path = Path(path)
        self.newline = newline
        if tmp is None:
            fd, self.tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        else:  # a partial file an earlier run left is replaced, never written through (a link)
            self.tmp = os.fspath(tmp)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.chmod(self.tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results get the mode any new file gets
        try:
            self.fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=newline)
        except BaseException:
            os.close(fd)
            self.discard()
            raise

    def append(self, text: str) -> None:
        """Add ``text`` with the file closed in between: a run writing hundreds of files at once
        (one folder per system) holds no descriptor for each."""
        if not self.fh.closed:
            self.fh.close()
        with open(self.tmp, "a", encoding="utf-8", newline=self.newline) as fh:
            fh.write(text)

    def append_bytes(self, data: bytes) -> None:
        """Add ``data`` (as :meth:`append`, for a binary file: gzip members join end to end)."""
        if not self.fh.closed:
            self.fh.close()
        with open(self.tmp, "ab") as fh:
            fh.write(data)

    def append_file(self, source: str | os.PathLike[str]) -> None:
        """Add the bytes of the file ``source`` (UTF-8 text another process wrote), copied by the
        kernel where it can, and delete ``source``."""
        if not self.fh.closed:
            self.fh.close()
        with open(source, "rb") as src, open(self.tmp, "r+b") as dst:  # not "ab": the kernel copies into no O_APPEND file
            dst.seek(0, os.SEEK_END)
            size = left = os.fstat(src.fileno()).st_size
            with contextlib.suppress(AttributeError, OSError):  # no copy_file_range (not Linux, another file system)
                while left > 0:
                    copied = os.copy_file_range(src.fileno(), dst.fileno(), left)
                    if not copied:
                        break
                    left -= copied
            if left > 0:  # what the kernel did not copy
                src.seek(size - left)
                shutil.copyfileobj(src, dst)
        os.unlink(source)

    def commit(self) -> None:
        """Make the written content ``path``'s."""
        if self.fh.closed:
            with open(self.tmp, "rb") as fh:
                os.fsync(fh.fileno())
        else:
            self.fh.flush()
            os.fsync(self.fh.fileno())
            self.fh.close()
        os.replace(self.tmp, self.path)

    def close(self) -> None:
        """Close the file, keeping what was written under its temporary name."""
        if not self.fh.closed:
            self.fh.close()

    def discard(self) -> None:
        """Forget the content; ``path`` keeps what it held."""
        if hasattr(self, "fh"):
            self.fh.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)

    @staticmethod
    def remove_leftovers(path: str | os.PathLike[str]) -> list[Path]:
        """Delete temporary files of ``path`` that a killed run left behind (SIGKILL runs no
        cleanup); a run calls this before writing ``path`` again."""
        target = Path(path)
        removed = []
        for leftover in target.parent.glob(f".{glob_escape(target.name)}.*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
                removed.append(leftover)
        return removed


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, newline: str | None = None) -> Iterator[IO[str]]:
    """Open a text file for writing that replaces ``path`` only when the block ends cleanly."""
    file = AtomicFile(path, newline=newline)
    try:
        yield file.fh
        file.commit()
    except BaseException:
        file.discard()
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_writer(path) as fh:
        fh.write(text)


# -- CSV: one writer, cells that never start a formula ------------------------------------------

#: First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = frozenset("=+-@\t\r")
#: A genuine number, written as it is even when it starts with ``-`` or ``+``.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.IGNORECASE)


def formula_like(text: str) -> bool:
    """Whether a spreadsheet would run ``text`` as a formula: it starts with one of
    :data:`FORMULA_STARTS` and is not a number (``-0.5`` is a number, ``-2+3`` a formula)."""
    return text[:1] in FORMULA_STARTS and not _NUMBER.fullmatch(text)


def csv_cell(value: object) -> object:
    """A cell as cxreval writes it (OWASP): text that would start a formula gets a leading ``'``.

    The test looks past leading quotes, so a text that itself begins ``'=`` gets one more and
    :func:`csv_value` gives it back whole. Numbers, and text that is a number, are left as they
    are; None is an empty cell.
    """
    if value is None:
        return ""
    if isinstance(value, str) and formula_like(value.lstrip("'")) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_value(cell: str) -> str:
    """A text cell of a CSV cxreval wrote, as it was before :func:`csv_cell` (its ``'`` removed)."""
    if cell[:1] == "'" and formula_like(cell.lstrip("'")):
        return cell[1:]
    return cell


def write_csv(fh: IO[str], rows: Iterable[Sequence[object]]) -> None:
    """Write ``rows`` (the header is the first) to ``fh`` as CSV, every cell through :func:`csv_cell`,
    lines ending in ``\\n``: the one CSV writer of cxreval (evaluate, bench, review, meta).

    A row with a carriage return in a text has its texts quoted (the csv module quotes only the
    line terminator's characters, and a bare ``\\r`` would end the record for a reader)."""
    plain = csv.writer(fh, lineterminator="\n")
    quoted = csv.writer(fh, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    for row in rows:
        cells = [csv_cell(v) for v in row]
        (quoted if any(isinstance(c, str) and "\r" in c for c in cells) else plain).writerow(cells)


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """:func:`write_csv`'s text, for a CSV printed or assembled in parts."""
    buf = io.StringIO()
    write_csv(buf, rows)
    return buf.getvalue()


def frame_rows(frame: Any, *, header: bool = True) -> Iterator[list[object]]:
    """A pandas DataFrame's rows for :func:`write_csv`, laid out as ``DataFrame.to_csv`` lays them
    (the index first, its name heading it); missing values are empty cells."""
    if header:
        yield [frame.index.name or "", *frame.columns]
    for key, *values in frame.itertuples(name=None):
        yield [_plain(key), *(_plain(v) for v in values)]


def _plain(value: object) -> object:
    """A DataFrame value as a Python scalar (numpy's repr is not a number); NaN / NA as None."""
    import pandas as pd

    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, str) else value


# -- One run's files: written beside the earlier run's, put in place together --------------------

#: The suffix of a file an unfinished run wrote (it replaces its twin once the run is complete).
PARTIAL = ".partial"

#: Names an output folder of ``cxreval evaluate`` may hold, for folders written before manifests.
KNOWN_OUTPUTS = re.compile(
    r"(scores\.json|judgements\.jsonl(?:\.gz)?|judgements\.parquet|errors\.csv|failures\.jsonl"
    r"|runs\.json|systems\.csv|run-\d+|systems)"
)


class OutputManifest:
    """What one run writes into one output folder, so that it replaces the earlier run's as a whole.

    A folder holds ``.cxreval-outputs.json``: ``entries``, the names (files or folders) the last
    complete run wrote there, and ``partial``, those of runs that did not complete. A run writes
    each file under its partial name (``errors.csv.partial``: :meth:`open`, :meth:`writer`,
    :meth:`write_text`); :class:`OutputRun` renames them over their twins once the whole run is
    complete and deletes the earlier run's entries this run did not write (a ``run-2/`` after
    ``--runs 1``). Only entries cxreval itself wrote are ever deleted: the folder may hold the
    user's own files (or be ``.``). A folder written before manifests existed is treated as
    holding the names :data:`KNOWN_OUTPUTS` matches.

    Each tool keeps its own manifest (``tool``: ``evaluate``, the default, in
    ``.cxreval-outputs.json``; ``bench`` in ``.cxreval-outputs-bench.json``; ...), so a command only
    ever replaces or removes what that same command wrote: ``cxreval bench`` into a folder of
    ``cxreval evaluate`` results leaves them alone, and the other way round.
    """

    NAME = ".cxreval-outputs.json"

    def __init__(self, folder: str | os.PathLike[str], tool: str = "evaluate") -> None:
        _check_name(tool)
        self.tool = tool
        self.name = self.NAME if tool == "evaluate" else f".cxreval-outputs-{tool}.json"
        self.folder = Path(folder)
        self.written: list[str] = []
        self.files: dict[str, AtomicFile] = {}
        self.scratch_files: list[AtomicFile] = []
        self.last: str | None = None
        self.previous, self.unfinished = self._read()

    def _read(self) -> tuple[list[str], list[str]]:
        """(entries of the last complete run, names of unfinished runs) from the folder's manifest."""
        try:
            doc = json.loads((self.folder / self.name).read_text(encoding="utf-8"))
            return [str(n) for n in doc["entries"]], [str(n) for n in doc.get("partial", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            # a folder of evaluate results written before manifests; no other tool removed files then
            return (_legacy_entries(self.folder) if self.tool == "evaluate" else []), []

    def add(self, *names: str) -> None:
        """Record entries (names in the folder) this run writes."""
        for name in names:
            _check_name(name)
        self.written.extend(n for n in names if n not in self.written)

    def partial(self, name: str) -> Path:
        """Where this run writes ``name`` until the run is complete."""
        return self.folder / (name + PARTIAL)

    def open(self, name: str, *, newline: str | None = None, last: bool = False, binary: bool = False) -> AtomicFile:
        """Start writing ``name`` under its partial name; it replaces ``name`` when the run commits.

        ``last``: the file that says the folder's run is complete (``scores.json``): the earlier
        one is removed first and this one put in place last, so a commit cut short by SIGKILL
        leaves a folder without it, which readers refuse.
        """
        self.add(name)
        self.folder.mkdir(parents=True, exist_ok=True)
        AtomicFile.remove_leftovers(self.folder / name)  # hidden temporary files of older releases
        if name in self.files:
            self.files[name].close()
        self.files[name] = AtomicFile(self.folder / name, newline=newline, tmp=self.partial(name), binary=binary)
        if last:
            self.last = name
        return self.files[name]

    def scratch(self, name: str) -> AtomicFile:
        """A hidden temporary binary file named after ``name`` (``.NAME.*.tmp``), closed, for this
        run's own use (a spool that becomes ``name``): deleted when the run commits or stops, and
        by the next run into the folder if this one is killed."""
        file = AtomicFile(self.folder / name, binary=True)
        file.close()
        self.scratch_files.append(file)
        return file

    def _drop_scratch(self) -> None:
        for file in self.scratch_files:
            file.discard()
        self.scratch_files.clear()

    @contextlib.contextmanager
    def writer(self, name: str, *, newline: str | None = None, last: bool = False, binary: bool = False) -> Iterator[IO[Any]]:
        """:meth:`open` as a block: the file is closed when it ends (on an error too, kept partial)."""
        file = self.open(name, newline=newline, last=last, binary=binary)
        try:
            yield file.fh
        finally:
            file.close()

    def write_text(self, name: str, text: str, *, last: bool = False) -> None:
        """Write ``name`` (UTF-8) under its partial name."""
        with self.writer(name, last=last) as fh:
            fh.write(text)

    # -- the steps of OutputRun.commit / abandon, for every folder of a run -------------------

    def _drop_last(self) -> None:
        """Remove the earlier run's completion mark (see :meth:`open`)."""
        if self.last is not None and (self.folder / self.last).is_file():
            (self.folder / self.last).unlink()

    def _replace(self) -> None:
        """Rename every partial file over its twin, the completion mark last."""
        names = [n for n in self.files if n != self.last] + ([self.last] if self.last is not None else [])
        for name in names:
            self.files[name].commit()
        self._drop_scratch()

    def _remove_stale(self) -> list[Path]:
        """Delete the earlier run's entries this run did not write, and unfinished runs' partial files."""
        removed: list[Path] = []
        for name in dict.fromkeys([*self.previous, *self.unfinished]):
            if not _valid_name(name):
                continue
            if name not in self.written:
                removed += _remove_entry(self.folder / name, committed=name in self.previous, tool=self.tool)
            removed += _remove_entry(self.partial(name), committed=True) if name not in self.files else []
        return removed

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / self.name, json.dumps({"entries": self.written}, indent=1) + "\n")

    def _abandon(self) -> None:
        """Close this run's files, keep them under their partial names (but empty ones), and record
        those names (the earlier run's entries stay as they are) so that a later run removes them."""
        self._drop_scratch()
        for file in self.files.values():
            file.close()
            with contextlib.suppress(OSError):
                if os.path.getsize(file.tmp) == 0:
                    os.unlink(file.tmp)
        if not self.written or not self.folder.is_dir():
            return
        partial = list(dict.fromkeys([*self.unfinished, *self.written]))
        atomic_write_text(self.folder / self.name, json.dumps({"entries": self.previous, "partial": partial}, indent=1) + "\n")


#: The folder of the systems' folders of a long-format evaluation (``OUT/systems/NAME``).
SYSTEMS_DIR = "systems"


class SystemFolders(Mapping[str | None, Path]):
    """One output folder per system, ``OUT/systems/NAME``, made as systems come (or given up front).

    Names are made safe for any file system; two systems whose safe names match ignoring case
    would share a folder on some file systems, so that is an :class:`OutputError`.
    """

    def __init__(self, out: str | os.PathLike[str], systems: Iterable[str | None] = ()) -> None:
        self.out = Path(out)
        self._folders: dict[str | None, Path] = {}
        self._names: dict[str, str] = {}
        for system in systems:
            self[system]  # noqa: B018 - checks the names now

    def __getitem__(self, system: str | None) -> Path:
        if system is None:
            raise KeyError(system)
        if system not in self._folders:
            name = re.sub(r"[^A-Za-z0-9._-]+", "_", system).strip("._") or "system"
            if name.lower() in self._names:
                raise OutputError(
                    f"systems {self._names[name.lower()]!r} and {system!r} would share the output "
                    f"folder {self.out / SYSTEMS_DIR / name}; rename one"
                )
            self._names[name.lower()] = system
            self._folders[system] = self.out / SYSTEMS_DIR / name
        return self._folders[system]

    def __contains__(self, system: object) -> bool:
        return isinstance(system, str)

    def __iter__(self) -> Iterator[str | None]:
        return iter(self._folders)

    def __len__(self) -> int:
        return len(self._folders)


class OutputRun:
    """The files one run writes, in one or more folders: they replace the earlier run's only when
    the whole run is complete, so a folder always holds one whole run.

    As a context manager, a clean end commits (:meth:`commit`); an exception (Ctrl-C, SIGTERM, a
    crash) leaves the earlier run whole and this run's files under their partial names, recorded
    in each folder's manifest so that the next run removes them. ``committed`` tells which.
    """

    def __init__(self, tool: str = "evaluate") -> None:
        self.tool = tool
        self.folders: dict[Path, OutputManifest] = {}
        self.committed = False
        self.discarded = False
        self._locks: list[Path] = []
        self._created: list[Path] = []  # folders this run made (removed again by discard, when empty)

    def folder(self, path: str | os.PathLike[str]) -> OutputManifest:
        """The manifest of a folder this run writes into (made on first use), the run's tool's.
        Raises :class:`OutputError` when another run is writing into the folder now."""
        key = Path(path)
        if key not in self.folders:
            self._lock(key)
            self.folders[key] = OutputManifest(key, self.tool)
        return self.folders[key]

    #: The file that says a run is writing into a folder (its process id); removed when it ends.
    LOCK = ".cxreval-outputs.lock"

    def _lock(self, folder: Path) -> None:
        """Claim ``folder`` until the run ends: two runs into one folder would write the same
        partial files. The claim is a file made with O_EXCL holding this process's id (no
        descriptor is held, so a run may write into thousands of folders); one left by a process
        that died is taken over."""
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        self._created += missing
        path = folder / self.LOCK
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if _claimed_by_a_live_process(path):
                    raise OutputError(
                        f"{folder}: another cxreval run is writing into this folder now; wait for "
                        "it to end, or give another output folder"
                    ) from None
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            self._locks.append(path)
            return
        raise OutputError(f"{folder}: cannot claim the folder ({path} keeps coming back)")

    def _unlock(self) -> None:
        for path in self._locks:
            with contextlib.suppress(OSError):
                path.unlink()
        self._locks.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is None and not self.discarded:
                self.commit()
        finally:
            if not self.committed and not self.discarded:  # an error, or a commit cut short (a full disk)
                self.abandon()
            self._unlock()
            if self.discarded:
                for folder in sorted(self._created, key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only an empty one: nothing but this run's files was there

    def discard(self) -> None:
        """Drop everything this run wrote (its input turned out to be bad: nothing of it is worth
        keeping): its partial files go, the earlier run's files stay as they are, and the folders
        this run made are removed when the run ends."""
        for m in self.folders.values():
            m._drop_scratch()
            for file in m.files.values():
                file.discard()
        self.discarded = True

    def commit(self) -> list[Path]:
        """Put every partial file in place and save each folder's manifest; returns what was removed.

        A folder inside another of the run is recorded as an entry of it. SIGINT and SIGTERM wait
        until this ends (a few renames), so they cannot leave a folder half replaced; the deepest
        folders go first, so a parent's completion mark (``systems.csv``) comes last.
        """
        self._link()
        manifests = sorted(self.folders.values(), key=lambda m: -len(m.folder.parts))
        with _signals_deferred():
            for m in manifests:
                m._drop_last()
            for m in manifests:
                m._replace()
            removed = [p for m in manifests for p in m._remove_stale()]
            for m in manifests:
                m._save()
            self.committed = True
        return removed

    def abandon(self) -> None:
        """Leave the earlier run as it is and this run's files under their partial names."""
        self._link()
        for m in self.folders.values():
            m._abandon()

    def _link(self) -> None:
        """Record each folder of the run as an entry of its parent, when the parent is in the run too."""
        for m in self.folders.values():
            parent = self.folders.get(m.folder.parent)
            if parent is not None and parent is not m:
                parent.add(m.folder.name)


def _claimed_by_a_live_process(lock: Path) -> bool:
    """Whether the process whose id ``lock`` holds is alive (this one included: a second run of
    one program into the same folder is refused too)."""
    try:
        pid = int(lock.read_text(encoding="utf-8").strip() or "0")
    except (OSError, ValueError):
        return True  # being written this instant, or unreadable: leave it to its owner
    return pid > 0 and process_alive(pid)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True


def _check_name(name: str) -> None:
    if not _valid_name(name):
        raise ValueError(f"not a name in an output folder: {name!r}")


def _valid_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def _legacy_entries(folder: Path) -> list[str]:
    """The entries of a folder written before manifests: files :data:`KNOWN_OUTPUTS` names, and
    folders it names that hold cxreval's results (a user's own ``systems/`` is left alone)."""
    if not folder.is_dir():
        return []
    return [
        p.name
        for p in folder.iterdir()
        if KNOWN_OUTPUTS.fullmatch(p.name)
        and (p.is_file() or (p.is_dir() and any((p / n).is_file() for n in (OutputManifest.NAME, "scores.json"))))
    ]


def _remove_entry(path: Path, *, committed: bool, tool: str = "evaluate") -> list[Path]:
    """Delete an entry cxreval wrote; a folder an unfinished run made (``committed`` False) loses
    only what that run's manifest lists, and goes only if nothing else is left in it."""
    if path.is_symlink() or path.is_file():
        if committed:
            path.unlink()
            return [path]
        return []
    if not path.is_dir():
        return []
    if committed:
        shutil.rmtree(path)
        return [path]
    inner = OutputManifest(path, tool)
    removed = [
        p
        for name in inner.unfinished
        if _valid_name(name)
        for p in _remove_entry(inner.partial(name), committed=True) + _remove_entry(path / name, committed=False, tool=tool)
    ]
    if not inner.previous and (path / inner.name).is_file():
        (path / inner.name).unlink()
    with contextlib.suppress(OSError):
        path.rmdir()  # only when empty
        removed.append(path)
    return removed


@contextlib.contextmanager
def sigterm_raises(error: Callable[[], BaseException]) -> Iterator[None]:
    """While the block runs, SIGTERM raises ``error()`` (Python's default is to die at once, which
    would leave a run's files neither whole nor recorded as partial); in the main thread only, and
    only where SIGTERM still has its default handler (a program embedding cxreval keeps its own)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise error()

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then act as they would have (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(signum: int, frame: object) -> None:
        caught.append(signum)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = {s: h for s, h in previous.items() if h is not None}  # None: a handler not set from Python
    for s in kept:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])
