"""The LLM path under hostile conditions, against real HTTP servers on loopback addresses.

Malformed HTTP 200s of both providers, a proxy from the environment, a redirecting endpoint,
servers that report no or negative usage, a key echoed back, two processes on one store, and
answers far over the schema's bounds. Each case ends with every pair scored or listed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cxreval import Evaluator, ReportPair
from cxreval.llm.cache import AnswerCache
from cxreval.llm.config import LLMConfig, LLMConfigError
from cxreval.testing.loopback import MALFORMED, LoopbackServer
from cxreval.llm.runner import LLMRunner, estimate_tokens

from .llm_support import llm_rows, loop_config, rule_rows, with_fault, written_pairs

KEY = "sk-test-hostile-0123456789abcdef"
USAGE_FAULTS = {"no-usage", "usage-not-int", "negative-usage"}  # the answer itself is fine


@pytest.fixture
def server():
    with LoopbackServer(timeout_sleep=2.0) as srv:
        yield srv


def _urls(srv: LoopbackServer) -> list[tuple[str, str]]:
    return [("openai", srv.base_url), ("anthropic", srv.anthropic_url)]


def _partition(result, pairs) -> None:
    failed = {f.pair_id for f in result.failures}
    assert set(result.pair_ids) | failed == {p.pair_id for p in pairs}
    assert not set(result.pair_ids) & failed


# ------------------------------------------------------------------------------------------
# 1. A malformed HTTP 200 never crashes the run
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_every_malformed_200_ends_scored_or_listed(server, tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    once = [with_fault(f"once-{name}", name) for name in MALFORMED]
    always = [with_fault(f"always-{name}", f"{name}-always") for name in MALFORMED]
    pairs = [*once, *always, *written_pairs(3)]
    url = dict(_urls(server))[provider]
    cfg = loop_config(url, tmp_path / "c.sqlite", provider=provider, retries=1)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    expected = rule_rows(pairs)
    got = llm_rows(result.judgements)
    # a fault on the first request only: retried, then scored exactly as the rule engine reads it
    for p in [*once, *written_pairs(3)]:
        assert p.pair_id in result.pair_ids, p.pair_id
        assert got.get(p.pair_id, set()) == expected[p.pair_id]
    failures = {f.pair_id: f for f in result.failures}
    for name in MALFORMED:
        pid = f"always-{name}"
        if name in USAGE_FAULTS:  # nothing wrong with the answer: scored, its tokens estimated
            assert pid in result.pair_ids
        else:
            assert failures[pid].reason == "transport" and "malformed response" in failures[pid].error
    assert result.usage.estimated >= 2 * len(USAGE_FAULTS)
    assert result.usage.cost >= 0 and result.usage.input_tokens > 0


def test_cli_exit_code_with_malformed_answers(server, tmp_path):
    pairs = tmp_path / "p.jsonl"
    rows = [with_fault("a", "cut-body-always"), *written_pairs(2)]
    pairs.write_text("".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n"
                             for p in rows))
    proc = subprocess.run(
        [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(pairs), "--out", str(tmp_path / "o"),
         "--engine", "llm-pairwise", "--base-url", server.base_url, "--model", "loopback", "--local-only",
         "--cache", str(tmp_path / "c.sqlite"), "--retries", "1"],
        capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": ""}, timeout=300)
    assert proc.returncode == 4, proc.stderr  # one pair unscored: listed, and the exit code says so
    assert "Traceback" not in proc.stderr
    [failure] = [json.loads(x) for x in (tmp_path / "o" / "failures.jsonl").read_text().splitlines()]
    assert failure["pair_id"] == "a" and "malformed response" in failure["error"]


# ------------------------------------------------------------------------------------------
# 2. --local-only: no proxy from the environment, no redirect followed
# ------------------------------------------------------------------------------------------


class _Recorder(ThreadingHTTPServer):
    """Answers anything with ``status`` (and ``Location``), and records every request it gets."""

    daemon_threads = True

    def __init__(self, host: str, status: int = 502, location: str = "") -> None:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                recorder.seen.append((self.command, self.path, self.rfile.read(length)))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_CONNECT = _any  # noqa: N815

        super().__init__((host, 0), Handler)
        self.seen: list[tuple[str, str, bytes]] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def __enter__(self) -> "_Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_local_only_ignores_proxies_from_the_environment(server, tmp_path, monkeypatch, provider):
    with _Recorder("127.0.0.2") as proxy:
        for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(var, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        url = dict(_urls(server))[provider]
        pairs = written_pairs(3)
        result = Evaluator(engine="llm-pairwise", llm=loop_config(url, tmp_path / "c.sqlite", provider=provider)
                           ).evaluate(pairs)
        assert result.n_failed == 0 and result.n_pairs == 3
        assert proxy.seen == []  # not one byte (report text, key) went to the proxy
        assert len(server.log) == 3


def test_a_redirect_is_never_followed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with _Recorder("127.0.0.3") as elsewhere:
        with _Recorder("127.0.0.1", status=307, location=f"{elsewhere.url}/v1/chat/completions") as redirector:
            pairs = written_pairs(2)
            cfg = loop_config(f"{redirector.url}/v1", tmp_path / "c.sqlite", retries=0, concurrency=1)
            result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
            assert elsewhere.seen == []  # the report text was not posted again to the other host
            assert len(redirector.seen) == 1  # one refused request, then the run stopped
            _partition(result, pairs)
            assert result.n_pairs == 0 and result.usage.stopped and "redirect" in result.usage.stopped
            assert "never followed" in result.failures[0].error


# ------------------------------------------------------------------------------------------
# 3. The cost cap cannot be fooled
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", sorted(USAGE_FAULTS))
def test_cap_holds_when_the_server_hides_its_usage(server, tmp_path, fault):
    pairs = written_pairs(12, marker=f"FAULT:{fault}-always")
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite", concurrency=4, price_input=1.0, price_output=4.0,
                      max_cost=0.02, max_tokens=512)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert result.usage.estimated == result.usage.answers > 0
    assert result.usage.stopped and result.usage.stopped.startswith("--max-cost")
    assert 0 < result.usage.cost <= 0.02  # estimated, and never past the cap
    assert {f.reason for f in result.failures} == {"budget"}


def test_budget_is_per_store_across_reruns_until_reset(server, tmp_path):
    cache = tmp_path / "c.sqlite"
    cfg = loop_config(server.base_url, cache, concurrency=2, price_input=1.0, price_output=4.0, max_cost=0.03,
                      max_tokens=512)
    first = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(written_pairs(20, prefix="a"))
    assert first.usage.stopped and 0 < first.usage.cost <= 0.03
    # a rerun on other pairs does not get a fresh budget: both runs together stay within the cap
    second = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(written_pairs(20, prefix="b"))
    assert second.usage.stopped and second.n_pairs < 20
    assert first.usage.cost + second.usage.cost <= 0.03
    with AnswerCache(cache) as store:
        assert store.spent() == pytest.approx(first.usage.cost + second.usage.cost)
        store.reset_budget()
        assert store.spent() == 0
    third = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(written_pairs(20, prefix="b"))
    assert third.n_pairs > second.n_pairs
    # the stop message says what was really spent, after the calls in flight finished
    assert f"{first.usage.cost:.4f} USD by this run" in first.usage.stopped


def test_reasks_stay_within_the_cap(server, tmp_path):
    pairs = written_pairs(10, marker="FAULT:schema")  # every first answer is invalid: one re-ask each
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite", concurrency=4, price_input=1.0, price_output=4.0,
                      max_cost=0.05, max_tokens=512)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert result.usage.reasks > 0 and result.usage.cost <= 0.05


def test_worst_case_estimate_covers_a_request():
    messages = [{"role": "system", "content": "x" * 300}, {"role": "user", "content": "é" * 100}]
    assert estimate_tokens(messages) >= (300 + 200) // 3


# ------------------------------------------------------------------------------------------
# 4. Keys never stored or printed
# ------------------------------------------------------------------------------------------


def test_an_echoed_key_is_redacted_everywhere(server, tmp_path):
    pairs = [with_fault("echo", "echo-key-answer-always"), with_fault("echo500", "echo-key-always"),
             *written_pairs(2)]
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n"
                            for p in pairs))
    out, cache = tmp_path / "o", tmp_path / "c.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(data), "--out", str(out), "--engine",
         "llm-pairwise", "--base-url", server.base_url, "--model", "loopback", "--cache", str(cache),
         "--retries", "0", "--allow-failures", "1"],
        capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": KEY}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((out / "scores.json").read_text())
    assert scores["n_pairs"] == 3 and scores["n_failed"] == 1  # the echoed 200 is scored, the echoed 500 listed
    everything = proc.stdout + proc.stderr + "".join(p.read_text(errors="replace") for p in out.iterdir())
    everything += b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite*")).decode("latin-1")
    assert KEY not in everything
    assert "[redacted]" in everything  # the echo happened, and was caught


def test_a_key_pasted_as_the_variable_name_is_not_printed():
    with pytest.raises(LLMConfigError) as exc:
        LLMConfig.load(None, model="m", api_key_env=KEY)
    assert KEY not in str(exc.value) and "NAME of an environment variable" in str(exc.value)


def test_a_password_in_the_url_is_not_printed():
    for url in ("ftp://user:Secr3tPW@example.org/v1", "http://user:Secr3tPW@127.0.0.1:9/v1"):
        with pytest.raises(LLMConfigError) as exc:
            LLMConfig.load(None, model="m", base_url=url)
        assert "Secr3tPW" not in str(exc.value)


# ------------------------------------------------------------------------------------------
# 5. Two processes on one answer store
# ------------------------------------------------------------------------------------------


def test_a_failure_never_replaces_a_valid_answer(server, tmp_path):
    pairs = written_pairs(3)
    cache = tmp_path / "c.sqlite"
    good = Evaluator(engine="llm-pairwise", llm=loop_config(server.base_url, cache)).evaluate(pairs)
    assert good.n_failed == 0
    from cxreval.llm.cache import CachedAnswer

    with AnswerCache(cache) as store:
        keys = [r[0] for r in store._db.execute("SELECT key FROM answers")]  # noqa: SLF001 - test reads the table
        for key in keys:
            stored = store.put(CachedAnswer(key=key, kind="pairwise", engine="x", model="m", status="failed",
                                            error="late failure"))
            assert stored is False
            assert store.get(key).status == "ok"


def test_concurrent_processes_share_answers_without_duplicate_calls(tmp_path):
    cache = tmp_path / "c.sqlite"
    data = tmp_path / "p.jsonl"
    pairs = written_pairs(24)
    data.write_text("".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n"
                            for p in pairs))
    with LoopbackServer(latency=0.1) as srv:
        args = [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(data), "--engine", "llm-pairwise",
                "--base-url", srv.base_url, "--model", "loopback", "--local-only", "--cache", str(cache),
                "--concurrency", "4", "--json"]
        env = {**os.environ, "OPENAI_API_KEY": ""}
        procs = [subprocess.Popen([*args, "--out", str(tmp_path / f"o{i}")], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        requests = [e["request"] for e in srv.log]
        assert len(requests) == len(set(requests)) == 24  # each prompt asked once, by one process or the other
    a = json.loads((tmp_path / "o0" / "scores.json").read_text())
    b = json.loads((tmp_path / "o1" / "scores.json").read_text())
    assert a["metrics"] == b["metrics"] and a["n_pairs"] == b["n_pairs"] == 24


# ------------------------------------------------------------------------------------------
# 6. Answers over the schema's bounds
# ------------------------------------------------------------------------------------------


def test_oversized_answers_are_rejected_and_reasks_send_an_excerpt(server, tmp_path):
    pairs = [with_fault("huge", "huge-always"), with_fault("huge-once", "huge"), *written_pairs(2)]
    cache = tmp_path / "c.sqlite"
    result = Evaluator(engine="llm-pairwise", llm=loop_config(server.base_url, cache, max_tokens=1024)).evaluate(pairs)
    _partition(result, pairs)
    assert "huge-once" in result.pair_ids  # the re-ask was answered properly
    [failure] = result.failures
    assert failure.pair_id == "huge" and "over the bound" in failure.error
    assert all(len(r) < 10_000 for r in failure.raw)
    reasks = [e for e in server.log if e["reask"]]
    assert reasks and all(len(e["reask_text"]) < 10_000 for e in reasks)
    assert cache.stat().st_size + sum(p.stat().st_size for p in tmp_path.glob("c.sqlite-*")) < 2_000_000


def test_runner_release_leaves_no_lease(server, tmp_path):
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite")
    with AnswerCache(cfg.resolved_cache_path()) as store:
        runner = LLMRunner(cfg, cache=store)
        from cxreval.judge.llm_pairwise import LLMPairwiseJudge

        judge = LLMPairwiseJudge(Evaluator().ontology, cfg, "positive")
        task = judge.task(ReportPair(pair_id="x", reference="Small effusion.", candidate="No effusion."), 0)
        async def go():
            try:
                return await runner.run([task])
            finally:
                await runner.aclose()

        outcomes, _ = asyncio.run(go())
        assert outcomes[task.key].ok
        assert store._db.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # noqa: SLF001


def test_bench_settings_never_echo_a_password(tmp_path):
    (tmp_path / "refs.csv").write_text("id,report\n1,Small left pleural effusion.\n")
    (tmp_path / "bench.yaml").write_text(
        "name: t\nout: out\n"
        "engine: {name: llm-pairwise, llm: {model: m, base_url: 'http://user:Secr3tPW@127.0.0.1:9/v1'}}\n"
        "metrics: [spec-errors]\n"
        "datasets: [{name: d, references: {path: refs.csv}}]\n"
        "systems: [{name: n, baseline: normal-template}]\n")
    proc = subprocess.run([sys.executable, "-m", "cxreval", "bench", str(tmp_path / "bench.yaml")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "credentials" in proc.stderr
    assert "Secr3tPW" not in proc.stdout + proc.stderr
