"""Issue 28, item 1: OpenAI's reasoning models (o1, o3-mini, o4-mini, GPT-5) get
``max_completion_tokens`` and no ``temperature``; a server that refuses the classic parameters
for another name is answered the same way from then on. Against the loopback server, which
refuses them with OpenAI's own 400 when told to act as a reasoning model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.io import ReportPair
from cxreval.judge.llm_pairwise import pairwise_schema
from cxreval.llm.config import is_reasoning_model
from cxreval.llm.schemas import answer_token_bound
from cxreval.ontology import load_ontology
from cxreval.scores import Signature
from cxreval.testing.loopback import LoopbackServer
from tests.llm_support import loop_config

#: The output tokens a sparse pairwise call asks for (sized from its schema: the default).
LIMIT = answer_token_bound(pairwise_schema("sparse", load_ontology()))
PAIRS = [ReportPair(pair_id="p", reference="Small left pleural effusion.", candidate="No pleural effusion.")]


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "openai/o3"])
def test_reasoning_models_are_known_by_name(model: str) -> None:
    assert is_reasoning_model(model)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1", "Qwen/Qwen2.5-7B-Instruct", "llama3:8b", "o"])
def test_other_models_are_not(model: str) -> None:
    assert not is_reasoning_model(model)


def test_a_reasoning_model_is_sent_what_it_accepts(tmp_path: Path) -> None:
    with LoopbackServer(reasoning_model=True) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite").model_copy(update={"model": "o4-mini"})
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(PAIRS)
        assert result.n_failed == 0 and int(result.errors.loc["p", "errors"]) == 1
        sent = [e["params"] for e in srv.log]
        assert sent and all(p == {"max_completion_tokens": LIMIT} for p in sent)
        assert all(e["fault"] is None for e in srv.log)  # never refused: nothing sent twice
        assert Signature.parse(str(result.signature)).options["temperature"] == "default"


def test_a_server_that_refuses_the_classic_parameters_is_answered_in_its_terms(tmp_path: Path) -> None:
    """A model whose name says nothing (a deployment alias) is learned from the 400, once."""
    with LoopbackServer(reasoning_model=True) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite").model_copy(update={"model": "my-deployment"})
        pairs = [*PAIRS, ReportPair(pair_id="q", reference="Right pneumothorax.", candidate="Right pneumothorax.")]
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        assert result.n_failed == 0
        refused = [e for e in srv.log if e["fault"] == "reasoning-model"]
        assert 1 <= len(refused) <= cfg.concurrency  # only calls already in flight were refused
        assert srv.log[-1]["params"] == {"max_completion_tokens": LIMIT}


def test_other_models_keep_max_tokens_and_temperature(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite")
        Evaluator(engine="llm-pairwise", llm=cfg).evaluate(PAIRS)
        assert srv.log[0]["params"] == {"temperature": cfg.temperature, "max_tokens": LIMIT}
