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
from cxreval.llm.runner import LLMRunner, estimate_tokens
from cxreval.testing.loopback import MALFORMED, LoopbackServer

from .llm_support import llm_rows, loop_config, rule_rows, with_fault, written_pairs

KEY = "sk-test-hostile-0123456789abcdef"
USAGE_FAULTS = {"no-usage", "usage-not-int", "negative-usage", "zero-usage"}  # the answer itself is fine


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
    expected = rule_rows(pairs, flat=True, drop_tn=True)
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
    pairs.write_text(
        "".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n" for p in rows)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--pairs",
            str(pairs),
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "llm-pairwise",
            "--base-url",
            server.base_url,
            "--model",
            "loopback",
            "--local-only",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--retries",
            "1",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": ""},
        timeout=300,
    )
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

    def __enter__(self) -> _Recorder:
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
        result = Evaluator(engine="llm-pairwise", llm=loop_config(url, tmp_path / "c.sqlite", provider=provider)).evaluate(pairs)
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
    cfg = loop_config(
        server.base_url, tmp_path / "c.sqlite", concurrency=4, price_input=1.0, price_output=4.0, max_cost=0.02, max_tokens=512
    )
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert result.usage.estimated == result.usage.answers > 0
    assert result.usage.stopped and result.usage.stopped.startswith("--max-cost")
    assert 0 < result.usage.cost <= 0.02  # estimated, and never past the cap
    assert {f.reason for f in result.failures} == {"budget"}


def test_budget_is_per_store_across_reruns_until_reset(server, tmp_path):
    cache = tmp_path / "c.sqlite"
    cfg = loop_config(server.base_url, cache, concurrency=2, price_input=1.0, price_output=4.0, max_cost=0.03, max_tokens=512)
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
    cfg = loop_config(
        server.base_url, tmp_path / "c.sqlite", concurrency=4, price_input=1.0, price_output=4.0, max_cost=0.05, max_tokens=512
    )
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
    pairs = [with_fault("echo", "echo-key-answer-always"), with_fault("echo500", "echo-key-always"), *written_pairs(2)]
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n" for p in pairs)
    )
    out, cache = tmp_path / "o", tmp_path / "c.sqlite"
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
            server.base_url,
            "--model",
            "loopback",
            "--cache",
            str(cache),
            "--retries",
            "0",
            "--allow-failures",
            "1",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": KEY},
        timeout=300,
    )
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
            stored = store.put(
                CachedAnswer(key=key, kind="pairwise", engine="x", model="m", status="failed", error="late failure")
            )
            assert stored is False
            assert store.get(key).status == "ok"


def test_concurrent_processes_share_answers_without_duplicate_calls(tmp_path):
    cache = tmp_path / "c.sqlite"
    data = tmp_path / "p.jsonl"
    pairs = written_pairs(24)
    data.write_text(
        "".join(json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n" for p in pairs)
    )
    with LoopbackServer(latency=0.1) as srv:
        args = [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--pairs",
            str(data),
            "--engine",
            "llm-pairwise",
            "--base-url",
            srv.base_url,
            "--model",
            "loopback",
            "--local-only",
            "--cache",
            str(cache),
            "--concurrency",
            "4",
            "--json",
        ]
        env = {**os.environ, "OPENAI_API_KEY": ""}
        procs = [
            subprocess.Popen(
                [*args, "--out", str(tmp_path / f"o{i}")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
            for i in range(2)
        ]
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
        "systems: [{name: n, baseline: normal-template}]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "cxreval", "bench", str(tmp_path / "bench.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "credentials" in proc.stderr
    assert "Secr3tPW" not in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------
# 7. Answers no reader can read (too deep, too long a number) never crash the run
# ------------------------------------------------------------------------------------------

UNREADABLE_CONTENT = ("deep-answer", "long-int-answer")  # the answer text: re-asked, then listed
UNREADABLE_BODY = ("deep-body", "long-int-body")  # the HTTP 200 body itself: retried, then listed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_unreadable_answers_and_bodies_end_scored_or_listed(server, tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    names = (*UNREADABLE_CONTENT, *UNREADABLE_BODY)
    once = [with_fault(f"once-{name}", name) for name in names]
    always = [with_fault(f"always-{name}", f"{name}-always") for name in names]
    pairs = [*once, *always, *written_pairs(2)]
    url = dict(_urls(server))[provider]
    result = Evaluator(engine="llm-pairwise", llm=loop_config(url, tmp_path / "c.sqlite", provider=provider, retries=1)).evaluate(
        pairs
    )
    _partition(result, pairs)
    expected, got = rule_rows(pairs, flat=True, drop_tn=True), llm_rows(result.judgements)
    for p in [*once, *written_pairs(2)]:  # the re-ask / the retry got a proper answer
        assert p.pair_id in result.pair_ids, p.pair_id
        assert got.get(p.pair_id, set()) == expected[p.pair_id]
    failures = {f.pair_id: f for f in result.failures}
    assert set(failures) == {f"always-{name}" for name in names}
    for name in UNREADABLE_CONTENT:
        f = failures[f"always-{name}"]
        assert f.reason == "answer" and "invalid answer after one re-ask" in f.error, f.error
        assert len(f.raw) == 2  # both answers kept (cut to the stored bound)
    for name in UNREADABLE_BODY:
        f = failures[f"always-{name}"]
        assert f.reason == "transport" and "malformed response" in f.error, f.error


def test_a_parser_surprise_is_a_listed_failure_not_a_crash(server, tmp_path, monkeypatch):
    import dataclasses

    from cxreval.judge.llm_pairwise import LLMPairwiseJudge

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite")
    judge = LLMPairwiseJudge(Evaluator().ontology, cfg, "positive")

    def surprised(raw: str):
        raise RuntimeError(f"parser bug while reading, key {KEY}")

    good, bad = written_pairs(2)
    tasks = [judge.task(good), dataclasses.replace(judge.task(bad), parse=surprised)]

    async def go():
        with AnswerCache(cfg.resolved_cache_path()) as store:
            runner = LLMRunner(cfg, cache=store)
            try:
                return await runner.run(tasks)
            finally:
                await runner.aclose()

    outcomes, usage = asyncio.run(go())
    assert outcomes[tasks[0].key].ok
    out = outcomes[tasks[1].key]
    assert not out.ok and out.stage == "answer" and "RuntimeError" in out.error
    assert KEY not in out.error and "[redacted]" in out.error
    assert usage.reasks == 1 and usage.failed == 1


# ------------------------------------------------------------------------------------------
# 8. A key cut by the error-message limit, or JSON-escaped, is never shown in part
# ------------------------------------------------------------------------------------------

SLASH_KEY = "sk-hostile/KQZJWXVBNM/0123456789/abcdefghij"


def _key_pieces(text: str, key: str = SLASH_KEY, width: int = 8) -> list[str]:
    return [key[i : i + width] for i in range(len(key) - width + 1) if key[i : i + width] in text]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_key_straddling_the_cut_or_json_escaped_is_never_shown_in_part(server, tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SLASH_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SLASH_KEY)
    # the key lands at every offset around the 500-character cut, in one pair or another
    pairs = [with_fault(f"pad{n}", f"echo-key-pad-{n}") for n in range(420, 520, 5)]
    pairs.append(with_fault("escaped", "echo-key-escaped"))
    url = dict(_urls(server))[provider]
    cfg = loop_config(url, tmp_path / "c.sqlite", provider=provider, retries=0, concurrency=4)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert len(result.failures) == len(pairs)
    shown = "\n".join(f.error for f in result.failures)
    assert "[redac" in shown
    assert _key_pieces(shown) == []  # not one 8-character piece of the key
    escaped = next(f.error for f in result.failures if f.pair_id == "escaped")
    assert "[redacted]" in escaped and "rejected credentials" in escaped


def test_redact_replaces_every_escaped_form_before_cutting(monkeypatch):
    from cxreval.llm.backends import OpenAIBackend

    monkeypatch.setenv("OPENAI_API_KEY", SLASH_KEY)
    backend = OpenAIBackend(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))
    try:
        texts = [
            SLASH_KEY,
            json.dumps(SLASH_KEY),
            json.dumps(SLASH_KEY).replace("/", "\\/"),
            json.dumps(json.dumps(SLASH_KEY)),
            json.dumps({"k": SLASH_KEY}),
        ]
        for text in texts:
            assert _key_pieces(backend.redact(f"{'.' * 480} {text} tail", limit=None)) == [], text
            assert _key_pieces(backend.redact(f"{'.' * 480} {text} tail")) == [], text  # cut at 500
    finally:
        asyncio.run(backend.aclose())


# ------------------------------------------------------------------------------------------
# 9. A key pasted as --api-key-env is never printed, even when it could be a variable name
# ------------------------------------------------------------------------------------------

KEY_LIKE_NAMES = ("gsk_3xAmPlEsEcReTkEy1234567890abcdef", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "SK_" + "A" * 70)


@pytest.mark.parametrize("name", KEY_LIKE_NAMES)
def test_a_key_like_api_key_env_value_is_never_echoed(name, monkeypatch):
    monkeypatch.delenv(name, raising=False)
    cfg = LLMConfig.load(None, model="m", base_url="https://llm.example.org/v1", api_key_env=name)
    with pytest.raises(LLMConfigError) as exc:
        cfg.api_key()
    assert name not in str(exc.value) and "does not look like a variable name" in str(exc.value)
    assert name not in cfg.key_env_shown and name not in repr(cfg) and name not in str(cfg)
    assert name not in json.dumps(cfg.answer_params())


def test_a_conventional_variable_name_is_still_named(monkeypatch):
    monkeypatch.delenv("MY_TEAM_KEY", raising=False)
    cfg = LLMConfig.load(None, model="m", base_url="https://llm.example.org/v1", api_key_env="MY_TEAM_KEY")
    with pytest.raises(LLMConfigError, match="environment variable MY_TEAM_KEY is not set"):
        cfg.api_key()


def test_cli_never_prints_a_key_like_api_key_env_value(tmp_path):
    name = KEY_LIKE_NAMES[0]
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": p.pair_id, "reference": p.reference, "candidate": p.candidate}) + "\n" for p in written_pairs(1)
        )
    )
    env = {k: v for k, v in os.environ.items() if k != name}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--pairs",
            str(data),
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "llm-pairwise",
            "--base-url",
            "http://0.0.0.0:9/v1",
            "--model",
            "m",
            "--api-key-env",
            name,
            "--cache",
            str(tmp_path / "c.sqlite"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "does not look like a variable name" in proc.stdout + proc.stderr
    everything = (
        proc.stdout + proc.stderr + "".join(p.read_text(errors="replace") for p in (tmp_path / "o").glob("*") if p.is_file())
    )
    assert name not in everything


# ------------------------------------------------------------------------------------------
# 10. The cost cap waits for requests in flight instead of stopping
# ------------------------------------------------------------------------------------------


def test_cap_waits_for_requests_in_flight_instead_of_stopping(tmp_path):
    worst = 4096 * 10.0 / 1e6  # price_input 0: a request's worst case is max_tokens of output
    cap = 5.5 * worst  # room for 5 worst cases, with concurrency 8
    pairs = written_pairs(20)
    with LoopbackServer(latency=0.05) as srv:
        cfg = loop_config(
            srv.base_url, tmp_path / "c.sqlite", concurrency=8, price_input=0.0, price_output=10.0, max_tokens=4096, max_cost=cap
        )
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert result.usage.stopped is None, result.usage.stopped
    assert result.n_pairs == 20 and result.n_failed == 0  # all of them, in one go
    assert 0 < result.usage.cost <= cap
    with AnswerCache(tmp_path / "c.sqlite") as store:
        assert store.spent() == pytest.approx(result.usage.cost)


def test_cap_still_stops_when_real_spending_leaves_no_room(tmp_path):
    pairs = written_pairs(20)
    with LoopbackServer(latency=0.02) as srv:
        cfg = loop_config(
            srv.base_url, tmp_path / "c.sqlite", concurrency=8, price_input=0.0, price_output=1000.0, max_tokens=256, max_cost=2.0
        )
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert result.usage.stopped and result.usage.stopped.startswith("--max-cost")
    assert 0 < result.n_pairs < 20 and result.usage.cost <= 2.0
    assert {f.reason for f in result.failures} == {"budget"}


# ------------------------------------------------------------------------------------------
# 11. Zero usage for a non-empty prompt or answer is not believed
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_zero_usage_is_estimated_not_believed(server, tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    pairs = written_pairs(4, marker="FAULT:zero-usage-always")
    url = dict(_urls(server))[provider]
    cfg = loop_config(url, tmp_path / "c.sqlite", provider=provider, price_input=1.0, price_output=4.0, max_tokens=512)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert result.n_pairs == 4
    assert result.usage.estimated == result.usage.answers == 4
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0 and result.usage.cost > 0


# ------------------------------------------------------------------------------------------
# 12. Malformed HTTP 200s are charged: a provider bills them
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_200s_are_charged_in_the_ledger(server, tmp_path, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    pairs = [
        with_fault("cut", "cut-body-always"),
        with_fault("nomsg", "no-message-always"),
        with_fault("deep", "deep-body-always"),
    ]
    url = dict(_urls(server))[provider]
    cache = tmp_path / "c.sqlite"
    cfg = loop_config(url, cache, provider=provider, retries=1, price_input=1.0, price_output=4.0, max_tokens=512)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert result.n_pairs == 0 and len(result.failures) == 3
    received = [e for e in server.log if e["status"] == 200]
    assert len(received) == 6  # 3 pairs x 2 attempts, every one an HTTP 200
    with AnswerCache(cache) as store:
        sql = "SELECT estimated, input_tokens, output_tokens, cost FROM ledger"
        rows = store._db.execute(sql).fetchall()  # noqa: SLF001 - the test reads the ledger
        assert len(rows) == 6 and all(r[0] == 1 and r[1] > 0 and 0 < r[2] <= 512 and r[3] > 0 for r in rows)
        assert store.spent() == pytest.approx(result.usage.cost) and result.usage.cost > 0
    assert result.usage.estimated == 6


def test_malformed_200s_count_against_the_cap(server, tmp_path):
    pairs = written_pairs(12, marker="FAULT:cut-body-always")
    cfg = loop_config(
        server.base_url,
        tmp_path / "c.sqlite",
        concurrency=4,
        retries=1,
        price_input=1.0,
        price_output=4.0,
        max_tokens=512,
        max_cost=0.03,
    )
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    _partition(result, pairs)
    assert result.usage.stopped and result.usage.stopped.startswith("--max-cost")
    assert 0 < result.usage.cost <= 0.03
    assert "budget" in {f.reason for f in result.failures}


# ------------------------------------------------------------------------------------------
# 13. Leases are short and renewed: a dead owner's lease ends within timeout + 30 s, any host
# ------------------------------------------------------------------------------------------


def _lease(cache: Path) -> tuple[str, float] | None:
    import sqlite3

    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as db:
        try:
            return db.execute("SELECT owner, expires FROM leases").fetchone()
        except sqlite3.OperationalError:
            return None


def _in_thread(fn):
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def _wait_for(cond, limit: float = 30.0) -> None:
    import time

    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, "gave up waiting"
        time.sleep(0.02)


def test_leases_are_short_and_renewed_at_every_attempt(tmp_path):
    import time

    cache = tmp_path / "c.sqlite"
    timeout = 5.0
    pairs = [with_fault("slow", "429")]  # 429 (Retry-After: 1), then the retry is held by the server
    with LoopbackServer(hold_after=1) as srv:
        cfg = loop_config(srv.base_url, cache, timeout=timeout, concurrency=1)
        t0 = time.time()
        thread, box = _in_thread(lambda: Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs))
        _wait_for(lambda: any(e["status"] == "held" for e in srv.log))
        owner, expires = _lease(cache)
        now = time.time()
        assert not owner.startswith("otherhost")
        assert expires <= now + timeout + 30 + 0.5  # short: one timeout and a margin
        assert expires >= t0 + 1 + timeout + 30 - 0.5  # renewed after the 1 s wait, at the retry
        srv.release()
        thread.join(60)
    assert "error" not in box, box.get("error")
    assert box["value"].n_pairs == 1
    assert _lease(cache) is None


def test_a_stale_lease_of_another_host_is_taken_over_after_expiry(tmp_path):
    import time

    from cxreval.judge.llm_pairwise import LLMPairwiseJudge

    cache = tmp_path / "c.sqlite"
    pairs = written_pairs(3)
    with LoopbackServer() as srv:
        cfg = loop_config(srv.base_url, cache, timeout=1.0)
        judge = LLMPairwiseJudge(Evaluator().ontology, cfg, "positive")
        with AnswerCache(cache) as store:  # a process on another host took the lease, then died
            for p in pairs:
                store._db.execute(
                    "INSERT INTO leases VALUES (?,?,?)",  # noqa: SLF001
                    (judge.task(p).key, "otherhost:1:deadbeef", time.time() + 1.5),
                )
        t0 = time.monotonic()
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        took = time.monotonic() - t0
    assert result.n_pairs == 3 and result.n_failed == 0
    assert 1.0 <= took < 15  # waited for the expiry (the owner might have been alive), then took over
    assert len(srv.log) == 3


def test_renew_extends_only_the_owners_lease(tmp_path):
    cache = tmp_path / "c.sqlite"
    with AnswerCache(cache) as a, AnswerCache(cache) as b:
        assert a.claim("k", 0.5)
        assert not b.claim("k", 10)
        assert a.renew("k", 60)
        assert not b.renew("k", 60)  # b cannot take over a live lease by renewing
        import time

        time.sleep(0.6)
        assert not b.claim("k", 10)  # renewed: still a's
        a.release("k")
        assert b.claim("k", 10)
