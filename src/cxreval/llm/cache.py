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
``--max-cost`` is a budget per store across reruns until ``reset_budget``. The worst case of each
request in flight is a *reservation*, a row in the store (``reserve``): it is taken only if the
ledger, every process's reservations and it fit under the cap, in one write transaction, and it
is released in the transaction that writes the request's real cost to the ledger
(``record_spend``), so the cap holds for every process that shares the file. A reservation
lasts one request's deadline plus 30 s; one whose owner died is dropped (same host: at once).

All of this needs SQLite's locks and WAL shared memory, which hold only for processes on one
host: a store on a network file system (NFS, SMB, ...) is opened with a warning, and must not be
shared between machines. A store of an older schema is migrated in place when it is opened; one
written by a newer cxreval is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import sqlite3
import time
import uuid
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Self

from pydantic import BaseModel, ConfigDict

from cxreval.sqlite_store import (
    NewerSchema,
    Schema,
    SchemaError,
    connect,
    is_sqlite_file,
    read_only,
    table_names,
    transaction,
    upgrade,
)

log = logging.getLogger("cxreval.llm")

#: 1: answers, leases, ledger. 2: + reservations (the budget of requests in flight, per store).
SCHEMA_VERSION = 2
#: File systems on which SQLite's locks and WAL do not hold between machines (``/proc`` names).
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb2",
        "smb3",
        "smbfs",
        "ncpfs",
        "afs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        "orangefs",
        "pvfs2",
        "davfs",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.cephfs",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
        "fuse.davfs2",
        "fuse.juicefs",
        "fuse.beegfs",
    }
)
_warned_network: set[Path] = set()


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


class NotAnAnswerStore(SchemaError):
    """A file that is not cxreval's LLM answer store; it is never opened for writing."""


class NewerAnswerStore(NotAnAnswerStore, NewerSchema):
    """An answer store of a schema newer than this cxreval reads; it is never opened for writing."""


class Budget(NamedTuple):
    """What :meth:`AnswerCache.reserve` found: the reservation taken (None: it did not fit), what
    the store has spent, and the requests in flight (every process's) holding the rest."""

    reservation: int | None
    spent: float
    reserved: float
    in_flight: int


def _unescape_mount(field: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: str | Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system ``path`` lies on (``ext4``, ``nfs4``, ...), from the longest
    matching mount point of ``/proc/self/mountinfo`` (Linux; None where it cannot be read)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = Path(path).resolve()
    best, fstype = -1, None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        mount = Path(_unescape_mount(parts[4]))
        if (mount == target or mount in target.parents) and len(mount.parts) > best:
            best, fstype = len(mount.parts), rest.split()[0]
    return fstype


def network_filesystem(path: str | Path, mountinfo: str | None = None) -> str | None:
    """The network file system type ``path`` lies on (see :data:`NETWORK_FILESYSTEMS`), or None."""
    fstype = filesystem_type(path, mountinfo)
    return fstype if fstype in NETWORK_FILESYSTEMS else None


_TABLES = (
    """CREATE TABLE IF NOT EXISTS answers (
        key TEXT PRIMARY KEY, kind TEXT NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,
        status TEXT NOT NULL, value TEXT, raw TEXT NOT NULL, error TEXT NOT NULL,
        input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, calls INTEGER NOT NULL,
        cost REAL NOT NULL, created REAL NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, key TEXT NOT NULL, model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL,
        cost REAL NOT NULL, created REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS reservations (id INTEGER PRIMARY KEY, key TEXT NOT NULL,
        owner TEXT NOT NULL, cost REAL NOT NULL, expires REAL NOT NULL)""",
)

#: The answer store's schema; its version lives in the ``meta`` table (``schema_version``).
#: Schema 1 gains the ``reservations`` table (and any other it lacks); nothing is lost.
ANSWER_STORE = Schema(
    name="answer store",
    version=SCHEMA_VERSION,
    create=_TABLES,
    migrations={1: _TABLES},
    newer_hint="upgrade cxreval (pip install -U cxreval) or give another --cache",
)


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
    if not is_sqlite_file(p):
        raise NotAnAnswerStore(f"{p}: not an SQLite file, so not a cxreval LLM answer store")
    try:
        with read_only(p.resolve()) as db:
            tables = set(table_names(db))
            version = _stored_version(db, tables)
    except sqlite3.DatabaseError as exc:
        raise NotAnAnswerStore(f"{p}: cannot read as SQLite ({exc})") from None
    if not tables:
        return  # an SQLite file with nothing in it yet: a store another process is creating (it sets
        # WAL mode, then creates every table in one transaction), or an empty database: nothing to lose
    if "answers" not in tables or version is None:
        found = ", ".join(sorted(tables))
        raise NotAnAnswerStore(f"{p}: an SQLite file, but not a cxreval LLM answer store (tables: {found})")
    _check_version(p, version)


def _stored_version(db: sqlite3.Connection, tables: set[str]) -> Any:
    """The schema version a store records in its ``meta`` table, or None (a new file)."""
    if "meta" not in tables:
        return None
    row = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    return None if row is None else row[0]


def _check_version(path: Path, value: Any) -> int:
    """The store's version; refuses one that is not a number or newer than :data:`SCHEMA_VERSION`."""
    try:
        return ANSWER_STORE.check(path, value)
    except NewerSchema as exc:
        raise NewerAnswerStore(str(exc)) from None
    except SchemaError as exc:
        raise NotAnAnswerStore(str(exc)) from None


class AnswerCache:
    """SQLite store; use from one thread (the event loop's), any number of processes may read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        check_answer_store(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect(self.path, durability="normal")
        try:
            self._create_or_migrate()
        except NotAnAnswerStore:
            self._db.close()
            raise
        self._warn_if_network()
        #: this process's lease owner id: host, pid (to tell a dead owner) and a random part
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so a read-check-write cannot race another process)."""
        with transaction(self._db):
            yield self._db

    def _create_or_migrate(self) -> None:
        """Create a new store's tables, or bring an older store up to :data:`SCHEMA_VERSION`
        (:data:`ANSWER_STORE`), in one transaction."""
        with self._write() as db:
            found = _stored_version(db, set(table_names(db)))
            if found is not None:
                _check_version(self.path, found)  # refused as NotAnAnswerStore / NewerAnswerStore
            version = upgrade(db, self.path, ANSWER_STORE, found)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(version),))

    def _warn_if_network(self) -> None:
        """Say once per store when it lies on a network file system (see the module doc)."""
        fstype = network_filesystem(self.path)
        if fstype is None or self.path in _warned_network:
            return
        _warned_network.add(self.path)
        log.warning(
            "%s is on a network file system (%s): SQLite's WAL and locks hold only between processes "
            "on one host, so never share this answer store between machines (its leases and the "
            "--max-cost budget would not hold, and the file may be corrupted); to be safe, give --cache "
            "a path on a local disk",
            self.path,
            fstype,
        )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
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
                a.key,
                a.kind,
                a.engine,
                a.model,
                a.status,
                None if a.value is None else json.dumps(a.value, ensure_ascii=False),
                json.dumps(a.raw, ensure_ascii=False),
                a.error,
                a.input_tokens,
                a.output_tokens,
                a.calls,
                a.cost,
                a.created or time.time(),
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

    def renew(self, key: str | None, ttl: float, *, skip: Collection[str] = ()) -> bool:
        """Extend this process's lease on ``key`` (or all of its leases but those in ``skip``) to
        ``ttl`` seconds from now.

        A lease of ``key`` that lapsed and is free again is taken back; one another owner took
        over stays theirs. Returns whether ``key`` (or any lease, for None) is now this process's.
        """
        expires = time.time() + ttl
        if key is None:
            marks = ",".join("?" * len(skip))
            return (
                self._db.execute(
                    f"UPDATE leases SET expires = ? WHERE owner = ? AND key NOT IN ({marks})", (expires, self.owner, *skip)
                ).rowcount
                > 0
            )
        if self._db.execute("UPDATE leases SET expires = ? WHERE key = ? AND owner = ?", (expires, key, self.owner)).rowcount > 0:
            return True
        return self._db.execute("INSERT OR IGNORE INTO leases VALUES (?,?,?)", (key, self.owner, expires)).rowcount > 0

    def release(self, key: str | None = None) -> None:
        """Give back one lease of this process (or all of them, and all of its reservations)."""
        if key is None:
            with self._write() as db:
                db.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
                db.execute("DELETE FROM reservations WHERE owner = ?", (self.owner,))
        else:
            self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, self.owner))

    # -- ledger and reservations: the --max-cost budget, shared by every process -------------
    def reserve(self, key: str, cost: float, cap: float, ttl: float) -> Budget:
        """Reserve ``cost`` (a request's worst case) for ``ttl`` seconds if the ledger, every
        process's live reservations and it stay within ``cap``; checked and taken in one write
        transaction, so two processes cannot both take the last of the budget."""
        with self._write() as db:
            self._drop_stale_reservations(time.time())
            spent = float(db.execute("SELECT COALESCE(SUM(cost), 0) FROM ledger").fetchone()[0])
            reserved, n = db.execute("SELECT COALESCE(SUM(cost), 0), COUNT(*) FROM reservations").fetchone()
            if spent + reserved + cost > cap:
                return Budget(None, spent, float(reserved), int(n))
            cur = db.execute(
                "INSERT INTO reservations (key, owner, cost, expires) VALUES (?,?,?,?)",
                (key, self.owner, cost, time.time() + ttl),
            )
            return Budget(cur.lastrowid, spent, float(reserved) + cost, int(n) + 1)

    def _drop_stale_reservations(self, now: float) -> None:
        """Delete reservations past their expiry, or whose owner is gone (same host: checked at once)."""
        owners = [r[0] for r in self._db.execute("SELECT DISTINCT owner FROM reservations WHERE owner != ?", (self.owner,))]
        dead = [o for o in owners if not _alive(o)]
        self._db.execute("DELETE FROM reservations WHERE expires <= ?", (now,))
        self._db.executemany("DELETE FROM reservations WHERE owner = ?", [(o,) for o in dead])

    def unreserve(self, reservation: int | None) -> None:
        """Give back a reservation whose request cost nothing (no answer came)."""
        if reservation is not None:
            self._db.execute("DELETE FROM reservations WHERE id = ? AND owner = ?", (reservation, self.owner))

    def record_spend(
        self,
        key: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        estimated: bool,
        cost: float,
        reservation: int | None = None,
    ) -> None:
        """Append one answered request's cost to the ledger and give back its reservation, in one
        transaction (committed at once): no other process sees the cost twice or not at all."""
        with self._write() as db:
            db.execute(
                "INSERT INTO ledger (key, model, input_tokens, output_tokens, estimated, cost, created) VALUES (?,?,?,?,?,?,?)",
                (key, model, input_tokens, output_tokens, int(estimated), cost, time.time()),
            )
            if reservation is not None:
                db.execute("DELETE FROM reservations WHERE id = ? AND owner = ?", (reservation, self.owner))

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
        names = (
            "kind",
            "engine",
            "model",
            "status",
            "entries",
            "calls",
            "input_tokens",
            "output_tokens",
            "cost",
            "first",
            "last",
        )
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
