"""``cxreval.sqlite_store``: every store opens in WAL mode with its documented durability."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cxreval.bench.cache import BenchCache
from cxreval.llm.cache import AnswerCache
from cxreval.review.db import ReviewDB
from cxreval.sqlite_store import connect, describe_error, sqlite_uri, transaction

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
