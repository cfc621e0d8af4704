"""One way to open the SQLite files cxreval keeps: the LLM answer store, the bench cache and the
review database.

Every store is in WAL mode (readers never wait for a writer; one writer at a time, waiting up to
``timeout`` seconds for another's lock), and each has a documented durability:

==================  ===========  ==============================================================
store               durability   why
==================  ===========  ==============================================================
review database     ``full``     a reviewer's answer is acknowledged on the page: every commit
                                 is on disk before it returns, even if the machine loses power
LLM answer store    ``normal``   a commit survives the process being killed; a power loss may
                                 lose the last answers (asked again on the rerun), never corrupt
bench cache         ``normal``   recomputed on a miss, as above
==================  ===========  ==============================================================

Each store describes itself with a :class:`Schema` (its name, version, the statements that
create it and those that take an older version to the next) and keeps the version number where
its files always kept it (the answer store in its ``meta`` table, the review database and the
bench cache in ``PRAGMA user_version``). :func:`upgrade` creates a new store or migrates an
older one in the caller's transaction, and refuses a newer one, or a file that is another
store, with a message naming the file. :func:`read_only` opens a file only to look at it, and
:func:`describe_error` turns an SQLite error into a sentence that names the file and what is
wrong with it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

Durability = Literal["full", "normal"]

#: Seconds a connection waits for another's write lock before it gives up.
LOCK_TIMEOUT = 30.0


def connect(
    path: str | Path,
    *,
    durability: Durability,
    timeout: float = LOCK_TIMEOUT,
    autocommit: bool = True,
    wal: bool = True,
    row_factory: Any = None,
) -> sqlite3.Connection:
    """A connection to the store at ``path``.

    ``durability``: ``full`` syncs every commit, ``normal`` syncs at WAL checkpoints (see the
    module's table). ``autocommit``: statements outside an explicit :func:`transaction` commit at
    once (else Python's implicit transactions, committed with ``commit()``). ``wal``: switch the file
    to WAL mode now (a caller that must name a read-only folder in its error sets it itself).
    The connection may be used from any thread, one at a time.
    """
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None if autocommit else "DEFERRED", check_same_thread=False)
    if row_factory is not None:
        conn.row_factory = row_factory
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {durability.upper()}")
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, its lock taken at once (``BEGIN IMMEDIATE``), so that a read, check
    and write cannot race another process; rolled back on any error, committed otherwise."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def sqlite_uri(path: str | Path, **params: str) -> str:
    """An SQLite ``file:`` URI naming ``path`` exactly: ``?``, ``#``, ``%`` and the like are
    percent-encoded (pasted into the URI they would end the path and open another file)."""
    uri = Path(os.path.abspath(path)).as_uri()
    return uri + ("?" + urlencode(params) if params else "")


#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts as an SQLite database does."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


@contextlib.contextmanager
def read_only(path: str | Path, timeout: float = LOCK_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """A connection that can only read ``path`` (opened by URI with ``mode=ro``, so looking at a
    file never creates it, nor the ``-wal`` and ``-shm`` files beside it); closed on exit."""
    conn = sqlite3.connect(sqlite_uri(path, mode="ro"), uri=True, timeout=timeout)
    try:
        yield conn
    finally:
        conn.close()


def table_names(conn: sqlite3.Connection) -> list[str]:
    """The tables of the database, sorted."""
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


class SchemaError(ValueError):
    """A store's file that this cxreval must not write: another kind of file, or a schema it
    cannot read (newer, or older without a migration)."""


class NewerSchema(SchemaError):
    """A store written by a newer cxreval."""


@dataclass(frozen=True)
class Schema:
    """What a store is: its name in messages, its schema version, the statements that create it,
    and for each older version the statements that take it to the next one.

    ``create`` and every migration run inside the caller's transaction, so that a store is never
    left half created or half migrated.
    """

    name: str
    version: int
    create: Sequence[str]
    migrations: Mapping[int, Sequence[str]] = field(default_factory=dict)
    #: What to do with a file of a newer schema (after "written by a newer cxreval").
    newer_hint: str = "upgrade cxreval (pip install -U cxreval)"

    def check(self, path: str | Path, found: object) -> int:
        """The version ``found`` in ``path`` as a number; raises :class:`SchemaError` when it is
        not one, :class:`NewerSchema` when it is newer than :attr:`version`, and
        :class:`SchemaError` when it is older and no migration leads from it."""
        if isinstance(found, bool) or not str(found).isdigit():
            raise SchemaError(f"{path}: a {self.name} with an unreadable schema version ({found!r})")
        version = int(str(found))
        if version > self.version:
            raise NewerSchema(
                f"{path}: {self.name} schema {version}, written by a newer cxreval (this one reads up to "
                f"schema {self.version}); {self.newer_hint}"
            )
        missing = [v for v in range(version, self.version) if v not in self.migrations]
        if missing:
            raise SchemaError(
                f"{path}: {self.name} schema {version}; this cxreval reads schema {self.version} and cannot migrate it"
            )
        return version


def upgrade(conn: sqlite3.Connection, path: str | Path, schema: Schema, found: object | None) -> int:
    """Create the store (``found`` None: a new file) or take it from version ``found`` up to
    ``schema.version``, one migration at a time, inside the caller's transaction; returns the
    version the caller now records. A newer or unreadable version raises (:meth:`Schema.check`)
    before anything is written."""
    if found is None:
        for statement in schema.create:
            conn.execute(statement)
        return schema.version
    version = schema.check(path, found)
    while version < schema.version:
        for statement in schema.migrations[version]:
            conn.execute(statement)
        version += 1
    return version


_PLAIN_PROBLEMS = {
    sqlite3.SQLITE_FULL: "the disk holding it is full",
    sqlite3.SQLITE_IOERR: "disk I/O error",
    sqlite3.SQLITE_CORRUPT: "the file is damaged (database disk image is malformed)",
    sqlite3.SQLITE_NOTADB: "not an SQLite database",
}


def describe_error(path: Path, exc: sqlite3.Error, timeout: float = LOCK_TIMEOUT) -> str:
    """What an SQLite error on the store at ``path`` means, naming the file (and the folder, when
    that is what is wrong): a read-only file or folder, a lock held too long, a full disk."""
    code = getattr(exc, "sqlite_errorcode", None) or 0
    primary = code & 0xFF
    folder = Path(os.path.abspath(path)).parent
    if code == sqlite3.SQLITE_READONLY_DIRECTORY or (
        primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN) and not os.access(folder, os.W_OK)
    ):
        return (
            f"{path}: its folder {folder} is read-only, and SQLite must create {path.name}-wal and "
            f"{path.name}-shm beside a database in WAL mode: make the folder writable, or put the database in "
            f"a writable one ({exc})"
        )
    if primary == sqlite3.SQLITE_READONLY:
        return f"{path}: read-only (the file, its file system, or this connection): nothing can be saved ({exc})"
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (
            f"{path}: locked by another program for more than {timeout:g} s (a write in progress, a backup, an "
            f"open transaction in a database browser) ({exc})"
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return f"{path}: cannot open it or the files SQLite keeps beside it ({exc})"
    return f"{path}: {_PLAIN_PROBLEMS.get(primary, 'SQLite error')} ({exc})"
