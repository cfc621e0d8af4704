"""Several LLM endpoints (vLLM replicas, no load balancer): calls are spread client side, and an
endpoint that dies mid-run is rested while the others finish the work (issue 14, item 6)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.cli import example_path
from cxreval.io import read_pairs
from cxreval.llm import LLMConfig
from cxreval.llm.backends import BalancedBackend, make_backend
from cxreval.testing.loopback import LoopbackServer
from tests.llm_support import llm_rows, loop_config, rule_rows


def test_yaml_list_of_urls_is_base_url_and_replicas() -> None:
    cfg = LLMConfig.model_validate({"base_url": ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1/"], "model": "m"})
    assert cfg.base_url == "http://127.0.0.1:1/v1" and cfg.replicas == ["http://127.0.0.1:2/v1"]
    assert cfg.endpoints == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    with pytest.raises(ValueError, match="twice"):
        LLMConfig(base_url="http://127.0.0.1:1/v1", replicas=["http://127.0.0.1:2/v1"] * 2, model="m")
    far = LLMConfig(base_url="http://127.0.0.1:1/v1", replicas=["https://api.example.com/v1"], model="m", local_only=True)
    with pytest.raises(ValueError, match="api.example.com"):
        far.check_endpoint()
    assert "replicas" not in cfg.answer_params() and "base_url" not in cfg.answer_params()


def test_two_replicas_share_the_work_and_one_dies_mid_run(tmp_path: Path) -> None:
    pairs = read_pairs(example_path())
    with LoopbackServer(latency=0.05) as a, LoopbackServer(latency=0.05) as b:
        cfg = loop_config(a.base_url, tmp_path / "c.sqlite", replicas=[b.base_url], concurrency=4, retries=4)

        def kill_b() -> None:  # B stops answering after it has answered 3 calls
            deadline = time.monotonic() + 30
            while len(b.finished()) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            b.kill()

        killer = threading.Thread(target=kill_b)
        killer.start()
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        killer.join()
        served_a, served_b = len(a.finished()), len(b.finished())
    assert result.n_failed == 0 and result.n_pairs == len(pairs)  # every pair judged despite B's death
    assert served_b >= 3 and served_a >= len(pairs) - served_b  # both served; A took over
    expected = rule_rows(pairs, spec_compat=True, flat=True, drop_tn=True)
    got = llm_rows(result.judgements)
    assert all(got.get(p.pair_id, set()) == expected[p.pair_id] for p in pairs)
    assert result.usage.retries >= 1  # calls sent to the dead replica were retried elsewhere


def test_balanced_backend_rests_a_failing_endpoint() -> None:
    with LoopbackServer() as a:
        dead = LoopbackServer().start()
        dead_url = dead.base_url
        dead.kill()
        cfg = LLMConfig(base_url=dead_url, replicas=[a.base_url], model="loopback", local_only=True, timeout=5)
        backend = make_backend(cfg)
        assert isinstance(backend, BalancedBackend)

        async def calls() -> list[str]:
            out = []
            for _ in range(4):
                try:
                    await backend.complete(
                        [{"role": "user", "content": "Reference report:\nNo effusion.\nCandidate report:\nNo effusion."}],
                        {"type": "object"},
                        "x",
                    )
                    out.append("ok")
                except Exception as exc:  # noqa: BLE001 - the dead endpoint's transport error
                    out.append(type(exc).__name__)
            await backend.aclose()
            return out

        outcomes = asyncio.run(calls())
    down, up = backend.health
    assert down.failures >= 1 and down.calls == down.failures and not down.healthy and down.last_error
    assert up.answers + up.failures == up.calls and up.calls >= 3  # after the first failure, calls go to A
    assert outcomes.count("ok") + sum(o != "ok" for o in outcomes) == 4
