"""Every registered metric through :class:`tests.metric_tester.MetricTester` (issue 12).

Per metric: (a) values, order, length checks; (b) a reference implementation; (c) pair
independence and sufficient statistics; (d) direction, signature and options; (e) pickling;
(f) class vs functional form. Plus: ``cxreval.testing`` is never imported by the runtime code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cxreval.metrics import MetricUnavailable, ReportMetric, available_metrics, get_metric
from tests import test_lexical
from tests.metric_tester import CASES, MetricCase, MetricTester, build_metric, report_pairs

NAMES = available_metrics()
_BUILT: dict[tuple[str, str], ReportMetric] = {}
_UNAVAILABLE: dict[str, str] = {}


def _case(name: str) -> MetricCase:
    if name not in CASES:
        pytest.fail(f"metric {name!r} is registered but has no MetricCase in tests/metric_tester.py: add one")
    return CASES[name]


@pytest.fixture(params=NAMES)
def tester(request: pytest.FixtureRequest) -> MetricTester:
    name = request.param
    case = _case(name)
    if name not in _UNAVAILABLE:
        try:
            build_metric(name, _BUILT)()
        except MetricUnavailable as exc:
            _UNAVAILABLE[name] = f"{name}: optional extra not installed ({case.extra or 'see its docs'}): {exc}"
    if name in _UNAVAILABLE:
        pytest.skip(_UNAVAILABLE[name])
    return MetricTester(case, build_metric(name, _BUILT))


def test_every_case_is_registered() -> None:
    assert not CASES.keys() - set(NAMES), f"cases for unregistered metrics: {sorted(CASES.keys() - set(NAMES))}"
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


def test_values_equal_the_reference_implementation(tester: MetricTester) -> None:
    case = tester.case
    if case.reference is None:
        if case.reference_elsewhere:
            # checked exactly in test_lexical.py (ReXrank's own values, fast_bleu): not repeated here
            missing = [t for t in case.reference_elsewhere if not callable(getattr(test_lexical, t, None))]
            assert not missing, f"{case.name}: the reference checks named here are gone: {missing}"
            return
        pytest.skip(f"{case.name}: no reference implementation available here")
    tester.check_reference({})
    for variant in case.variants:
        if variant.scored:
            tester.check_reference(variant.options())


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


def test_class_and_functional_form_agree(tester: MetricTester) -> None:
    if tester.case.functional is None:
        pytest.skip(f"{tester.case.name}: no functional form")
    tester.check_functional()


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
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
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


@pytest.mark.parametrize("source", [
    "import cxreval.testing.loopback",
    "from cxreval import testing",
    "from cxreval.testing.reference import lcs_length_dp",
    "def f():\n    from ..testing import loopback",
    "from .. import testing",
    "import importlib\nimportlib.import_module('cxreval.testing')",
])
def test_the_import_walk_sees_every_form(source: str) -> None:
    found = _imported_modules(source, "cxreval.metrics")
    assert any(m == "cxreval.testing" or m.startswith("cxreval.testing.") for m in found), found
