"""The answer store: SQLite in WAL mode, one row per finished call, keyed by content hash.

A row is written (and committed) the moment an answer has been validated, so a run that is
killed loses at most the calls in flight, and a rerun asks only for what is missing. The key
is a hash of everything that determines an answer (engine, prompt text, ontology, model and
answer parameters, the report texts, the run index), never of the endpoint URL or the key.

Answers that stayed invalid after the re-ask are stored too (``status='failed'``, with the raw
answers), so a rerun does not pay for them again; ``retry_failed`` asks again. Transport
failures (timeouts, 5xx after all retries) are not stored: the call did not finish. A failure
never replaces a valid answer, and of two valid answers the first stored stays, so processes
sharing a store agree.

Several processes may share one store. Before a call, a process takes a *lease* on the key
(``claim``); another process that wants the same key waits for the answer instead of paying
for it again. Leases are short and renewed (``renew``): the runner gives one a life of one
request's timeout plus 30 s and renews it at every HTTP attempt and by a heartbeat, so a lease
whose owner died expires within about ``timeout + 30`` seconds, whatever host it ran on (a
reused PID cannot keep it alive). An expired lease, or one whose process is gone (same host,
checked at once), is taken over.

The *ledger* records the cost of every answered request (cache hits cost nothing), so
``--max-cost`` is a budget per store across reruns until ``reset_budget``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 1


def _alive(owner: str) -> bool:
    """Whether a lease owner may still be running: a process on this host must exist."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine: trust the expiry
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``parts``."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedAnswer(BaseModel):
    """One stored call: the validated value or the failure, with the raw answers and usage."""

    model_config = ConfigDict(frozen=True)

    key: str
    kind: str
    engine: str
    model: str
    status: str  # ok | failed
    value: Any = None
    raw: list[str] = []
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost: float = 0.0
    created: float = 0.0


class NotAnAnswerStore(ValueError):
    """A file that is not cxreval's LLM answer store; it is never opened for writing."""


_SQLITE_HEADER = b"SQLite format 3\x00"


def check_answer_store(path: str | Path) -> None:
    """Raise :class:`NotAnAnswerStore` unless ``path`` is an answer store (or does not exist yet).

    Checked before anything is written, so a bench cache or any other file given by mistake is
    refused instead of gaining tables (or failing with a traceback).
    """
    p = Path(path)
    if not p.exists() or (p.is_file() and p.stat().st_size == 0):
        return
    if not p.is_file():
        raise NotAnAnswerStore(f"{p}: not a file")
    with p.open("rb") as fh:
        if fh.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
            raise NotAnAnswerStore(f"{p}: not an SQLite file, so not a cxreval LLM answer store")
    try:
        db = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            version = (db.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
                       if "meta" in tables else None)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise NotAnAnswerStore(f"{p}: cannot read as SQLite ({exc})") from None
    if "answers" not in tables or version is None:
        found = ", ".join(sorted(tables)) or "none"
        raise NotAnAnswerStore(f"{p}: an SQLite file, but not a cxreval LLM answer store (tables: {found})")


class AnswerCache:
    """SQLite store; use from one thread (the event loop's), any number of processes may read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        check_answer_store(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            """CREATE TABLE IF NOT EXISTS answers (
                key TEXT PRIMARY KEY, kind TEXT NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,
                status TEXT NOT NULL, value TEXT, raw TEXT NOT NULL, error TEXT NOT NULL,
                input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, calls INTEGER NOT NULL,
                cost REAL NOT NULL, created REAL NOT NULL)"""
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._db.execute("CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL)")
        self._db.execute(
            """CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, key TEXT NOT NULL, model TEXT NOT NULL,
                input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL,
                cost REAL NOT NULL, created REAL NOT NULL)"""
        )
        #: this process's lease owner id: host, pid (to tell a dead owner) and a random part
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "AnswerCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> CachedAnswer | None:
        row = self._db.execute("SELECT * FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        names = [d[0] for d in self._db.execute("SELECT * FROM answers LIMIT 0").description]
        data = dict(zip(names, row))
        data["value"] = json.loads(data["value"]) if data["value"] is not None else None
        data["raw"] = json.loads(data["raw"])
        return CachedAnswer.model_validate(data)

    def put(self, answer: CachedAnswer) -> bool:
        """Store one answer unless a valid one is already there; committed before returning.

        Returns whether ``answer`` was stored: ``False`` means a valid answer (perhaps another
        process's) was kept, and :meth:`get` returns it.
        """
        a = answer
        cur = self._db.execute(
            """INSERT INTO answers VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(key) DO UPDATE SET kind=excluded.kind, engine=excluded.engine, model=excluded.model,
                 status=excluded.status, value=excluded.value, raw=excluded.raw, error=excluded.error,
                 input_tokens=excluded.input_tokens, output_tokens=excluded.output_tokens, calls=excluded.calls,
                 cost=excluded.cost, created=excluded.created
               WHERE answers.status != 'ok'""",
            (
                a.key, a.kind, a.engine, a.model, a.status,
                None if a.value is None else json.dumps(a.value, ensure_ascii=False),
                json.dumps(a.raw, ensure_ascii=False), a.error, a.input_tokens, a.output_tokens,
                a.calls, a.cost, a.created or time.time(),
            ),
        )
        return cur.rowcount > 0

    # -- leases: one process pays for a call, the others wait for its answer ---------------
    def claim(self, key: str, ttl: float) -> bool:
        """Take the lease on ``key`` for ``ttl`` seconds; False while another live owner holds it."""
        now = time.time()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
            if row is not None and row[0] != self.owner and row[1] > now and _alive(row[0]):
                return False
            self._db.execute("INSERT OR REPLACE INTO leases VALUES (?,?,?)", (key, self.owner, now + ttl))
            return True
        finally:
            self._db.execute("COMMIT")

    def renew(self, key: str | None, ttl: float) -> bool:
        """Extend this process's lease on ``key`` (or all of its leases) to ``ttl`` seconds from now.

        A lease of ``key`` that lapsed and is free again is taken back; one another owner took
        over stays theirs. Returns whether ``key`` (or any lease, for None) is now this process's.
        """
        expires = time.time() + ttl
        if key is None:
            return self._db.execute("UPDATE leases SET expires = ? WHERE owner = ?",
                                    (expires, self.owner)).rowcount > 0
        if self._db.execute("UPDATE leases SET expires = ? WHERE key = ? AND owner = ?",
                            (expires, key, self.owner)).rowcount > 0:
            return True
        return self._db.execute("INSERT OR IGNORE INTO leases VALUES (?,?,?)", (key, self.owner, expires)).rowcount > 0

    def release(self, key: str | None = None) -> None:
        """Give back one lease of this process (or all of them)."""
        if key is None:
            self._db.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
        else:
            self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, self.owner))

    # -- ledger: what was spent, for the budget -------------------------------------------
    def record_spend(self, key: str, model: str, input_tokens: int, output_tokens: int, estimated: bool,
                     cost: float) -> None:
        """Append one answered request's cost to the ledger (committed at once)."""
        self._db.execute("INSERT INTO ledger (key, model, input_tokens, output_tokens, estimated, cost, created) "
                         "VALUES (?,?,?,?,?,?,?)", (key, model, input_tokens, output_tokens, int(estimated), cost,
                                                    time.time()))

    def spent(self) -> float:
        """USD spent through this store since the budget was last reset (every process's calls)."""
        return float(self._db.execute("SELECT COALESCE(SUM(cost), 0) FROM ledger").fetchone()[0])

    def reset_budget(self) -> float:
        """Start a new budget; returns what the old one had spent."""
        spent = self.spent()
        self._db.execute("DELETE FROM ledger")
        return spent

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM answers WHERE status = ?", (status,)).fetchone()[0])

    def stats(self) -> list[dict[str, Any]]:
        """Entries, calls, tokens and cost per (kind, engine, model, status)."""
        rows = self._db.execute(
            """SELECT kind, engine, model, status, COUNT(*), SUM(calls), SUM(input_tokens),
                      SUM(output_tokens), SUM(cost), MIN(created), MAX(created)
               FROM answers GROUP BY kind, engine, model, status ORDER BY kind, engine, model, status"""
        ).fetchall()
        names = ("kind", "engine", "model", "status", "entries", "calls", "input_tokens",
                 "output_tokens", "cost", "first", "last")
        return [dict(zip(names, r)) for r in rows]

    def clear(self, *, model: str | None = None, status: str | None = None) -> int:
        """Delete entries (all, or those of one model and/or status); returns how many."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        sql = "DELETE FROM answers" + (" WHERE " + " AND ".join(where) if where else "")
        n = self._db.execute(sql, args).rowcount
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(n)
