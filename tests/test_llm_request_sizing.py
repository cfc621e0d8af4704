"""Issue 28, item 2: output tokens sized from the answer schema, so a dense answer fits; a response
format the server refused is recorded in the signature and the outputs, and said, never only
logged. Against the loopback server, which cuts an answer at the request's limit as a real one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.evaluate import FormatFallbackWarning
from cxreval.io import ReportPair
from cxreval.judge.llm_pairwise import pairwise_schema
from cxreval.llm.schemas import MIN_ANSWER_TOKENS, answer_token_bound
from cxreval.ontology import load_ontology
from cxreval.scores import Signature
from cxreval.testing.loopback import LoopbackServer
from tests.llm_support import loop_config

PAIRS = [
    ReportPair(
        pair_id="p",
        reference="Small left pleural effusion. Mild cardiomegaly.",
        candidate="No pleural effusion. Mild cardiomegaly.",
    )
]


def test_the_bound_holds_the_longest_answer_of_each_schema() -> None:
    onto = load_ontology()
    dense, sparse = pairwise_schema("dense", onto), pairwise_schema("sparse", onto)
    assert answer_token_bound(dense) >= 6_400  # a dense answer is about 6.4k tokens
    assert answer_token_bound(sparse) >= MIN_ANSWER_TOKENS  # never less than before sizing


def test_a_dense_answer_fits_under_the_default(tmp_path: Path) -> None:
    with LoopbackServer(cut_at_max_tokens=True) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite", schema_style="dense")
        assert cfg.max_tokens is None  # the default: sized from the schema
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(PAIRS)
        assert result.n_failed == 0 and result.usage.output_tokens > 4096  # longer than the old fixed limit
        assert not [e for e in srv.log if e["fault"] == "cut-at-max-tokens"]
        assert Signature.parse(str(result.signature)).options["schema"] == "dense"
        # the old fixed 4,096 cuts every dense answer off: re-asked, then listed, never scored
        fixed = loop_config(srv.base_url, tmp_path / "d.sqlite", schema_style="dense", max_tokens=4096)
        cut = Evaluator(engine="llm-pairwise", llm=fixed).evaluate(PAIRS)
        assert cut.n_failed == 1 and "cut off at max_tokens=4096" in cut.failures[0].error


def test_a_refused_response_format_is_signed_saved_and_said(tmp_path: Path) -> None:
    with LoopbackServer(reject_json_schema=True) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite")
        with pytest.warns(FormatFallbackWarning, match="asked as json_object"):
            result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(PAIRS)
        assert result.n_failed == 0
        assert Signature.parse(str(result.signature)).options["format"] == "auto>json_object"
        result.save(tmp_path / "out")
        scores = json.loads((tmp_path / "out" / "scores.json").read_text(encoding="utf-8"))
        assert "format:auto>json_object" in scores["signature"]
        assert scores["usage"]["response_format"] == "json_object"
    with LoopbackServer() as srv:  # a server that takes json_schema: nothing to say
        cfg = loop_config(srv.base_url, tmp_path / "e.sqlite")
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(PAIRS)
        assert Signature.parse(str(result.signature)).options["format"] == "auto"


def test_a_server_that_allows_fewer_tokens_gets_the_old_limit_and_keeps_its_temperature(tmp_path: Path) -> None:
    """An automatic limit a server refuses as too large ("'max_tokens' or 'max_completion_tokens' is
    too large", vLLM's words) steps down to 4,096 once; it is no reasoning model (temperature kept)."""
    with LoopbackServer(max_output_tokens=4096) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite")
        pairs = [*PAIRS, ReportPair(pair_id="q", reference="Right pneumothorax.", candidate="No pneumothorax.")]
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate(pairs)
        assert result.n_failed == 0
        refused = [e for e in srv.log if e["fault"] == "too-many-tokens"]
        assert 1 <= len(refused) <= cfg.concurrency
        answered = [e["params"] for e in srv.log if e["fault"] is None]
        assert answered and all(p == {"temperature": 0.0, "max_tokens": 4096} for p in answered)
        # a limit the user set is never changed: refused, the run stops (exit 3 on the command line)
        fixed = loop_config(srv.base_url, tmp_path / "d.sqlite", max_tokens=8000)
        stopped = Evaluator(engine="llm-pairwise", llm=fixed).evaluate(PAIRS)
        assert stopped.n_failed == 1 and stopped.usage.stopped and "too large" in stopped.usage.stopped
