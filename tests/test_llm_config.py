"""LLM settings: precedence, keys only by variable name, --local-only, the answer cache."""

from __future__ import annotations

import sqlite3

import pytest

from cxreval.llm import AnswerCache, CachedAnswer, LLMConfig, LLMConfigError, is_loopback_url


def test_precedence_file_then_env_then_flags(tmp_path):
    f = tmp_path / "llm.yaml"
    f.write_text("model: from-file\ntemperature: 0.3\nconcurrency: 3\nbase_url: http://127.0.0.1:9/v1\n")
    env = {"CXREVAL_LLM_TEMPERATURE": "0.5", "CXREVAL_LLM_CONCURRENCY": "5"}
    cfg = LLMConfig.load(f, env=env, concurrency=7, model=None)
    assert (cfg.model, cfg.temperature, cfg.concurrency) == ("from-file", 0.5, 7)


def test_keys_are_refused_in_files_and_read_from_the_named_variable(tmp_path, monkeypatch):
    f = tmp_path / "llm.yaml"
    f.write_text("model: m\napi_key: sk-secret\n")
    with pytest.raises(LLMConfigError, match="api_key_env"):
        LLMConfig.load(f, env={})
    cfg = LLMConfig(model="m", base_url="https://llm.example.org/v1", api_key_env="MY_TEAM_KEY")
    monkeypatch.delenv("MY_TEAM_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="MY_TEAM_KEY is not set"):
        cfg.api_key()
    monkeypatch.setenv("MY_TEAM_KEY", "sk-abc123")
    assert cfg.api_key() == "sk-abc123"
    assert "sk-abc123" not in repr(cfg) and "sk-abc123" not in cfg.model_dump_json()


def test_invalid_values_are_listed():
    with pytest.raises(LLMConfigError, match="concurrency"):
        LLMConfig.load(None, env={}, model="m", concurrency=0)
    with pytest.raises(LLMConfigError, match="credentials"):
        LLMConfig.load(None, env={}, model="m", base_url="http://user:pw@127.0.0.1/v1")


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.5.6.7/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("http://192.168.1.2/v1", False),
        ("http://127.0.0.1.nip.io/v1", False),
        ("http://localhost.example.com", False),
    ],
)
def test_loopback_detection(url, local):
    assert is_loopback_url(url) is local
    cfg = LLMConfig(model="m", base_url=url, local_only=True)
    if local:
        cfg.check_endpoint()
    else:
        with pytest.raises(LLMConfigError, match="not on loopback"):
            cfg.check_endpoint()


def test_default_endpoint_is_not_local():
    with pytest.raises(LLMConfigError, match="api.anthropic.com"):
        LLMConfig(model="m", provider="anthropic", local_only=True).check_endpoint()


def test_cache_round_trip_wal_stats_and_clear(tmp_path):
    path = tmp_path / "c.sqlite"
    with AnswerCache(path) as c:
        c.put(
            CachedAnswer(
                key="k1",
                kind="pairwise",
                engine="llm-pairwise@1",
                model="m",
                status="ok",
                value={"items": [{"entity": "x"}], "notes": []},
                raw=["{}"],
                input_tokens=10,
                output_tokens=2,
                calls=1,
                cost=0.5,
            )
        )
        c.put(
            CachedAnswer(
                key="k2",
                kind="extract",
                engine="llm-extract@1",
                model="m2",
                status="failed",
                raw=["{", "{"],
                error="bad",
                calls=2,
            )
        )
        assert c.get("k1").value == {"items": [{"entity": "x"}], "notes": []}
        assert c.get("nope") is None
    # a second connection (another process) sees committed rows; the journal is WAL
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 2
    db.close()
    with AnswerCache(path) as c:
        stats = {(s["kind"], s["status"]): s for s in c.stats()}
        assert stats[("pairwise", "ok")]["input_tokens"] == 10 and stats[("extract", "failed")]["calls"] == 2
        assert c.clear(status="failed") == 1
        assert c.count() == 1
        assert c.clear() == 1 and c.count() == 0
