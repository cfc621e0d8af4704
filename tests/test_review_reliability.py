"""Issue 27, items 1 and 6: the review page keeps every answer until the server has committed it,
and the review server refuses what it cannot serve, saying why.

Every server here is the real ``cxreval review serve`` on 127.0.0.1. Writes are made to fail the
way they fail for a reviewer, by means that bind root too (CI runs as root): another program's
write transaction on the database (the server's ``--lock-timeout`` runs out: 503), and, for the
read-only file and folder, a server process whose capability to override file modes is dropped
from its bounding set before it starts (``prctl(PR_CAPBSET_DROP)``), so that the modes apply to
it as they would to any other user.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from cxreval.ontology import load_ontology

from .test_report_browser import Page, chromium
from .test_review_browser import (
    FIELDS,
    Reviewer,
    needs_chromium,
    open_page,
    press,
    settle,
)
from .test_review_cli import EXAMPLE, db_rows, make_db, make_results, run_cli, server
from .test_review_http import call

FAST_LOCK = ("--lock-timeout", "0.3")  # a write waits 0.3 s for another program's lock, then 503


@contextlib.contextmanager
def write_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Another program's open write transaction on ``db``: readers go on, every other writer waits."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def base_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# -- the server: a write it cannot take is a 503 that says why; a write sent again is applied once --


def test_a_write_the_database_cannot_take_is_a_503_with_its_reason_and_a_resend_is_applied_once(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with server(db, options=FAST_LOCK) as (_, url):
        base = base_of(url)
        _, _, pair = call(base + "/api/pair/2?reviewer=ann")
        row = pair["rows"][0]
        first = {
            "reviewer": "ann",
            "pair_id": pair["pair_id"],
            "entity": row["entity"],
            **row["engine"],
            "op_id": "op-first-0001",
        }
        with write_lock(db):
            status, head, body = call(base + "/api/answer", first)
            assert status == 503 and head["retry-after"]
            assert "not saved" in body["error"] and "locked by another program" in body["error"]
            assert str(db) in body["error"]
            status, _, state = call(base + "/api/state?reviewer=ann")  # reading goes on
            assert status == 200 and state["sample_id"]
        assert db_rows(db, "SELECT COUNT(*) FROM answers") == [(0,)]

        status, _, body = call(base + "/api/answer", first)
        assert status == 200 and body["saved"]["presence"] == row["engine"]["presence"]
        changed = {**first, "presence": "FN" if row["engine"]["presence"] != "FN" else "TP", "op_id": "op-later-0002"}
        status, _, body = call(base + "/api/answer", changed)
        assert status == 200 and body["saved"]["presence"] == changed["presence"]
        # the first write again (its reply was lost, or another tab sends it too): applied once, so
        # the later answer stands
        status, _, body = call(base + "/api/answer", first)
        assert status == 200 and body == {"duplicate": True, "op_id": "op-first-0001"}
        assert db_rows(db, "SELECT presence FROM answers") == [(changed["presence"],)]
        for action, payload in (("note", {"note": "left or right?"}), ("checked", {"checked": False})):
            sent = {"reviewer": "ann", "pair_id": pair["pair_id"], **payload, "op_id": f"op-{action}-0003"}
            assert call(base + f"/api/{action}", sent)[0] == 200
            assert call(base + f"/api/{action}", sent)[2] == {"duplicate": True, "op_id": f"op-{action}-0003"}
        assert sorted(db_rows(db, "SELECT op_id, reviewer, action FROM applied")) == [
            ("op-checked-0003", "ann", "checked"),
            ("op-first-0001", "ann", "answer"),
            ("op-later-0002", "ann", "answer"),
            ("op-note-0003", "ann", "note"),
        ]
        status, _, body = call(base + "/api/answer", {**first, "op_id": "bad id!"})
        assert status == 400 and "op_id" in body["error"]


# -- the page: answers given while the server cannot write arrive, each once ----------------------


def navigate_past_the_warning(page: Page, url: str) -> dict[str, Any]:
    """Navigate away from a page with unsaved answers: the browser must ask first (beforeunload);
    the test answers "leave". Returns the dialog the page raised."""
    page._id += 1
    page.ws.send(json.dumps({"id": page._id, "method": "Page.navigate", "params": {"url": url}}))
    while True:
        msg = json.loads(page.ws.recv())
        if "method" not in msg:
            continue
        page.events.append(msg)
        if msg["method"] == "Page.javascriptDialogOpening":
            seen = len(page.events)
            break
        assert msg["method"] != "Page.loadEventFired", "the page was left with unsaved answers and no warning"
    dialog = msg["params"]
    page.send("Page.handleJavaScriptDialog", accept=True)
    while not any(ev["method"] == "Page.loadEventFired" for ev in page.events[seen:]):
        msg = json.loads(page.ws.recv())
        if "method" in msg:
            page.events.append(msg)
    page.js(
        "new Promise(r => { const t = () => window.cxrReview && window.cxrReview.state().ready ? r() : setTimeout(t, 50); t(); })"
    )
    return dialog


@contextlib.contextmanager
def second_tab(page: Page) -> Iterator[Page]:
    """Another tab of the same browser (same profile, so the same IndexedDB)."""
    port = page.ws.sock.getpeername()[1]
    target = page.send("Target.createTarget", url="about:blank")["targetId"]
    tab = Page(f"ws://127.0.0.1:{port}/devtools/page/{target}")
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            tab.send(f"{domain}.enable")
        yield tab
    finally:
        tab.ws.close()


def wait_for_save_state(page: Page, text: str) -> str:
    """The indicator's text once it holds ``text`` (or as it is after 30 s, for the assertion)."""
    return page.js(
        "new Promise(r => { const t0 = Date.now(); const t = () => { const s = "
        "document.getElementById('save-state').textContent; s.includes(" + json.dumps(text) + ") || "
        "Date.now() - t0 > 30000 ? r(s) : setTimeout(t, 50); }; t(); })"
    )


def row_status(page: Page) -> dict[str, str]:
    return page.js(
        "Object.fromEntries([...document.querySelectorAll('#rows tbody tr[data-entity]')].map("
        "tr => [tr.dataset.entity, tr.querySelector('td.status').textContent]))"
    )


def posted_op_ids(page: Page, path: str) -> Counter[str]:
    """The op ids of the POSTs to ``path`` this tab sent (Chromium's Network domain)."""
    sent: Counter[str] = Counter()
    for ev in page.events:
        if ev["method"] == "Network.requestWillBeSent" and urlsplit(ev["params"]["request"]["url"]).path == path:
            sent[json.loads(ev["params"]["request"]["postData"])["op_id"]] += 1
    return sent


class Driver:
    """Keys for one reviewer, counting the writes they make and what each answer must be."""

    def __init__(self, reviewer: Reviewer) -> None:
        self.reviewer = reviewer
        self.writes: Counter[str] = Counter()
        self.notes: dict[str, str] = {}

    def row(self, keys: list[str]) -> None:
        state = self.reviewer.page.js("window.cxrReview.state()")
        for k in keys:
            press(self.reviewer.page, k)
        self.reviewer.apply(state["pair_id"], state["entity"], keys)
        self.writes["answer"] += sum(k in "aplsc" for k in keys)

    def check(self) -> None:
        press(self.reviewer.page, "Enter")
        self.writes["checked"] += 1

    def note(self, text: str) -> None:
        page = self.reviewer.page
        pair_id = page.js("window.cxrReview.state()")["pair_id"]
        press(page, "n")
        page.send("Input.insertText", text=text)
        press(page, "Enter")
        self.notes[pair_id] = text
        self.writes["note"] += 1


@needs_chromium
def test_answers_given_while_the_server_cannot_write_arrive_each_once(tmp_path: Path) -> None:
    db = make_db(tmp_path, sample=8, seed=12)  # seed 3 until the finding hierarchy changed the errors sampled on
    engine: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for pid, entity, *values in db_rows(
        db, "SELECT pair_id, entity, presence, location, severity, comparison FROM engine_rows ORDER BY pair_id, rowid"
    ):
        engine[pid][entity] = dict(zip(FIELDS, values))
    order = [pid for (pid,) in db_rows(db, "SELECT pair_id FROM pairs ORDER BY position")]
    assert len(engine[order[0]]) == 1 and len(engine[order[1]]) > 8  # the sample this test is written for
    attributes = {e.id: list(e.attributes) for e in load_ontology().entities}

    with server(db, options=FAST_LOCK) as (_, url), chromium(1400, 900) as page_a:
        page_url = url.split("?")[0] + "?reviewer=alice"
        alice = Driver(Reviewer("alice", page_a, engine, attributes))
        assert open_page(page_a, page_url)["position"] == 1
        # the server writes: pair 1 answered and checked, two rows of pair 2 answered
        alice.row(["a"])
        alice.check()
        assert settle(page_a)["position"] == 2
        alice.row(["a"])
        alice.row(["a"])
        assert settle(page_a)["unsaved"] == 0
        saved_before = db_rows(db, "SELECT COUNT(*) FROM answers")[0][0]
        assert saved_before == 3

        with write_lock(db) as other_program:
            # another program holds the database: every write waits 0.3 s and gets a 503
            before = sum(alice.writes.values())
            alice.row(["p", "p", "j"])  # two answers on one entity: the second must win
            alice.row(["a"])
            alice.row(["p", "j"])
            alice.row(["a"])
            alice.note("which side?")
            given = sum(alice.writes.values()) - before
            shown = wait_for_save_state(page_a, "server cannot save")
            assert "HTTP 503" in shown and f"{given} answers kept in this browser, not saved yet" in shown, shown
            assert "locked by another program" in page_a.js("document.getElementById('save-state').title")
            unsaved = [r["entity"] for r in settle_rows(page_a)[2:6]]
            assert all(row_status(page_a)[e] == "● not saved yet" for e in unsaved)
            assert all(row_status(page_a)[r["entity"]] == "✓ saved" for r in settle_rows(page_a)[:2])
            assert other_program.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == saved_before

            # the tab is reloaded: the browser warns first, and the answers come back from IndexedDB
            dialog = navigate_past_the_warning(page_a, page_url)
            assert dialog["type"] == "beforeunload"
            state = page_a.js("window.cxrReview.state()")
            assert state["position"] == 2 and state["unsaved"] == given and state["kept"] is True
            assert [r["answer"] for r in state["rows"][2:6]] == [alice.reviewer.expected[(order[1], e)] for e in unsaved]
            assert all(row_status(page_a)[e] == "● not saved yet" for e in unsaved)
            assert page_a.js("document.getElementById('note').value") == "which side?"
            # a second tab of the same reviewer finds them too: both will send them
            with second_tab(page_a) as page_b:
                assert open_page_unsettled(page_b, page_url)["unsaved"] == given
                other_program.execute("ROLLBACK")  # the other program lets go: the server can write again

                assert settle(page_a)["unsaved"] == 0 and settle(page_b)["unsaved"] == 0
                assert wait_for_save_state(page_a, "all answers saved") == "all answers saved"
                assert all(row_status(page_a)[e] == "✓ saved" for e in unsaved)
                sent_by_b = posted_op_ids(page_b, "/api/answer")
        sent_by_a = posted_op_ids(page_a, "/api/answer")
        # the rest of pair 2, with the server writing again
        for _ in range(len(engine[order[1]]) - 6):
            alice.row(["a"])
        alice.check()
        assert settle(page_a)["unsaved"] == 0

    # every answer arrived, each exactly once: the database holds what the keys gave ...
    stored = {
        (p, e): dict(zip(FIELDS, v))
        for p, e, *v in db_rows(
            db, "SELECT pair_id, entity, presence, location, severity, comparison FROM answers WHERE reviewer = 'alice'"
        )
    }
    assert stored == alice.reviewer.expected
    assert db_rows(db, "SELECT pair_id, note FROM notes") == list(alice.notes.items())
    assert sorted(db_rows(db, "SELECT pair_id FROM checked")) == sorted([(order[0],), (order[1],)])
    # ... each write the page made was applied once, though the answers given during the outage were
    # sent by both tabs (and by the first more than once: the 503s)
    assert dict(Counter(a for (a,) in db_rows(db, "SELECT action FROM applied WHERE reviewer = 'alice'"))) == dict(alice.writes)
    assert len(sent_by_b) == 5 and set(sent_by_b) <= set(sent_by_a)  # the outage's five answers, sent by both
    assert max(sent_by_a[op] for op in sent_by_b) >= 2  # the first: refused (503) before the reload, sent after
    assert len({op for (op,) in db_rows(db, "SELECT op_id FROM applied")}) == sum(alice.writes.values())


def settle_rows(page: Page) -> list[dict[str, Any]]:
    return page.js("window.cxrReview.state()")["rows"]


def open_page_unsettled(page: Page, url: str) -> dict[str, Any]:
    """Open the page and wait until it is ready, not until its answers are saved."""
    page.send("Page.navigate", url=url)
    page.js(
        "new Promise(r => { const t = () => window.cxrReview && window.cxrReview.state().ready ? r() : setTimeout(t, 50); t(); })"
    )
    return page.js("window.cxrReview.state()")


# -- the server's input: bodies, names, positions --------------------------------------------------


def vm_peak_kib(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def raw_post(port: int, head: str, chunks: Iterator[bytes]) -> bytes:
    """Send a request by hand (headers, then ``chunks`` until the server stops reading); its reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for chunk in chunks:
                sock.sendall(chunk)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                reply += chunk
    return reply


def chunked(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A JSON-looking body of ``total`` bytes in HTTP/1.1 chunks (no Content-Length to go by)."""
    piece = b"[" * size
    for _ in range(total // size):
        yield b"%x\r\n%s\r\n" % (size, piece)
    yield b"0\r\n\r\n"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_request_body_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with server(db) as (proc, url):
        port = urlsplit(url).port
        assert port is not None
        base = base_of(url)
        peak = vm_peak_kib(proc.pid)
        head = f"POST /api/answer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nConnection: close\r\n"
        # a declared length over the limit: refused before a byte of the body is read
        reply = raw_post(port, head + "Content-Length: 400000000\r\n\r\n", iter([]))
        assert reply.startswith(b"HTTP/1.1 413 ") and b"larger than 131072 bytes" in reply
        # no length given: read up to the limit, then refused
        reply = raw_post(port, head + "Transfer-Encoding: chunked\r\n\r\n", chunked(256 * 1024))
        assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
        # 64 MB streamed at it: the server reads 128 KiB of it and never holds the rest
        raw_post(port, head + "Transfer-Encoding: chunked\r\n\r\n", chunked(64 * 1024 * 1024))
        assert vm_peak_kib(proc.pid) - peak < 16 * 1024, (peak, vm_peak_kib(proc.pid))
        # a body just under the limit, nested deeper than the JSON parser goes: a 422, not a 500
        status, _, body = call(base + "/api/answer", raw=b"[" * 100_000, headers={"Content-Type": "application/json"})
        assert status == 422 and "valid dictionary" in body["error"]
        assert call(base + "/api/state?reviewer=ann")[0] == 200  # and the server is still there


def test_names_are_matched_whole_and_any_position_out_of_range_is_a_404(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with server(db) as (_, url):
        base = base_of(url)
        _, _, pair = call(base + "/api/pair/2?reviewer=alice")
        row = pair["rows"][0]
        for name in ("alice\n", "alice\r\n", "alice\x00", " alice", "al ice", "a" * 41):
            status, _, body = call(base + f"/api/state?reviewer={quote(name)}")
            assert status == 400 and "reviewer name" in body["error"], name
            status, _, body = call(base + f"/api/pair/2?reviewer={quote(name)}")
            assert status == 400 and "reviewer name" in body["error"], name
            for action, payload in (
                ("answer", {"entity": row["entity"], **row["engine"]}),
                ("remove", {"entity": row["entity"]}),
                ("note", {"note": "x"}),
                ("checked", {"checked": False}),
            ):
                status, _, body = call(base + f"/api/{action}", {"reviewer": name, "pair_id": pair["pair_id"], **payload})
                assert status == 422 and "reviewer name" in body["error"], (name, action)
        assert db_rows(db, "SELECT COUNT(*) FROM answers") == db_rows(db, "SELECT COUNT(*) FROM notes") == [(0,)]
        assert call(base + "/api/state?reviewer=alice")[0] == 200

        for position in (
            "99999999999999999999999",
            "9223372036854775808",
            "9",
            "0",
            "-1",
            "1.5",
            "+1",
            " 1",
            "\u0661",
            "1e3",
            "0x1",
            "abc",
        ):  # \u0661: ARABIC-INDIC DIGIT ONE, which int() takes
            status, _, body = call(base + f"/api/pair/{quote(position, safe='')}?reviewer=alice")
            assert status == 404 and "no pair at position" in body["error"], position
        assert call(base + "/api/pair/8?reviewer=alice")[0] == 200


# -- the database file: paths SQLite URIs would misread, files and folders it cannot write --------


def test_a_database_path_with_uri_characters_is_the_file_it_names(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    results = make_results(tmp_path / "results")
    for name in ("we?ird#name%20.db", "100%.db", "a#b.db"):
        db = folder / name
        done = run_cli("review", "init", results, "--db", db, "--sample", "4", "--seed", "1", "--pairs", EXAMPLE)
        assert done.returncode == 0, done.stderr
        done = run_cli("review", "stats", db, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["pairs_sampled"] == 4
        with server(db) as (_, url):
            assert call(base_of(url) + "/api/state?reviewer=ann")[2]["total"] == 4
    # nothing but the databases (and their WAL files) was created: no stray file named after a prefix
    assert {p.name for p in folder.iterdir()} <= {
        f"{n}{s}" for n in ("we?ird#name%20.db", "100%.db", "a#b.db") for s in ("", "-wal", "-shm")
    }
    # the function that builds the URI, on its own
    from cxreval.sqlite_store import sqlite_uri

    for name in ("we?ird#name%20.db", "100%.db", "a#b.db"):
        with contextlib.closing(sqlite3.connect(sqlite_uri(folder / name, mode="ro"), uri=True)) as conn:
            assert conn.execute("SELECT COUNT(*) FROM pairs").fetchone() == (4,)


def _drop_file_override() -> None:  # runs in the child, before exec: root loses CAP_DAC_OVERRIDE, _READ_SEARCH
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def bound_by_file_modes() -> Callable[[], None] | None:
    """A ``preexec_fn`` under which file modes bind the child even when the tests run as root."""
    if os.geteuid() != 0:
        return None
    code = (
        "caps = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l); "
        "exit(3 if int(caps['CapEff'], 16) & 0b110 else 0)"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=_drop_file_override, capture_output=True, check=False, timeout=600
    )
    if probe.returncode != 0:
        pytest.skip("root, and cannot drop CAP_DAC_OVERRIDE (no CAP_SETPCAP): file modes would not bind the server")
    return _drop_file_override


def run_bound(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``cxreval ARGS`` bound by file modes; a ``serve`` still running after 60 s has started (and
    is stopped): that fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "cxreval", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=bound_by_file_modes(),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"cxreval {' '.join(map(str, args))} did not stop: it serves a database it cannot write to ({exc.stdout!r})")


def review_db_in_a_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "reviews"
    folder.mkdir()
    return make_db(tmp_path).rename(folder / "review.db")


def test_a_database_in_a_read_only_folder_is_reported_as_such(tmp_path: Path) -> None:
    """SQLite cannot create the WAL files beside the database: every command says so, not "not an
    SQLite database"."""
    db = review_db_in_a_folder(tmp_path)
    db.parent.chmod(0o555)
    try:
        for args in (
            ("review", "serve", db, "--port", "0"),
            ("review", "stats", db),
            ("review", "export", db, "--out", tmp_path / "gold"),
        ):
            done = run_bound(*args)
            assert done.returncode == 2, (args, done.stderr)
            assert "not an SQLite database" not in done.stderr
            assert f"its folder {db.parent} is read-only" in done.stderr and "review.db-wal" in done.stderr, done.stderr
    finally:
        db.parent.chmod(0o755)


def test_serve_refuses_a_read_only_database_file_at_start(tmp_path: Path) -> None:
    """Read by ``stats``; refused by ``serve`` before the page could lose an answer to it."""
    db = review_db_in_a_folder(tmp_path)
    db.chmod(0o444)
    try:
        assert run_bound("review", "stats", db, "--json").returncode == 0
        done = run_bound("review", "serve", db, "--port", "0")
        assert done.returncode == 2 and f"{db}: read-only" in done.stderr, done.stderr
        assert "review page:" not in done.stdout
    finally:
        db.chmod(0o644)


def test_serve_refuses_a_database_locked_past_the_lock_timeout_at_start(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with write_lock(db):
        done = run_cli("review", "serve", db, "--port", "0", *FAST_LOCK)
    assert done.returncode == 2 and f"{db}: locked by another program for more than 0.3 s" in done.stderr, done.stderr
    assert "review page:" not in done.stdout
