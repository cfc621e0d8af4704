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

Each store keeps its own schema version and migrations (the answer store in its ``meta`` table,
the review database in ``PRAGMA user_version``, the bench cache keyed by content) and refuses a
newer version than it reads with a message naming the file. :func:`describe_error` turns an
SQLite error into a sentence that names the file and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
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
