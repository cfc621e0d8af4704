"""Writing results safely: the output folder is checked before any work, files appear whole.

Every file cxreval writes goes through :func:`atomic_writer` (a temporary file in the same
folder, renamed over the target only once it is complete), so Ctrl-C or a crash never leaves a
truncated ``judgements.jsonl`` beside a previous run's ``scores.json``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["OutputError", "atomic_writer", "atomic_write_text", "check_out_dir", "remove_stale"]


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


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, newline: str | None = None) -> Iterator[IO[str]]:
    """Open a text file for writing that replaces ``path`` only when the block ends cleanly."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results get the mode any new file gets
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
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
