"""The engine protocol and registry (issue 12): every registered engine judges pairs into an
:class:`EngineOutput` that scores, through the one SPEC scoring module, to what ``evaluate`` says."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cxreval import Evaluator, ReportPair
from cxreval.engines import (
    Engine,
    EngineOutput,
    ExtractOutput,
    NoExtraction,
    UnknownEngine,
    engine_info,
    engine_names,
    get_engine,
)
from cxreval.evaluate import Failure
from cxreval.extract.models import Extraction
from cxreval.judge.table import JudgementTable
from cxreval.ontology import load_ontology
from cxreval.scores import spec_scores
from cxreval.testing.loopback import LoopbackServer

from .llm_support import loop_config, with_fault

ENGINES = ("rules", "llm-extract", "llm-pairwise", "llm-pairwise-2pass")
PAIRS = [
    ReportPair(
        pair_id="a",
        reference="Small left pleural effusion. No pneumothorax.",
        candidate="Large right pleural effusion. No pneumothorax.",
    ),
    ReportPair(pair_id="b", reference="Mild cardiomegaly, increased since the prior study.", candidate="Mild cardiomegaly."),
    ReportPair(
        pair_id="c",
        reference="The lungs are clear. Heart size is normal.",
        candidate="Right upper lobe consolidation concerning for pneumonia.",
    ),
    ReportPair(
        pair_id="d",
        reference="Small left pleural effusion. No pneumothorax.",
        candidate="No focal consolidation, pleural effusion or pneumothorax.",
    ),
]


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


def _engine(name: str, onto, server, tmp_path: Path) -> Engine:
    llm = loop_config(server.base_url, tmp_path / "answers.sqlite") if engine_info(name).needs_llm else None
    return get_engine(name, onto, "positive", llm=llm)


def test_registry_lists_the_engines_and_refuses_an_unknown_one_with_the_list(onto):
    assert engine_names() == ENGINES
    with pytest.raises(
        UnknownEngine, match="unknown engine 'llm-magic'; choose one of rules, llm-extract, llm-pairwise, llm-pairwise-2pass"
    ):
        get_engine("llm-magic", onto)
    with pytest.raises(ValueError, match="choose one of rules, llm-extract"):
        Evaluator(engine="llm-magic")  # type: ignore[arg-type]
    for name in ENGINES[1:]:
        with pytest.raises(ValueError, match=f"engine '{name}' needs llm=LLMConfig"):
            get_engine(name, onto)


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_implements_the_protocol(name, onto, server, tmp_path):
    engine = _engine(name, onto, server, tmp_path)
    assert isinstance(engine, Engine) and engine.name == name
    assert engine.offline == (name == "rules")
    out = asyncio.run(engine.judge(PAIRS, 0))
    assert isinstance(out, EngineOutput) and isinstance(out.table, JudgementTable)
    assert out.table.pair_ids == tuple(p.pair_id for p in PAIRS) and not out.failures
    assert out.table.signature == str(engine.signature)
    assert set(out.table.frame["pair_id"]) <= set(out.table.pair_ids) and len(out.table.frame) > 0
    texts = {t for p in PAIRS for t in (p.reference, p.candidate)}
    if engine_info(name).extracts:
        assert out.extractions is not None and set(out.extractions) == texts
        assert all(isinstance(x, Extraction) for x in out.extractions.values())
        read = asyncio.run(engine.extract(sorted(texts)))
        assert isinstance(read, ExtractOutput) and read.extractions == out.extractions and not read.failures
    else:
        assert out.extractions is None
        with pytest.raises(
            NoExtraction,
            match=f"engine '{name}' judges pairs and makes no extraction of a report; "
            "label metrics .* need the 'rules' or 'llm-extract' engine",
        ):
            asyncio.run(engine.extract(sorted(texts)))
    assert (out.usage is None) == engine.offline
    if not engine.offline:
        assert out.usage.tasks >= len(PAIRS)
    # the loopback server answers with the rule engine's reading: the same judgements (TN rows aside)
    rules = asyncio.run(get_engine("rules", onto).judge(PAIRS))
    non_tn = lambda t: {
        tuple(r)
        for r in t.frame.drop(columns=["reference", "candidate", "reference_rules", "candidate_rules"]).itertuples(
            index=False, name=None
        )
        if r[2] != "TN"
    }
    assert non_tn(out.table) == non_tn(rules.table)


@pytest.mark.parametrize("name", ENGINES)
def test_engine_output_scores_to_what_evaluate_returns(name, onto, server, tmp_path):
    engine = _engine(name, onto, server, tmp_path)
    llm = getattr(engine, "llm", None)
    pairs = [*PAIRS, with_fault("e", "schema-always")] if llm is not None else PAIRS
    out = asyncio.run(engine.judge(pairs, 0))
    spec = spec_scores(out.table, onto)
    result = Evaluator(onto, engine=name, llm=llm).evaluate(pairs)  # type: ignore[arg-type]
    assert result.signature == engine.signature and str(result.signature) == out.table.signature
    assert result.pair_ids == list(out.table.pair_ids)
    assert result.judgements == out.table.rows()
    assert result.entities == spec.entities and result.groups == spec.groups and result.averages == spec.averages
    assert result.errors.equals(spec.errors) and result.error_summary == spec.error_summary
    assert result.block_sums.keys() == spec.block_sums.keys()
    assert all((result.block_sums[b] == spec.block_sums[b]).all() for b in spec.block_sums)
    assert result.failures == out.failures
    if llm is not None:  # the fault pair is listed, never scored
        assert [f.pair_id for f in out.failures] == ["e"] and "e" not in out.table.pair_ids
        assert all(isinstance(f, Failure) and f.reason == "answer" and f.raw for f in out.failures)


def test_extract_all_uses_the_engines_extractions(onto, server, tmp_path):
    texts = [p.reference for p in PAIRS]
    rules = Evaluator(onto)
    assert rules.extract_all(texts) == asyncio.run(rules.judge_engine.extract(texts)).extractions
    llm = Evaluator(onto, engine="llm-extract", llm=loop_config(server.base_url, tmp_path / "a.sqlite"))
    before = len(server.log)
    got = llm.extract_all(texts)
    assert len(server.log) - before == len(set(texts))  # the LLM read every distinct report
    assert {t: x.engine for t, x in got.items()} == {t: "llm-extract@4" for t in texts}
    for name in ("llm-pairwise", "llm-pairwise-2pass"):
        ev = Evaluator(onto, engine=name, llm=loop_config(server.base_url, tmp_path / "a.sqlite"))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="makes no extraction"):
            ev.extract_all(texts)


def test_two_pass_engine_is_signed_with_the_verification(onto, server, tmp_path):
    one = _engine("llm-pairwise", onto, server, tmp_path).signature
    two = _engine("llm-pairwise-2pass", onto, server, tmp_path).signature
    assert two.engine == one.engine and two.prompt == f"{one.prompt}+verify@2"
    assert two.options == {**one.options, "passes": "2"}
