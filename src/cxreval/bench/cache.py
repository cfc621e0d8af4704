"""Persistent caches of a benchmark: judgements, metric values and retrieval baselines, in one SQLite file.

A judgement is keyed by ``sha256(engine signature, reference text, candidate text)`` (the engine
signature names the ontology, the engine version and the uncertainty policy), a metric value by
``sha256(metric signature, reference, candidate)``. Rerunning a benchmark therefore judges
nothing again, and adding a system judges only that system's new pairs. An IU train-split
retrieval baseline's choice (the pool report of each study, never its text) is keyed by its rule,
settings, studies and the digest of the files it reads, so a rerun does not search again.

A judged pair is stored compactly: a JSON list of its non-TN rows
``[entity, presence, location, severity, comparison, reference_evidence, candidate_evidence,
reference_rules, candidate_rules]``, evidence and rules kept only on rows that carry an error (the
only ones a report shows). Rows stored before cxreval 0.3 have no rules (read with empty ones:
:func:`cxreval.judge.table.full_compact`); the rule engine's rows are keyed under
:data:`RULE_ROWS`, so its older rows are judged again rather than shown without their rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from cxreval.judge import EntityJudgement
from cxreval.judge.models import row_errors
from cxreval.judge.table import CompactRow
from cxreval.sqlite_store import Schema, SchemaError, connect, table_names, transaction, upgrade

_CHUNK = 900  # SQLite's default host-parameter limit is 999
#: Added to the rule engine's signature in its judgements' keys: its rows carry the rule ids
#: (``reference_rules``, ``candidate_rules``) since cxreval 0.3.
RULE_ROWS = "|rows:rules"


_TABLES = (
    "CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, rows TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS metric_values (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, choice TEXT NOT NULL)",
)
#: The bench cache's schema; its version lives in ``PRAGMA user_version``. Caches written before
#: cxreval 0.8.1 carry version 0 and the same tables: they are marked version 1, nothing else changes.
BENCH_CACHE = Schema(name="bench cache", version=1, create=_TABLES, migrations={0: _TABLES})
_OWN_TABLES = frozenset({"judgements", "metric_values", "baselines"})


class NotABenchCache(SchemaError):
    """A file that is not a bench cache (another store, or one a newer cxreval wrote)."""


def pair_key(signature: str, reference: str, candidate: str) -> str:
    """The cache key of one (reference, candidate) pair under one engine or metric signature."""
    h = hashlib.sha256()
    for part in (signature, reference, candidate):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def row_has_error(presence: str, location: str, severity: str, comparison: str, specificity: str = "exact") -> bool:
    return row_errors(presence, location, severity, comparison, specificity) > 0


def compact_rows(rows: Iterable[EntityJudgement]) -> list[CompactRow]:
    """The rows of a pair that are not implied (:attr:`EntityJudgement.implied`), evidence and
    rules kept on error rows only."""
    out: list[CompactRow] = []
    for r in rows:
        if r.implied:
            continue
        if row_has_error(r.presence, r.location, r.severity, r.comparison, r.specificity):
            out.append(
                (
                    r.entity,
                    r.presence,
                    r.location,
                    r.severity,
                    r.comparison,
                    r.reference,
                    r.candidate,
                    r.reference_rules,
                    r.candidate_rules,
                    r.specificity,
                )
            )
        else:
            out.append((r.entity, r.presence, r.location, r.severity, r.comparison, "", "", "", "", r.specificity))
    return out


class BenchCache:
    """The SQLite store; ``hits`` / ``misses`` count look-ups since it was opened."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect(self.path, durability="normal")
        try:
            self._create_or_migrate()
        except SchemaError:
            self._db.close()
            raise
        self._db.isolation_level = "DEFERRED"  # writes batch in Python's implicit transactions (committed by _put)

    def _create_or_migrate(self) -> None:
        """Create the tables of a new cache, or mark an older one with the current version; refuse
        another store's file and a newer cache (:data:`BENCH_CACHE`)."""
        with transaction(self._db) as db:
            tables = set(table_names(db))
            other = tables - _OWN_TABLES
            if other:
                raise NotABenchCache(
                    f"{self.path}: an SQLite file, but not a cxreval bench cache (tables: {', '.join(sorted(tables))})"
                )
            found = db.execute("PRAGMA user_version").fetchone()[0]
            try:
                version = upgrade(db, self.path, BENCH_CACHE, found if tables or found else None)
            except SchemaError as exc:
                raise NotABenchCache(str(exc)) from None
            db.execute(f"PRAGMA user_version = {version}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> BenchCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, table: str, column: str, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            part = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(part))
            found.update(self._db.execute(f"SELECT key, {column} FROM {table} WHERE key IN ({marks})", part))
        return found

    def _put(self, table: str, items: Iterable[tuple[str, str]]) -> None:
        with self._db:
            self._db.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", items)

    def get_judgements(self, keys: Sequence[str]) -> dict[str, str]:
        """Stored compact rows (JSON text) of the keys that are present."""
        return self._get("judgements", "rows", keys)

    def put_judgements(self, items: Iterable[tuple[str, str]]) -> None:
        self._put("judgements", items)

    def get_values(self, keys: Sequence[str]) -> dict[str, str]:
        """Stored metric values (JSON text: a number, null, or a list of statistics)."""
        return self._get("metric_values", "value", keys)

    def put_values(self, items: Iterable[tuple[str, str]]) -> None:
        self._put("metric_values", items)

    def get_baseline(self, key: str) -> str | None:
        """A retrieval baseline's stored choice (:func:`cxreval.datasets.baselines.baseline_key`)."""
        return self._get("baselines", "choice", [key]).get(key)

    def put_baseline(self, key: str, choice: str) -> None:
        self._put("baselines", [(key, choice)])

    def count(self, table: str = "judgements") -> int:
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def chunks(items: Sequence[object], size: int) -> Iterator[Sequence[object]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
