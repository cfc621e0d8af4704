"""One computation path (issue 30): every headline number is a registered metric computed from the
judgement table, and evaluate, bootstrap, compare, the reward and bench take it from there.

Equalities here are exact (``==``), not approximate: the numbers are computed by one function.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cxreval
from cxreval.cli import example_path
from cxreval.metrics import available_metrics, get_metric
from cxreval.metrics.intervals import bootstrap_evaluation, table_cache
from cxreval.metrics.table import HEADLINE, TABLE_METRICS, TableMetric, table_metric
from cxreval.reward import ClinicalReward
from cxreval.scores.statistics import TableStatistics

SRC = Path(cxreval.__file__).parent


@pytest.fixture(scope="module")
def example():
    pairs = cxreval.read_pairs(example_path())
    return pairs, cxreval.Evaluator().evaluate(pairs)


def _runtime_imports(path: Path) -> set[str]:
    """Modules a file imports when it runs (imports under ``if TYPE_CHECKING:`` left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("package", ["metrics", "scores"])
def test_metrics_and_scores_never_import_evaluate(package: str) -> None:
    """Layering: load -> extract -> judge -> table -> metrics -> evaluate / bench; a metric that
    wrapped an Evaluator would make the metrics depend on the layer above them."""
    bad = {
        str(p.relative_to(SRC)): sorted(m for m in _runtime_imports(p) if m.startswith("cxreval.evaluate"))
        for p in sorted((SRC / package).rglob("*.py"))
    }
    assert not {k: v for k, v in bad.items() if v}, bad


def test_a_table_metric_scores_text_without_loading_evaluate() -> None:
    code = (
        "import sys\nfrom cxreval.metrics import get_metric\n"
        "m = get_metric('spec-location-accuracy')\n"
        "print(m.corpus_score(['Small left effusion.'], ['Small right effusion.']).value)\n"
        "print('cxreval.evaluate' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600).stdout.split()
    assert out == ["0.0", "False"], out


def test_every_headline_number_is_a_registered_table_metric() -> None:
    names = set(available_metrics())
    assert set(HEADLINE) <= names and {m.name for m in TABLE_METRICS} <= names
    for name in HEADLINE:
        m = get_metric(name)
        assert isinstance(m, TableMetric) and m.name == name


def test_scores_json_headline_is_each_metric_on_the_table(example) -> None:
    pairs, result = example
    written = {m["name"]: m for m in result.to_dict()["metrics"]}
    assert list(written) == [table_metric(n).headline for n in HEADLINE]
    refs, cands = [p.reference for p in pairs], [p.candidate for p in pairs]
    for name in HEADLINE:
        m = get_metric(name)
        value = m.value_of_table(result.table)
        want = written[m.headline]["value"]
        assert (want is None and np.isnan(value)) or value == want, name
        text = m.corpus_score(refs, cands)  # judged again from the texts: the same number
        assert (want is None and np.isnan(text.value)) or text.value == want, name
        assert written[m.headline]["signature"] == str(m.signature)
        assert written[m.headline]["higher_is_better"] is m.higher_is_better


def test_detailed_tables_agree_with_the_headline(example) -> None:
    _, result = example
    h = {m["name"]: m["value"] for m in result.metrics()}
    a, e = result.averages, result.error_summary
    assert (h["presence_macro_f1"], h["presence_micro_f1"]) == (a.macro_f1, a.micro.f1)
    assert (h["location_accuracy"], h["comparison_accuracy"]) == (a.location.accuracy, a.comparison.accuracy)
    assert (h["errors_per_report_mean"], h["error_free_rate"]) == (e.mean, e.error_free)
    assert result.critical_error_free == h["critical_error_free_rate"]


def test_bootstrap_and_compare_estimate_the_headline_numbers(example) -> None:
    _, result = example
    boot = bootstrap_evaluation(result, resamples=50, seed=0)
    for m in result.metrics():
        est = boot.get(m["name"]).estimate
        assert (m["value"] is None and np.isnan(est)) or est == m["value"], m["name"]
    # B's pairs are aligned to A's by id, whatever order B lists them in
    shuffled = table_cache(result.table, result.ontology, list(reversed(result.pair_ids)))
    plain = table_cache(result.table, result.ontology)
    assert np.array_equal(shuffled.values[::-1], plain.values)


def test_reward_is_the_registered_metrics_per_pair_value(example) -> None:
    pairs, result = example
    refs, cands = [p.reference for p in pairs], [p.candidate for p in pairs]
    errors = get_metric("spec-errors").score_pairs(refs, cands)
    assert ClinicalReward("neg-errors").score(refs, cands) == [-v for v in errors]
    f1 = get_metric("spec-presence-micro-f1").score_pairs(refs, cands)
    assert ClinicalReward("entity-f1").score(refs, cands) == [1.0 if np.isnan(v) else v for v in f1]
    stats = TableStatistics(result.table, result.ontology)
    weighted = ClinicalReward("critical-weighted", critical_weight=3).score(refs, cands)
    assert weighted == [-(e + 2 * c) for e, c in zip(stats.errors(), stats.critical_errors(), strict=True)]
    assert ClinicalReward("neg-errors").score_one(refs[0], cands[0]) == -errors[0]


def test_a_pair_not_judged_counts_in_no_number() -> None:
    """An LLM pair whose answer stayed unusable is in no statistic: not error-free, not wrong."""
    from cxreval.judge.table import JudgementTable

    ev = cxreval.Evaluator()
    table = ev.engine_runner.judge_texts(["Small left pleural effusion."], ["No effusion."]).table
    stats = TableStatistics(table, ev.ontology, ["0", "1"])  # pair "1" was not judged
    assert stats.judged.tolist() == [True, False]
    for name in ("spec-errors", "spec-report-error-free-rate", "spec-report-critical-error-free-rate"):
        m = table_metric(name)
        values = m.compute(m.table_stats(stats))
        assert np.isnan(values[1]) and m.compute(m.table_stats(stats).sum(axis=0, keepdims=True))[0] == values[0]
    assert stats.error_table().index.tolist() == ["0"]
    assert JudgementTable.empty().n_rows == 0


def test_bench_ranks_by_any_table_metric_and_refuses_its_options(tmp_path: Path) -> None:
    from cxreval.bench.config import BenchConfig

    base = {
        "name": "t",
        "datasets": [{"name": "d", "references": {"path": "r.csv"}}],
        "systems": [{"name": "s", "path": "s.csv"}],
    }
    cfg = BenchConfig.model_validate(
        {**base, "metrics": ["spec-errors", "spec-location-accuracy"], "rank_by": "spec-location-accuracy"}
    )
    assert cfg.rank_by == "spec-location-accuracy"
    with pytest.raises(ValueError, match="computed from the judgement table"):
        BenchConfig.model_validate(
            {
                **base,
                "metrics": ["spec-errors", "spec-location-accuracy"],
                "metric_options": {"spec-location-accuracy": {"uncertain": "negative"}},
            }
        )


def test_streamed_scores_json_equals_the_whole_list(example, tmp_path: Path) -> None:
    from cxreval.streaming import evaluate_stream

    pairs, result = example
    evaluate_stream(cxreval.Evaluator().judge_engine, iter(pairs), tmp_path / "s", chunk_pairs=3)
    result.save(tmp_path / "w")
    streamed = json.loads((tmp_path / "s" / "scores.json").read_text())
    whole = json.loads((tmp_path / "w" / "scores.json").read_text())
    assert streamed["metrics"] == whole["metrics"]


def test_statistics_refuse_a_table_whose_pairs_are_not_listed() -> None:
    """A table's judged pair missing from the pair ids would mark another pair judged."""
    from cxreval.judge.models import EntityJudgement
    from cxreval.judge.table import JudgementTable

    onto = cxreval.Evaluator().ontology
    row = EntityJudgement(pair_id="a", entity="pleural_effusion", presence="FN")
    table = JudgementTable.from_rows([row], ["a", "x"])  # "x": judged, error-free, no rows
    with pytest.raises(ValueError, match=r"not among them: \['x'\]"):
        TableStatistics(table, onto, ["a", "b", "c"])


def test_an_unknown_entity_counts_its_errors_but_no_entity_statistic() -> None:
    """A row of an entity the ontology does not know (an LLM engine's, an older ontology's) is an
    error of the pair (the rule reads no entity) but no entity's TP / FP / FN."""
    from cxreval.judge.models import EntityJudgement
    from cxreval.judge.table import JudgementTable

    onto = cxreval.Evaluator().ontology
    rows = [
        EntityJudgement(pair_id="a", entity="not_in_the_ontology", presence="FP"),
        EntityJudgement(pair_id="a", entity="pleural_effusion", presence="TP", location="not-aligned"),
    ]
    stats = TableStatistics(JudgementTable.from_rows(rows, ["a", "b"]), onto, ["a", "b", "c"])
    assert stats.judged.tolist() == [True, True, False]
    assert stats.errors().tolist() == [2, 0, 0]
    assert stats.entity_presence().sum(axis=0).tolist() == [1, 0, 0]
    assert table_metric("spec-errors").compute(stats.block("errors").sum(axis=0, keepdims=True))[0] == 1.0
    assert table_metric("spec-location-accuracy").compute(stats.total("location")[None])[0] == 0.0


def test_table_metric_options_are_checked_when_built_and_travel_whole() -> None:
    import pickle

    with pytest.raises(ValueError, match="needs llm"):
        get_metric("spec-errors", engine="llm-pairwise")
    with pytest.raises(ValueError, match="unknown uncertain policy"):
        get_metric("spec-location-accuracy", uncertain="bogus")
    m = get_metric("spec-errors", workers=2)
    back = pickle.loads(pickle.dumps(m))
    assert back.runner.engine.workers == 2 and str(back.signature) == str(m.signature)
    ev = cxreval.Evaluator(workers=3)
    assert pickle.loads(pickle.dumps(get_metric("spec-errors").from_runner(ev.engine_runner))).runner.engine.workers == 3
