"""``cxreval.sqlite_store``: every store opens in WAL mode with its documented durability."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cxreval.bench.cache import BENCH_CACHE, BenchCache, NotABenchCache
from cxreval.llm.cache import AnswerCache
from cxreval.review.db import REVIEW_DATABASE, ReviewDB, ReviewDBError
from cxreval.sqlite_store import (
    NewerSchema,
    Schema,
    SchemaError,
    connect,
    describe_error,
    is_sqlite_file,
    read_only,
    sqlite_uri,
    table_names,
    transaction,
    upgrade,
)

FULL, NORMAL = 2, 1  # PRAGMA synchronous


def _settings(conn: sqlite3.Connection) -> tuple[str, int]:
    return conn.execute("PRAGMA journal_mode").fetchone()[0], conn.execute("PRAGMA synchronous").fetchone()[0]


def test_each_store_has_its_durability(tmp_path: Path) -> None:
    with AnswerCache(tmp_path / "answers.sqlite") as answers:
        assert _settings(answers._db) == ("wal", NORMAL)
    with BenchCache(tmp_path / "bench.sqlite") as bench:
        assert _settings(bench._db) == ("wal", NORMAL)
    with ReviewDB.create(tmp_path / "review.sqlite") as review:
        assert _settings(review.conn) == ("wal", FULL)


def test_a_transaction_commits_or_rolls_back_whole(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.sqlite", durability="full")
    conn.execute("CREATE TABLE t (x INTEGER)")
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("stop")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]


def test_errors_name_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    junk = tmp_path / "odd #name?.sqlite"
    junk.write_bytes(b"not a database at all, just some bytes" * 100)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        sqlite3.connect(sqlite_uri(junk, mode="ro"), uri=True).execute("SELECT * FROM sqlite_master").fetchall()
    message = describe_error(junk, caught.value)
    assert message.startswith(f"{junk}: not an SQLite database")


# -- schema versions and migrations --------------------------------------------------------------

_STEPS = Schema(
    name="test store",
    version=3,
    create=["CREATE TABLE t (x INTEGER, y INTEGER, z INTEGER)"],
    migrations={1: ["ALTER TABLE t ADD COLUMN y INTEGER"], 2: ["ALTER TABLE t ADD COLUMN z INTEGER"]},
)


def test_an_older_store_is_migrated_one_step_at_a_time_inside_the_transaction(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.sqlite", durability="normal")
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute("INSERT INTO t VALUES (7)")
    with transaction(conn):
        assert upgrade(conn, tmp_path / "s.sqlite", _STEPS, 1) == 3
    assert conn.execute("SELECT x, y, z FROM t").fetchall() == [(7, None, None)]
    fresh = connect(tmp_path / "new.sqlite", durability="normal")
    with transaction(fresh):
        assert upgrade(fresh, tmp_path / "new.sqlite", _STEPS, None) == 3
    assert table_names(fresh) == ["t"]


def test_a_newer_an_unreadable_or_an_unmigratable_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with pytest.raises(NewerSchema, match=r"s\.sqlite: test store schema 4, written by a newer cxreval .* up to schema 3"):
        _STEPS.check(path, 4)
    with pytest.raises(SchemaError, match="unreadable schema version \\('two'\\)"):
        _STEPS.check(path, "two")
    with pytest.raises(SchemaError, match="schema 0; this cxreval reads schema 3 and cannot migrate it"):
        _STEPS.check(path, 0)
    conn = connect(path, durability="normal")
    conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(NewerSchema), transaction(conn):
        upgrade(conn, path, _STEPS, 9)
    assert [r[1] for r in conn.execute("PRAGMA table_info(t)")] == ["x"]  # nothing was written


def test_read_only_never_creates_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(sqlite3.OperationalError), read_only(missing) as conn:
        conn.execute("SELECT 1").fetchall()
    assert not missing.exists() and not is_sqlite_file(missing)


def test_a_bench_cache_of_an_earlier_cxreval_is_read_and_marked_with_the_version(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    old = sqlite3.connect(path)  # as cxreval 0.8.0 wrote it: the tables, user_version 0
    old.execute("CREATE TABLE judgements (key TEXT PRIMARY KEY, rows TEXT NOT NULL)")
    old.execute("CREATE TABLE metric_values (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    old.execute("INSERT INTO judgements VALUES ('k', '[]')")
    old.commit()
    old.close()
    with BenchCache(path) as cache:
        assert cache.get_judgements(["k"]) == {"k": "[]"}
        cache.put_judgements([("k2", "[1]")])
    with read_only(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == BENCH_CACHE.version
        assert table_names(conn) == ["baselines", "judgements", "metric_values"]
    with BenchCache(path) as cache:
        assert cache.get_judgements(["k", "k2"]) == {"k": "[]", "k2": "[1]"}


def test_a_bench_cache_refuses_another_store_and_a_newer_cache(tmp_path: Path) -> None:
    with AnswerCache(tmp_path / "answers.sqlite"):
        pass
    with pytest.raises(NotABenchCache, match=r"answers\.sqlite: an SQLite file, but not a cxreval bench cache \(tables: answers"):
        BenchCache(tmp_path / "answers.sqlite")
    newer = tmp_path / "newer.sqlite"
    with BenchCache(newer):
        pass
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 5")
    conn.close()
    with pytest.raises(NotABenchCache, match="bench cache schema 5, written by a newer cxreval"):
        BenchCache(newer)


def test_a_review_database_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "review.sqlite"
    ReviewDB.create(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {REVIEW_DATABASE.version + 1}")
    conn.close()
    with pytest.raises(ReviewDBError, match="review database schema 2, written by a newer cxreval"):
        ReviewDB.open(path)
