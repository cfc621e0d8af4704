"""Writing results safely: the output folder is checked before any work, files appear whole.

Every file cxreval writes goes through :func:`atomic_writer` (a temporary file in the same
folder, renamed over the target only once it is complete), so Ctrl-C or a crash never leaves a
truncated ``judgements.jsonl`` beside a previous run's ``scores.json``.
"""

from __future__ import annotations

import contextlib
from glob import escape as glob_escape
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["AtomicFile", "OutputError", "OutputManifest", "atomic_writer", "atomic_write_text", "check_out_dir", "remove_stale"]


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

    def __init__(self, path: str | os.PathLike[str], *, newline: str | None = None) -> None:
        self.path = Path(path)
        self.newline = newline
        fd, self.tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        os.chmod(self.tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results get the mode any new file gets
        try:
            self.fh: IO[str] = os.fdopen(fd, "w", encoding="utf-8", newline=newline)
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


def remove_stale(folder: str | os.PathLike[str], names: Iterable[str]) -> list[Path]:
    """Delete files of an earlier run that this run does not write (e.g. an old ``failures.jsonl``)."""
    removed = []
    for name in names:
        p = Path(folder) / name
        if p.is_file():
            p.unlink()
            removed.append(p)
    return removed


#: Names an output folder of ``cxreval evaluate`` may hold, for folders written before manifests.
KNOWN_OUTPUTS = re.compile(r"(scores\.json|judgements\.jsonl|errors\.csv|failures\.jsonl|runs\.json|systems\.csv"
                           r"|run-\d+|systems)")


class OutputManifest:
    """What one run wrote into an output folder, so the next run removes what it does not rewrite.

    A folder holds ``.cxreval-outputs.json``, the entries (files or folders, relative) the last run
    wrote there. :meth:`finish` deletes the previous run's entries this run did not write (a
    ``run-2/`` after ``--runs 1``, a top-level ``scores.json`` after ``--system-col``) and records
    this run's; only entries cxreval itself wrote are ever deleted. A folder written before
    manifests existed is treated as holding the names :data:`KNOWN_OUTPUTS` matches.
    """

    NAME = ".cxreval-outputs.json"

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.written: list[str] = []
        path = self.folder / self.NAME
        try:
            self.previous: list[str] = list(json.loads(path.read_text(encoding="utf-8"))["entries"])
        except (OSError, ValueError, KeyError, TypeError):
            self.previous = ([p.name for p in self.folder.iterdir() if KNOWN_OUTPUTS.fullmatch(p.name)]
                             if self.folder.is_dir() else [])

    def add(self, *names: str) -> None:
        """Record entries (names relative to the folder) this run writes."""
        self.written.extend(n for n in names if n not in self.written)

    def finish(self) -> list[Path]:
        """Delete the previous run's entries that this run did not write; save the manifest."""
        removed = []
        for name in self.previous:
            if name in self.written or "/" in name or name in ("", ".", ".."):
                continue
            target = self.folder / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
                removed.append(target)
            elif target.is_file():
                target.unlink()
                removed.append(target)
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / self.NAME, json.dumps({"entries": self.written}, indent=1) + "\n")
        return removed
