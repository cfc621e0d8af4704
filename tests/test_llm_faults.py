"""LLM engines against a real HTTP server on 127.0.0.1 that misbehaves on demand.

The server answers with what the rule engine reads, so every pair an LLM engine scores must
carry exactly the rule engine's judgements: a pair scored from a corrupted answer would show.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from cxreval import Evaluator
from cxreval.cli import example_path
from cxreval.io import read_pairs
from cxreval.testing.loopback import LoopbackServer

from .llm_support import llm_rows, loop_config, rule_rows, with_fault, written_pairs

KEY = "sk-test-0123456789abcdef"

RECOVERS = ["timeout", "429", "500", "drop", "truncate", "schema", "unknown", "duplicate", "duplicate-tie"]
FAILS = {  # fault -> reason it must be listed with
    "timeout-always": "deadline",
    "500-always": "transport",
    "truncate-always": "answer",
    "schema-always": "answer",
    "unknown-always": "answer",
    "echo-key-always": "transport",
}


@pytest.fixture
def server():
    with LoopbackServer(timeout_sleep=2.0) as srv:
        yield srv


def _check_partition(result, pairs):
    """Every pair is scored or listed as failed, never both, none lost."""
    failed = {f.pair_id for f in result.failures}
    scored = set(result.pair_ids)
    assert scored | failed == {p.pair_id for p in pairs}
    assert not scored & failed
    assert {r.pair_id for r in result.judgements} <= scored
    return scored, failed


@pytest.mark.parametrize("style", ["sparse", "dense"])
def test_pairwise_faults_end_scored_or_failed(server, tmp_path, monkeypatch, style):
    monkeypatch.setenv("LOOPBACK_KEY", KEY)
    pairs = written_pairs(6, prefix="ok") + [with_fault(f"f-{f}", f) for f in [*RECOVERS, *FAILS]]
    cfg = loop_config(
        server.base_url, tmp_path / "c.sqlite", timeout=1.0, retries=2, api_key_env="LOOPBACK_KEY", schema_style=style
    )
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    scored, failed = _check_partition(result, pairs)
    assert failed == {f"f-{f}" for f in FAILS}
    reasons = {f.pair_id: f.reason for f in result.failures}
    assert reasons == {f"f-{f}": r for f, r in FAILS.items()}
    # what was scored is exactly what the rule engine says: nothing came from a bad answer
    expected = rule_rows(pairs, drop_tn=True, flat=True)
    got = llm_rows(result.judgements)
    for pid in scored:
        assert got.get(pid, set()) == expected[pid], pid
    # answer failures keep both raw answers (first + re-ask); transport failures say why
    by_id = {f.pair_id: f for f in result.failures}
    assert len(by_id["f-truncate-always"].raw) == 2 and "not valid JSON" in by_id["f-truncate-always"].error
    assert "unknown entity ids: 'pleural_efusion_of_doom'" in by_id["f-unknown-always"].error
    assert "gave up after 3 attempts" in by_id["f-500-always"].error
    u = result.usage
    assert u.retry_after_waits == [1.0]  # the 429's Retry-After: 1 was honoured, not a backoff guess
    assert u.reasks == 6  # truncate, schema, unknown, and the three -always answer faults
    # the re-ask showed the model its error
    reask_texts = [e["reask_text"] for e in server.log if e["reask"]]
    assert any("did you mean 'pleural_effusion'" in t for t in reask_texts)
    assert any("not valid JSON" in t for t in reask_texts)
    # the key never leaves: not in failures, outputs, or the cache, even though a server echoed it
    paths = result.save(tmp_path / "out")
    for p in [*paths.values(), tmp_path / "c.sqlite"]:
        assert KEY not in p.read_bytes().decode("utf-8", "replace"), p
    assert "[redacted]" in by_id["f-echo-key-always"].error
    lines = [json.loads(x) for x in paths["failures"].read_text().splitlines()]
    assert {x["pair_id"] for x in lines} == failed and all(x["stage"] == "pairwise" for x in lines)


def test_rerun_makes_no_call_for_finished_pairs_and_retries_transport_failures(server, tmp_path):
    pairs = written_pairs(5) + [with_fault("bad-json", "schema-always"), with_fault("down", "500-always")]
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite", retries=1)
    first = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert {f.pair_id: f.reason for f in first.failures} == {"bad-json": "answer", "down": "transport"}
    n = len(server.log)
    second = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    new = server.log[n:]
    # only the pair whose call never finished is asked again (twice: retries=1)
    assert len(new) == 2 and {e["fault"] for e in new} == {"500"}
    assert second.usage.cache_hits == 6
    assert llm_rows(second.judgements) == llm_rows(first.judgements)
    # an invalid answer is stored; --retry-failed asks again
    n = len(server.log)
    Evaluator(engine="llm-pairwise", llm=cfg, retry_failed=True).evaluate(pairs[:-1])
    assert len(server.log) - n == 2  # answer + re-ask for "bad-json"


@pytest.mark.parametrize("style", ["sparse", "dense"])
def test_extract_mode_reads_each_text_once_and_fails_every_pair_of_a_bad_reference(server, tmp_path, style):
    pairs = written_pairs(8)
    shared = pairs[0].reference
    pairs += [p.model_copy(update={"pair_id": f"shared{i}", "reference": shared}) for i, p in enumerate(pairs[1:4])]
    bad_ref = with_fault("x", "unknown-always", side="reference").reference
    pairs += [p.model_copy(update={"pair_id": f"badref{i}", "reference": bad_ref}) for i, p in enumerate(pairs[4:7])]
    pairs += [with_fault("cand-trunc", "truncate")]
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite", schema_style=style)
    result = Evaluator(engine="llm-extract", llm=cfg).evaluate(pairs)
    scored, failed = _check_partition(result, pairs)
    assert failed == {"badref0", "badref1", "badref2"}
    assert {f.stage for f in result.failures} == {"extract-reference"}
    texts = {t for p in pairs for t in (p.reference, p.candidate)}
    assert result.usage.tasks == len(texts)  # one call per distinct text: the shared reference once
    expected = rule_rows(pairs)
    got = llm_rows(result.judgements)
    for pid in scored:
        assert got.get(pid, set()) == expected[pid], pid


def test_whole_example_matches_rule_engine_on_both_providers(server, tmp_path):
    pairs = read_pairs(example_path())
    expected = rule_rows(
        pairs, spec_compat=True, flat=True, drop_tn=True
    )  # the pairwise answer holds SPEC's three comparison values
    for provider, url in (("openai", server.base_url), ("anthropic", server.anthropic_url)):
        cfg = loop_config(url, tmp_path / f"{provider}.sqlite", provider=provider)
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        assert result.n_failed == 0
        assert result.usage.response_format == ("tool_use" if provider == "anthropic" else "json_schema")
        got = llm_rows(result.judgements)
        assert all(got.get(p.pair_id, set()) == expected[p.pair_id] for p in pairs), provider
        sig = str(result.signature)
        assert f"model:{provider}:loopback" in sig and "engine:llm-pairwise@4" in sig and "prompt:pairwise@3" in sig
        assert "schema:sparse" in sig and "temperature:0" in sig


def test_anthropic_backend_retries_and_reasks(server, tmp_path):
    pairs = written_pairs(3) + [with_fault("a429", "429"), with_fault("aschema", "schema"), with_fault("a500", "500-always")]
    cfg = loop_config(server.anthropic_url, tmp_path / "c.sqlite", provider="anthropic", retries=2, rate_limit=100)
    result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert {f.pair_id for f in result.failures} == {"a500"}
    assert result.usage.retry_after_waits == [1.0] and result.usage.reasks == 1
    expected = rule_rows(pairs, flat=True, drop_tn=True)
    got = llm_rows(result.judgements)
    assert all(got.get(pid, set()) == expected[pid] for pid in result.pair_ids)


def test_auto_response_format_steps_down_like_llama_cpp_python(tmp_path):
    pairs = written_pairs(4)
    with LoopbackServer(reject_json_schema=True) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite", concurrency=4)
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        # all four first calls may be refused at once; they step down one level, not two
        assert result.n_failed == 0 and result.usage.response_format == "json_object"
        assert 1 <= [e["fault"] for e in srv.log].count("reject-json-schema") <= 4
        none_cfg = loop_config(srv.base_url, tmp_path / "c2.sqlite", response_format="none")
        result2 = Evaluator(engine="llm-pairwise", llm=none_cfg).evaluate(pairs)
        assert result2.n_failed == 0
        assert (
            llm_rows(result2.judgements)
            == llm_rows(result.judgements)
            == {k: v for k, v in rule_rows(pairs, flat=True, drop_tn=True).items() if v}
        )


def test_max_cost_stops_cleanly_and_a_rerun_continues(server, tmp_path):
    pairs = written_pairs(10)
    cache = tmp_path / "c.sqlite"
    # the loopback server counts a token per 4 characters: each call here costs about 0.0034 USD, and
    # may cost up to ~0.0052 (prompt at 3 bytes a token + max_tokens): the cap is never passed, and a
    # call is sent only while the worst case fits, so the run stops within one worst case of it
    cfg = loop_config(server.base_url, cache, concurrency=1, price_input=0.25, price_output=1.0, max_cost=0.016, max_tokens=1024)
    first = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert first.usage.stopped and first.usage.stopped.startswith("--max-cost")
    done = first.pair_ids
    assert 0 < len(done) < 10 and 0.016 - 0.0055 <= first.usage.cost <= 0.016
    assert {f.reason for f in first.failures} == {"budget"} and len(first.failures) == 10 - len(done)
    asked = {e["request"] for e in server.log}
    more = loop_config(server.base_url, cache, concurrency=1, price_input=0.25, price_output=1.0, max_cost=1.0, max_tokens=1024)
    second = Evaluator(engine="llm-pairwise", llm=more).evaluate(pairs)
    assert second.n_failed == 0 and second.n_pairs == 10
    again = [e["request"] for e in server.log[len(asked) :]]
    assert len(again) == 10 - len(done) and not set(again) & asked


def test_runs_have_their_own_calls_and_summary(server, tmp_path):
    from cxreval.evaluate import summarize_runs

    pairs = written_pairs(4)
    cfg = loop_config(server.base_url, tmp_path / "c.sqlite", temperature=0.7)
    results = Evaluator(engine="llm-extract", llm=cfg).evaluate_runs(pairs, runs=3)
    assert [r.run for r in results] == [1, 2, 3]
    # the same 8 prompts, asked anew in each run (the run index is part of the cache key)
    assert len({e["request"] for e in server.log}) == 8 and len(server.log) == 3 * 8
    assert [r.usage.cache_hits for r in results] == [0, 0, 0]
    summary = summarize_runs(results)
    f1 = next(m for m in summary["metrics"] if m["name"] == "presence_micro_f1")
    assert f1["n_runs"] == 3 and f1["sd"] == 0.0 and "runs:3" in f1["signature"]


def test_fatal_refusal_stops_the_run_without_losing_pairs(tmp_path):
    pairs = written_pairs(3)
    with LoopbackServer() as srv:
        cfg = loop_config(srv.base_url.replace("/v1", "/nowhere"), tmp_path / "c.sqlite", concurrency=1)
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
    assert result.n_pairs == 0 and result.n_failed == 3
    assert result.usage.stopped and "HTTP 404" in result.usage.stopped
    assert {f.reason for f in result.failures} == {"stopped"}
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0


def test_a_whitespace_loop_is_named_with_its_remedy(server, tmp_path):
    """An answer cut off at its limit inside a run of whitespace (guided decoding that lets a
    model write whitespace between JSON tokens) is re-asked, and listed with what to change."""
    pairs = [with_fault("ws-once", "whitespace-loop"), with_fault("ws-always", "whitespace-loop-always")]
    result = Evaluator(engine="llm-pairwise", llm=loop_config(server.base_url, tmp_path / "c.sqlite")).evaluate(pairs)
    assert result.pair_ids == ["ws-once"] and result.usage.reasks == 2
    (failure,) = result.failures
    assert failure.pair_id == "ws-always" and failure.reason == "answer"
    assert "ended in 400 whitespace characters" in failure.error and "disable_any_whitespace" in failure.error
