"""The review database: one SQLite file holding the sample, the engine's judgements, the report
texts and every reviewer's answers.

SQLite in WAL mode, so several reviewers' requests (one connection each) read while one
writes, and every answer is committed (``synchronous=FULL``) before the server replies: a
server killed mid-session loses nothing it acknowledged. ``PRAGMA application_id`` marks the
file as a cxreval review database and ``PRAGMA user_version`` carries the schema version, so
another tool's database (or an older schema) is refused with a message instead of misread.

Each write the review page sends carries an id of its own (``op_id``); the id is recorded in
table ``applied`` in the transaction of the write, so a write the page sends again (its reply
was lost, or another tab of the same browser sent it too) is applied once. SQLite errors are
turned into messages that name the file and what is wrong with it (:func:`describe_error`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, field_validator

from cxreval.judge.models import (
    AttributeJudgement,
    ComparisonJudgement,
    EntityJudgement,
    Presence,
)
from cxreval.ontology import Ontology
from cxreval.sqlite_store import LOCK_TIMEOUT, Schema, SchemaError, describe_error, read_only, table_names, transaction, upgrade
from cxreval.sqlite_store import connect as connect_store

#: "CXRv" in ASCII: what ``PRAGMA application_id`` holds in a cxreval review database.
APPLICATION_ID = 0x43585276
SCHEMA_VERSION = 1
#: A reviewer name; matched whole (``fullmatch``: ``$`` would let a trailing newline through).
REVIEWER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
#: The id the page gives each write it sends, so that a write sent twice is applied once.
OP_ID_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
FIELDS = ("presence", "location", "severity", "comparison")
#: What the engine said about an entity it gave no row for: mentioned in neither report.
IMPLICIT = {"presence": "TN", "location": "not-available", "severity": "not-available", "comparison": "other"}

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entities (id TEXT PRIMARY KEY, name TEXT NOT NULL, grp TEXT NOT NULL, critical INTEGER NOT NULL,
                       attributes TEXT NOT NULL);
CREATE TABLE strata (key TEXT PRIMARY KEY, presence TEXT NOT NULL, grp TEXT NOT NULL, critical INTEGER NOT NULL,
                     size INTEGER NOT NULL, sampled INTEGER NOT NULL);
CREATE TABLE pairs (pair_id TEXT PRIMARY KEY, position INTEGER NOT NULL UNIQUE, stratum TEXT NOT NULL
                    REFERENCES strata(key), weight REAL NOT NULL, reference TEXT NOT NULL, candidate TEXT NOT NULL);
CREATE TABLE engine_rows (pair_id TEXT NOT NULL REFERENCES pairs(pair_id), entity TEXT NOT NULL,
                          presence TEXT NOT NULL, location TEXT NOT NULL, severity TEXT NOT NULL,
                          comparison TEXT NOT NULL, reference_evidence TEXT NOT NULL,
                          candidate_evidence TEXT NOT NULL, reference_rules TEXT NOT NULL DEFAULT '',
                          candidate_rules TEXT NOT NULL DEFAULT '', PRIMARY KEY (pair_id, entity));
CREATE TABLE answers (reviewer TEXT NOT NULL, pair_id TEXT NOT NULL REFERENCES pairs(pair_id),
                      entity TEXT NOT NULL, presence TEXT NOT NULL, location TEXT NOT NULL,
                      severity TEXT NOT NULL, comparison TEXT NOT NULL, added INTEGER NOT NULL,
                      answered_at TEXT NOT NULL, PRIMARY KEY (reviewer, pair_id, entity));
CREATE TABLE notes (reviewer TEXT NOT NULL, pair_id TEXT NOT NULL REFERENCES pairs(pair_id), note TEXT NOT NULL,
                    updated_at TEXT NOT NULL, PRIMARY KEY (reviewer, pair_id));
CREATE TABLE checked (reviewer TEXT NOT NULL, pair_id TEXT NOT NULL REFERENCES pairs(pair_id),
                      checked_at TEXT NOT NULL, PRIMARY KEY (reviewer, pair_id));
"""
#: Added after schema 1 was released, without a version change (older cxreval ignores it):
#: ``serve`` creates it in a schema-1 file that lacks it. So were ``engine_rows``'s last two columns
#: (the rule engine's rule ids, cxreval 0.3): a file without them reads them as empty, and an older
#: cxreval reading a newer file passes them by.
_APPLIED = """CREATE TABLE IF NOT EXISTS applied (op_id TEXT PRIMARY KEY, reviewer TEXT NOT NULL,
                                   action TEXT NOT NULL, applied_at TEXT NOT NULL);"""

#: The review database's schema; its version lives in ``PRAGMA user_version``. Schema 1 is the only
#: one so far, so there is nothing to migrate: another version is refused with a message.
REVIEW_DATABASE = Schema(
    name="review database",
    version=SCHEMA_VERSION,
    create=[*(s.strip() for s in _SCHEMA.split(";") if s.strip()), _APPLIED],
)


class ReviewDBError(ValueError):
    """A file that is not a usable review database, or a request it cannot take; the message
    names the file (or the pair / entity / field)."""


class AlreadyInitialised(ReviewDBError):
    """``review init`` on a database that already holds a sample."""


class Answer(BaseModel):
    """One reviewer's verdict on one entity of one pair: all four fields, as SPEC-CXR judges them."""

    reviewer: str
    pair_id: str
    entity: str
    presence: Presence
    location: AttributeJudgement = "not-available"
    severity: AttributeJudgement = "not-available"
    comparison: ComparisonJudgement = "other"

    @field_validator("reviewer")
    @classmethod
    def _reviewer_name(cls, value: str) -> str:
        return check_reviewer(value)


class EngineRow(BaseModel):
    """The engine's judgement of one entity, with the evidence sentences it quoted and the rules
    that read them (the rule engine's, :func:`cxreval.extract.explain.rules_line`; else empty)."""

    pair_id: str
    entity: str
    presence: str
    location: str
    severity: str
    comparison: str
    reference_evidence: str
    candidate_evidence: str
    reference_rules: str = ""
    candidate_rules: str = ""


class EntityInfo(BaseModel):
    """What the page and the statistics need of an ontology entity."""

    id: str
    name: str
    group: str
    critical: bool
    attributes: list[str]


class PairInfo(BaseModel):
    """A sampled pair with its texts, stratum and inclusion weight."""

    pair_id: str
    position: int
    stratum: str
    weight: float
    reference: str
    candidate: str


class StoredAnswer(BaseModel):
    """An answer as stored: the verdict, whether the reviewer added the entity, and when."""

    reviewer: str
    pair_id: str
    entity: str
    presence: str
    location: str
    severity: str
    comparison: str
    added: bool
    answered_at: str


def check_reviewer(name: str) -> str:
    """A reviewer name: 1-40 letters, digits, ``_ . -`` (it goes in URLs and file names)."""
    if not isinstance(name, str) or not REVIEWER_RE.fullmatch(name):
        raise ReviewDBError(
            f"reviewer name {name!r}: use 1-40 letters, digits, '_', '.' or '-' (starting with a letter or digit)"
        )
    return name


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def check_op_id(op_id: object) -> str | None:
    """The id of a write sent by the page (None: the client gave none, no deduplication)."""
    if op_id is None:
        return None
    if not isinstance(op_id, str) or not OP_ID_RE.fullmatch(op_id):
        raise ReviewDBError(f"op_id {op_id!r}: use 8-64 letters, digits, '_' or '-'")
    return op_id


def connect(path: Path, timeout: float = LOCK_TIMEOUT) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), waiting up to ``timeout``
    seconds for another connection's write lock; every commit is synced (durability ``full``:
    :mod:`cxreval.sqlite_store`). WAL mode is set by :meth:`ReviewDB.create` and :meth:`ReviewDB.open`,
    which name a read-only folder in their error."""
    return connect_store(path, durability="full", timeout=timeout, row_factory=sqlite3.Row, wal=False)


def _identify(path: Path) -> tuple[int, int, list[str]]:
    """(application_id, user_version, table names) of an existing SQLite file."""
    try:
        with read_only(path) as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = table_names(conn)
    except sqlite3.Error as exc:
        raise ReviewDBError(describe_error(path, exc)) from None
    return app_id, version, tables


class ReviewDB:
    """An open review database. Methods commit before they return (one short transaction each)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | Path) -> ReviewDB:
        """A new, empty review database at ``path`` (a missing or zero-length file).

        Raises :class:`AlreadyInitialised` on a review database, :class:`ReviewDBError` on any
        other file (another tool's SQLite database, or not SQLite at all).
        """
        path = Path(path)
        if path.is_dir():
            raise ReviewDBError(f"--db {path}: a folder is in the way; --db names a file")
        if path.exists() and path.stat().st_size > 0:
            try:
                app_id, _, tables = _identify(path)
            except ReviewDBError as exc:
                raise ReviewDBError(f"{exc}; give a new file name for --db") from None
            if app_id == APPLICATION_ID:
                raise AlreadyInitialised(
                    f"{path} already holds a review sample; review it with cxreval review serve "
                    f"{path}, or give a new --db file to draw another sample"
                )
            raise ReviewDBError(_foreign(path, app_id, tables) + "; give a new file name for --db")
        if not path.parent.exists():
            raise ReviewDBError(f"--db {path}: folder {path.parent} does not exist")
        try:
            conn = connect(path)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            with transaction(conn):
                version = upgrade(conn, path, REVIEW_DATABASE, None)
                conn.execute(f"PRAGMA user_version = {version}")
        except sqlite3.Error as exc:
            raise ReviewDBError(describe_error(path, exc)) from None
        return cls(path, conn)

    @classmethod
    def open(cls, path: str | Path, lock_timeout: float = LOCK_TIMEOUT) -> ReviewDB:
        """An existing review database; refuses any other file with a message naming it.
        ``lock_timeout``: seconds a write waits for another program's lock before it fails."""
        path = Path(path)
        if not path.is_file():
            raise ReviewDBError(f"{path}: no such review database; create one with cxreval review init")
        app_id, version, tables = _identify(path)
        if app_id != APPLICATION_ID:
            raise ReviewDBError(_foreign(path, app_id, tables))
        try:
            REVIEW_DATABASE.check(path, version)
        except SchemaError as exc:
            raise ReviewDBError(str(exc)) from None
        try:
            conn = connect(path, lock_timeout)
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise ReviewDBError(describe_error(path, exc, lock_timeout)) from None
        return cls(path, conn)

    def check_writable(self) -> None:
        """Commit one write (the schema version, unchanged; the table ``applied`` where missing), so
        that a server that could not save answers says why before it starts, not on the first one."""
        timeout = self.conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
        try:
            with self._transaction() as c:
                c.execute(_APPLIED)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise ReviewDBError(describe_error(self.path, exc, timeout)) from None

    def sample_id(self) -> str:
        """A short fingerprint of this sample (its settings and creation time): the page keeps
        unsaved answers per sample, so that none is sent to another database served at the same
        address."""
        text = json.dumps(sorted(self.meta().items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; inside one already open (see :meth:`once`), part of it."""
        if self.conn.in_transaction:
            yield self.conn
            return
        with transaction(self.conn):
            yield self.conn

    # -- the sample ----------------------------------------------------------------------------

    def store_sample(
        self,
        meta: dict[str, str],
        ontology: Ontology,
        strata: Sequence[Any],
        pairs: Sequence[PairInfo],
        rows: Sequence[EntityJudgement],
    ) -> None:
        """Write the sample once: settings, entity list, strata, pairs with texts, engine rows."""
        with self._transaction() as c:
            if c.execute("SELECT COUNT(*) FROM pairs").fetchone()[0]:
                raise AlreadyInitialised(f"{self.path} already holds a review sample")
            c.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
            c.executemany(
                "INSERT INTO entities VALUES (?, ?, ?, ?, ?)",
                [(e.id, e.name, e.group, int(e.critical), ",".join(e.attributes)) for e in ontology.entities],
            )
            c.executemany(
                "INSERT INTO strata VALUES (?, ?, ?, ?, ?, ?)",
                [(s.key, s.presence, s.group, int(s.critical), s.size, s.sampled) for s in strata],
            )
            c.executemany(
                "INSERT INTO pairs VALUES (?, ?, ?, ?, ?, ?)",
                [(p.pair_id, p.position, p.stratum, p.weight, p.reference, p.candidate) for p in pairs],
            )
            c.executemany(
                "INSERT INTO engine_rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.pair_id,
                        r.entity,
                        r.presence,
                        r.location,
                        r.severity,
                        r.comparison,
                        r.reference,
                        r.candidate,
                        r.reference_rules,
                        r.candidate_rules,
                    )
                    for r in rows
                ],
            )

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.conn.execute("SELECT key, value FROM meta")}

    def entities(self) -> dict[str, EntityInfo]:
        return {
            r["id"]: EntityInfo(
                id=r["id"],
                name=r["name"],
                group=r["grp"],
                critical=bool(r["critical"]),
                attributes=[a for a in r["attributes"].split(",") if a],
            )
            for r in self.conn.execute("SELECT * FROM entities ORDER BY id")
        }

    def strata(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM strata ORDER BY key")]

    def pairs(self) -> list[PairInfo]:
        return [PairInfo(**dict(r)) for r in self.conn.execute("SELECT * FROM pairs ORDER BY position")]

    def pair(self, position: int) -> PairInfo | None:
        r = self.conn.execute("SELECT * FROM pairs WHERE position = ?", (position,)).fetchone()
        return PairInfo(**dict(r)) if r else None

    def engine_rows(self, pair_id: str | None = None) -> list[EngineRow]:
        sql = "SELECT * FROM engine_rows"
        args: tuple[str, ...] = ()
        if pair_id is not None:
            sql, args = sql + " WHERE pair_id = ?", (pair_id,)
        return [EngineRow(**dict(r)) for r in self.conn.execute(sql + " ORDER BY pair_id, rowid", args)]

    # -- answers -------------------------------------------------------------------------------

    def once(self, op_id: str | None, reviewer: str, action: str, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``write`` (one of the methods below) unless the write ``op_id`` was applied before;
        the id is recorded in the same transaction, so a write sent again is applied exactly once.
        A repeated id gives ``{"duplicate": True, "op_id": ...}``."""
        if op_id is None:
            return write()
        with self._transaction() as c:
            if c.execute("SELECT 1 FROM applied WHERE op_id = ?", (op_id,)).fetchone():
                return {"duplicate": True, "op_id": op_id}
            result = write()
            c.execute("INSERT INTO applied VALUES (?, ?, ?, ?)", (op_id, reviewer, action, _now()))
        return result

    def save_answer(self, answer: Answer) -> StoredAnswer:
        """Store (or replace) a verdict and commit it. An entity the engine gave no row for is an
        addition (the engine missed it); it must be in the ontology."""
        with self._transaction() as c:
            self._require_pair(c, answer.pair_id)
            engine = c.execute(
                "SELECT 1 FROM engine_rows WHERE pair_id = ? AND entity = ?", (answer.pair_id, answer.entity)
            ).fetchone()
            entity = c.execute("SELECT attributes FROM entities WHERE id = ?", (answer.entity,)).fetchone()
            if entity is None:
                raise ReviewDBError(f"entity {answer.entity!r}: not in the ontology the sample was drawn with")
            allowed = set(entity["attributes"].split(","))
            for fld in ("location", "severity", "comparison"):
                if fld not in allowed and getattr(answer, fld) != IMPLICIT[fld]:
                    raise ReviewDBError(f"entity {answer.entity!r} has no {fld}; {fld} must be {IMPLICIT[fld]!r}")
            stamp = _now()
            c.execute(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (reviewer, pair_id, entity) DO "
                "UPDATE SET presence = excluded.presence, location = excluded.location, severity = excluded.severity, "
                "comparison = excluded.comparison, answered_at = excluded.answered_at",
                (
                    answer.reviewer,
                    answer.pair_id,
                    answer.entity,
                    answer.presence,
                    answer.location,
                    answer.severity,
                    answer.comparison,
                    0 if engine else 1,
                    stamp,
                ),
            )
        return StoredAnswer(**answer.model_dump(), added=engine is None, answered_at=stamp)

    def remove_added(self, reviewer: str, pair_id: str, entity: str) -> bool:
        """Withdraw an entity the reviewer added (engine rows are corrected, never removed)."""
        with self._transaction() as c:
            self._require_pair(c, pair_id)
            cur = c.execute(
                "DELETE FROM answers WHERE reviewer = ? AND pair_id = ? AND entity = ? AND added = 1",
                (check_reviewer(reviewer), pair_id, entity),
            )
            if cur.rowcount:
                c.execute("DELETE FROM checked WHERE reviewer = ? AND pair_id = ?", (reviewer, pair_id))
        return bool(cur.rowcount)

    def save_note(self, reviewer: str, pair_id: str, note: str) -> None:
        """Store the reviewer's note on a pair (an empty note removes it)."""
        if len(note) > 10_000:
            raise ReviewDBError("note: at most 10,000 characters")
        with self._transaction() as c:
            self._require_pair(c, pair_id)
            if note.strip():
                c.execute(
                    "INSERT INTO notes VALUES (?, ?, ?, ?) ON CONFLICT (reviewer, pair_id) DO UPDATE SET "
                    "note = excluded.note, updated_at = excluded.updated_at",
                    (check_reviewer(reviewer), pair_id, note, _now()),
                )
            else:
                c.execute("DELETE FROM notes WHERE reviewer = ? AND pair_id = ?", (reviewer, pair_id))

    def set_checked(self, reviewer: str, pair_id: str, checked: bool = True) -> None:
        """Mark a pair checked by a reviewer (every engine row answered, nothing left to add)."""
        with self._transaction() as c:
            self._require_pair(c, pair_id)
            check_reviewer(reviewer)
            if checked:
                open_rows = [
                    r[0]
                    for r in c.execute(
                        "SELECT entity FROM engine_rows e WHERE pair_id = ? AND NOT EXISTS (SELECT 1 FROM answers a WHERE "
                        "a.reviewer = ? AND a.pair_id = e.pair_id AND a.entity = e.entity) ORDER BY entity",
                        (pair_id, reviewer),
                    )
                ]
                if open_rows:
                    raise ReviewDBError(f"pair {pair_id}: {len(open_rows)} entities not answered yet ({', '.join(open_rows)})")
                c.execute("INSERT OR REPLACE INTO checked VALUES (?, ?, ?)", (reviewer, pair_id, _now()))
            else:
                c.execute("DELETE FROM checked WHERE reviewer = ? AND pair_id = ?", (reviewer, pair_id))

    @staticmethod
    def _require_pair(c: sqlite3.Connection, pair_id: str) -> None:
        if c.execute("SELECT 1 FROM pairs WHERE pair_id = ?", (pair_id,)).fetchone() is None:
            raise ReviewDBError(f"pair {pair_id!r}: not in the review sample")

    def answers(self, reviewer: str | None = None, pair_id: str | None = None) -> list[StoredAnswer]:
        where, args = [], []
        if reviewer is not None:
            where.append("reviewer = ?")
            args.append(reviewer)
        if pair_id is not None:
            where.append("pair_id = ?")
            args.append(pair_id)
        sql = "SELECT * FROM answers" + (" WHERE " + " AND ".join(where) if where else "")
        return [
            StoredAnswer(**{**dict(r), "added": bool(r["added"])})
            for r in self.conn.execute(sql + " ORDER BY reviewer, pair_id, entity", args)
        ]

    def notes(self, reviewer: str | None = None) -> dict[tuple[str, str], str]:
        sql = "SELECT reviewer, pair_id, note FROM notes"
        args: tuple[str, ...] = ()
        if reviewer is not None:
            sql, args = sql + " WHERE reviewer = ?", (reviewer,)
        return {(r["reviewer"], r["pair_id"]): r["note"] for r in self.conn.execute(sql, args)}

    def checked(self, reviewer: str | None = None) -> set[tuple[str, str]]:
        """(reviewer, pair id) of every pair a reviewer has marked checked."""
        sql = "SELECT reviewer, pair_id FROM checked"
        args: tuple[str, ...] = ()
        if reviewer is not None:
            sql, args = sql + " WHERE reviewer = ?", (reviewer,)
        return {(r["reviewer"], r["pair_id"]) for r in self.conn.execute(sql, args)}

    def reviewers(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT reviewer FROM answers UNION SELECT reviewer FROM checked ORDER BY 1")]


def _foreign(path: Path, app_id: int, tables: list[str]) -> str:
    what = f"application id {app_id:#x}" if app_id else "no application id"
    held = f", tables {', '.join(tables[:8])}{'...' if len(tables) > 8 else ''}" if tables else ""
    return f"{path}: not a cxreval review database ({what}{held}); it may belong to another tool and is left untouched"
