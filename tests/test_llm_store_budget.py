"""``--max-cost`` is one budget per answer store, whatever number of processes share it.

Real processes (the CLI) share one store and one real HTTP server on 127.0.0.1 that bills every
request exactly its worst case (``max_tokens`` of output, input free), so the cap allows exactly
``CAP`` answers. The server holds every request until each process is running (holds a lease in
the store) and no request has come for a moment, so all processes have their requests in flight
together: with reservations in one process's memory each process would spend the whole cap.
Also: migrating an older store, refusing a newer one, and telling a network file system.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# the module, its newer names looked up in each test: the cross-process test runs on any cxreval
from cxreval.llm import cache as answer_store
from cxreval.llm.cache import AnswerCache, check_answer_store

MAX_TOKENS = 1000
PRICE_OUTPUT = 1000.0  # USD per million tokens: one request's worst case is exactly 1 USD
CAP = 4  # USD: four answers
PAIRS_PER_PROCESS = 6
#: The server releases held requests once every process runs and none came for this long.
QUIET_SECONDS = 1.5
#: ... and in any case this long after the first request (so the test always ends).
HOLD_LIMIT_SECONDS = 90.0


class _BillingServer(ThreadingHTTPServer):
    """Answers every chat completion with ``{"entities": []}``, billed ``max_tokens`` of output."""

    daemon_threads = True

    def __init__(self, store: Path, processes: int) -> None:
        self.store, self.processes = store, processes
        self.cond = threading.Condition()
        self.answered = 0
        self.received = 0
        self.first_arrival = 0.0
        self.last_arrival = 0.0
        self.all_running_since: float | None = None
        self.open = False  # latched once the held requests are let go
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                server.hold()
                data = json.dumps(
                    {
                        "id": "chatcmpl-budget",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"entities": []}'}}
                        ],
                        "usage": {
                            "prompt_tokens": 1,
                            "completion_tokens": int(body["max_tokens"]),
                            "total_tokens": 1 + int(body["max_tokens"]),
                        },
                    }
                ).encode()
                with server.cond:
                    server.answered += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def _owners(self) -> int:
        """Processes holding a lease in the store: the ones that are running."""
        try:
            with sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=5) as db:
                return int(db.execute("SELECT COUNT(DISTINCT owner) FROM leases").fetchone()[0])
        except sqlite3.Error:
            return 0

    def _may_go(self, now: float) -> bool:
        if self.all_running_since is None and self._owners() >= self.processes:
            self.all_running_since = now
        if self.all_running_since is not None:
            return now - max(self.all_running_since, self.last_arrival) >= QUIET_SECONDS
        return now - self.first_arrival >= HOLD_LIMIT_SECONDS

    def hold(self) -> None:
        """Wait until the held requests are let go (see the module doc); bounded by HOLD_LIMIT."""
        with self.cond:
            now = time.monotonic()
            self.received += 1
            self.first_arrival = self.first_arrival or now
            self.last_arrival = now
            while not self.open:
                if self._may_go(time.monotonic()):
                    self.open = True
                    self.cond.notify_all()
                    break
                self.cond.wait(0.05)


def _pairs_file(path: Path, tag: str) -> Path:
    rows = [
        {
            "id": f"{tag}{i}",
            "reference": f"Study {tag}{i}. The lungs are clear.",
            "candidate": "The lungs are clear. Heart size is normal.",
        }
        for i in range(PAIRS_PER_PROCESS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("processes", [2, 4])
def test_one_cap_holds_across_processes_sharing_a_store(tmp_path, processes):
    cache = tmp_path / "shared.sqlite"
    AnswerCache(cache).close()  # the store exists before the server looks at its leases
    server = _BillingServer(cache, processes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "OPENAI_API_KEY": ""}
    try:
        procs = []
        for i in range(processes):
            tag = "abcd"[i]
            cmd = [
                sys.executable,
                "-m",
                "cxreval",
                "evaluate",
                "--pairs",
                str(_pairs_file(tmp_path / f"{tag}.jsonl", tag)),
                "--out",
                str(tmp_path / f"out-{tag}"),
                "--engine",
                "llm-pairwise",
                "--base-url",
                server.base_url,
                "--model",
                "loopback",
                "--local-only",
                "--cache",
                str(cache),
                "--concurrency",
                "4",
                "--retries",
                "0",
                "--timeout",
                "120",
                "--max-tokens",
                str(MAX_TOKENS),
                "--price-input",
                "0",
                "--price-output",
                str(PRICE_OUTPUT),
                "--max-cost",
                str(CAP),
                "--json",
            ]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        server.shutdown()
        server.server_close()
    # what the server billed: never more than the cap, however many processes shared it
    assert server.answered * MAX_TOKENS * PRICE_OUTPUT / 1e6 <= CAP, f"{server.answered} answers billed"
    assert server.answered == CAP  # and the cap is used to the last request that fits
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 3, err  # stopped by --max-cost, said as such
        assert "--max-cost" in err
    scored = failed = 0
    for i in range(processes):
        out = tmp_path / f"out-{'abcd'[i]}"
        scores = json.loads((out / "scores.json").read_text())
        assert scores["n_pairs"] + scores["n_failed"] == PAIRS_PER_PROCESS
        reasons = {json.loads(x)["reason"] for x in (out / "failures.jsonl").read_text().splitlines()}
        assert reasons == {"budget"}
        scored, failed = scored + scores["n_pairs"], failed + scores["n_failed"]
    assert scored == CAP and failed == processes * PAIRS_PER_PROCESS - CAP
    with AnswerCache(cache) as store:
        assert store.spent() == pytest.approx(CAP)  # the ledger agrees with the bill
        db = store._db
        assert db.execute("SELECT COUNT(*) FROM reservations").fetchone()[0] == 0  # all given back
        assert db.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0


def test_reservations_are_shared_taken_atomically_and_released_with_the_charge(tmp_path):
    cache = tmp_path / "c.sqlite"
    with AnswerCache(cache) as a, AnswerCache(cache) as b:  # two owners, as two processes are
        first = a.reserve("k1", 3.0, 4.0, 60)
        assert first.reservation is not None and first.in_flight == 1
        refused = b.reserve("k2", 2.0, 4.0, 60)  # a's reservation is in the way, not only a's memory
        assert refused.reservation is None and refused.reserved == 3.0 and refused.in_flight == 1
        assert b.reserve("k2", 1.0, 4.0, 60).reservation is not None
        a.record_spend("k1", "m", 1, 10, False, 0.5, first.reservation)  # charged and released at once
        after = b.reserve("k3", 2.0, 4.0, 60)
        assert after.reservation is not None and after.spent == 0.5 and after.reserved == 3.0
        b.release()  # all of b's reservations (and leases) go with it
        assert a.reserve("k4", 3.5, 4.0, 60).reservation is not None
        a.release()
        uncapped = a.reserve("k5", 100.0, math.inf, 60)  # a run without a cap reserves too: always granted ...
        assert uncapped.reservation is not None
        assert b.reserve("k6", 0.1, 4.0, 60).reservation is None  # ... and a capped run counts it


def test_reservations_of_a_dead_or_expired_owner_are_dropped(tmp_path):
    cache = tmp_path / "c.sqlite"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with AnswerCache(cache) as store:
        rows = [
            ("k1", f"{socket.gethostname()}:{gone.pid}:deadbeef", 3.0, time.time() + 600),  # dead: at once
            ("k2", "otherhost:1:deadbeef", 3.0, time.time() - 1),
        ]  # another host: at its expiry
        store._db.executemany("INSERT INTO reservations (key, owner, cost, expires) VALUES (?,?,?,?)", rows)
        budget = store.reserve("k3", 3.0, 4.0, 60)
        assert budget.reservation is not None and budget.in_flight == 1


def _v1_store(path: Path, version: str = "1") -> None:
    """A store as cxreval wrote it before reservations (schema 1), holding one answer and its cost."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("""CREATE TABLE answers (key TEXT PRIMARY KEY, kind TEXT NOT NULL, engine TEXT NOT NULL,
            model TEXT NOT NULL, status TEXT NOT NULL, value TEXT, raw TEXT NOT NULL, error TEXT NOT NULL,
            input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, calls INTEGER NOT NULL,
            cost REAL NOT NULL, created REAL NOT NULL)""")
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (version,))
        db.execute("CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL)")
        db.execute("""CREATE TABLE ledger (id INTEGER PRIMARY KEY, key TEXT NOT NULL, model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL,
            cost REAL NOT NULL, created REAL NOT NULL)""")
        db.execute("INSERT INTO answers VALUES ('k', 'pairwise', 'e', 'm', 'ok', '{\"items\": []}', '[]', '', 1, 2, 1, 0.25, 0)")
        db.execute("INSERT INTO ledger VALUES (1, 'k', 'm', 1, 2, 0, 0.25, 0)")
    db.close()


def test_an_older_store_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.sqlite"
    _v1_store(path)
    check_answer_store(path)  # an older store is not refused
    with AnswerCache(path) as store:
        assert store.get("k").status == "ok" and store.spent() == 0.25  # nothing lost
        db = store._db
        assert db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0] == str(
            answer_store.SCHEMA_VERSION
        )
        assert store.reserve("k2", 1.0, 2.0, 60).reservation is not None  # the new table is there


def test_a_newer_store_is_refused_with_a_way_forward(tmp_path):
    path = tmp_path / "new.sqlite"
    _v1_store(path, version=str(answer_store.SCHEMA_VERSION + 1))
    before = path.read_bytes()
    with pytest.raises(answer_store.NewerAnswerStore, match="newer cxreval.*upgrade cxreval"):
        check_answer_store(path)
    with pytest.raises(answer_store.NewerAnswerStore):
        AnswerCache(path)
    proc = subprocess.run(
        [sys.executable, "-m", "cxreval", "cache", "--path", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2 and "upgrade cxreval" in proc.stderr.replace("\n", " ")
    assert path.read_bytes() == before  # never written to


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /home rw,relatime shared:20 - nfs4 fs:/export/home rw,vers=4.2
41 40 8:2 / /home/me/local\\040disk rw,relatime shared:21 - xfs /dev/sdb1 rw
42 22 0:36 / /mnt/share rw,relatime shared:22 - cifs //nas/share rw
43 22 0:37 / /scratch rw,relatime shared:23 - fuse.sshfs me@host:/scratch rw
"""


def test_network_file_systems_are_told_from_the_mount_table():
    assert answer_store.network_filesystem("/home/me/.cache/cxreval/llm-answers.sqlite", MOUNTINFO) == "nfs4"
    assert answer_store.network_filesystem("/home/me/local disk/c.sqlite", MOUNTINFO) is None  # the longest mount wins
    assert answer_store.filesystem_type("/home/me/local disk/c.sqlite", MOUNTINFO) == "xfs"
    assert answer_store.network_filesystem("/mnt/share/c.sqlite", MOUNTINFO) == "cifs"
    assert answer_store.network_filesystem("/scratch/c.sqlite", MOUNTINFO) == "fuse.sshfs"
    assert answer_store.network_filesystem("/var/tmp/c.sqlite", MOUNTINFO) is None


@pytest.mark.skipif(not Path("/proc/self/mountinfo").exists(), reason="needs Linux's /proc")
def test_the_real_mount_table_is_read(tmp_path):
    fstype = answer_store.filesystem_type(tmp_path / "c.sqlite")
    assert fstype and " " not in fstype
