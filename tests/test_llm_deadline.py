"""``--timeout`` is a deadline for the whole request, against a real server on 127.0.0.1 that
drips its answer one byte at a time (each read comes well within the timeout, the whole answer
never does). The request must end at its deadline: listed as a ``deadline`` failure, its lease
given back, and the server sees the client hang up mid-answer instead of finishing its drip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import pytest

from cxreval import Evaluator
from cxreval.llm.cache import AnswerCache

from .llm_support import loop_config, written_pairs

DRIP_SECONDS = 0.5  # one byte this often: far inside a 2 s timeout per read
DRIP_BYTES = 30  # then the server gives up by itself (so the test ends on any code)
TIMEOUT = 2.0


class _DripServer(ThreadingHTTPServer):
    """Answers every POST with a 200 whose body comes one byte per DRIP_SECONDS, and logs per
    request whether the client hung up mid-answer (``client-gone``) or took the whole drip."""

    daemon_threads = True

    def __init__(self) -> None:
        self.log: list[str] = []  # one outcome per request, in order of arrival
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with server.lock:
                    server.log.append("dripping")
                    n = len(server.log) - 1
                outcome = "dripped-all"
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")  # never all sent
                    self.end_headers()
                    for _ in range(DRIP_BYTES):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(DRIP_SECONDS)
                except OSError:
                    outcome = "client-gone"
                self.close_connection = True
                with server.lock:
                    server.log[n] = outcome

        super().__init__(("127.0.0.1", 0), Handler)

    def __enter__(self) -> Self:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def settled(self) -> list[str]:
        """Every request's outcome, once no request is still dripping (bounded: DRIP_BYTES)."""
        end = time.monotonic() + 2 * DRIP_BYTES * DRIP_SECONDS
        while time.monotonic() < end:
            with self.lock:
                if "dripping" not in self.log:
                    return list(self.log)
            time.sleep(0.05)
        raise AssertionError(f"the server is still dripping: {self.log}")


def _store_rows(cache, table: str) -> int:
    with AnswerCache(cache) as store:
        return int(store._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_dripping_server_ends_at_the_deadline_as_a_listed_failure(tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-QWERTY-0123456789-zxcv")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-QWERTY-0123456789-zxcv")
    cache = tmp_path / "c.sqlite"
    pairs = written_pairs(1)
    with _DripServer() as srv:
        url = srv.base_url if provider == "openai" else srv.anthropic_url
        cfg = loop_config(
            url,
            cache,
            provider=provider,
            timeout=TIMEOUT,
            retries=1,
            concurrency=1,
            price_input=1.0,
            price_output=1.0,
            max_cost=10.0,
        )
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        outcomes = srv.settled()
    [failure] = result.failures
    assert result.n_pairs == 0
    assert failure.reason == "deadline", failure
    assert "deadline" in failure.error and "gave up after 2 attempts" in failure.error
    # both attempts were cut off by the client mid-answer: the drip never ran to its end
    assert outcomes == ["client-gone", "client-gone"]
    assert result.usage.requests == 2 and result.usage.retries == 1 and result.usage.answers == 0
    # lease and budget reservation given back; nothing stored (the call did not finish), nothing charged
    assert _store_rows(cache, "leases") == 0
    assert _store_rows(cache, "reservations") == 0
    assert _store_rows(cache, "answers") == 0 and result.usage.cost == 0


def test_a_deadline_failure_is_listed_by_the_cli_and_the_exit_code_says_so(tmp_path):
    pairs = written_pairs(1)
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n" for p in pairs)
    )
    out = tmp_path / "o"
    with _DripServer() as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "cxreval",
                "evaluate",
                "--pairs",
                str(data),
                "--out",
                str(out),
                "--engine",
                "llm-pairwise",
                "--base-url",
                srv.base_url,
                "--model",
                "loopback",
                "--local-only",
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--timeout",
                str(TIMEOUT),
                "--retries",
                "0",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "OPENAI_API_KEY": ""},
            timeout=300,
            check=False,
        )
        outcomes = srv.settled()
    assert proc.returncode == 4, proc.stderr  # an unscored pair
    [line] = (out / "failures.jsonl").read_text().splitlines()
    assert json.loads(line)["reason"] == "deadline"
    assert "deadline: 1" in proc.stderr.replace("\n", " ") or "deadline: 1" in proc.stdout.replace("\n", " ")
    assert outcomes == ["client-gone"]


def test_the_heartbeat_renewal_skips_requests_past_their_deadline(tmp_path):
    with AnswerCache(tmp_path / "c.sqlite") as store:
        assert store.claim("stuck", 1.0) and store.claim("busy", 1.0)
        assert store.renew(None, 600, skip=["stuck"])  # what the heartbeat does with an overdue request
        rows = dict(store._db.execute("SELECT key, expires FROM leases").fetchall())
        assert rows["busy"] > time.time() + 300 and rows["stuck"] < time.time() + 2
