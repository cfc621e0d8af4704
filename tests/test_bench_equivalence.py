"""Every SPEC number bench reports equals the number evaluate() computes on the same pairs.

Issue 12: bench, the page and evaluate take their SPEC numbers from one module
(:func:`cxreval.scores.spec_scores`); this holds them to it on the ReXrank IU X-ray config and on
a synthetic benchmark with several systems, for every stratum of the leaderboards.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import cxreval
from cxreval.bench.config import load_config
from cxreval.bench.runner import load_candidates, load_dataset, run_benchmark
from cxreval.cli import example_path
from cxreval.io import ReportPair, read_pairs
from cxreval.scores import ran_score
from tests.conftest import shared_data_dir

REPO = Path(__file__).resolve().parents[1]
LEADERBOARD = {
    "spec-errors": "errors_per_report_mean",
    "spec-presence-macro-f1": "presence_macro_f1",
    "spec-presence-micro-f1": "presence_micro_f1",
}


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or math.isnan(a)) and b is None
    return a == b  # one function computes both: equal to the last bit, not approximately


def _check(config_path: Path, out: Path) -> int:
    cfg = load_config(config_path)
    cfg = cfg.model_copy(update={"bootstrap": cfg.bootstrap.model_copy(update={"resamples": 10})})
    result, _ = run_benchmark(cfg, out)
    checked = 0
    for ds in cfg.datasets:
        ids, refs, _sites, _normal = load_dataset(ds)
        for system in cfg.systems:
            cands = load_candidates(system, ids, refs, ds.name)
            pairs = [ReportPair(pair_id=i, reference=r, candidate=c) for i, r, c in zip(ids, refs, cands)]
            full = cxreval.evaluate(pairs)
            positive = {j.pair_id for j in full.judgements if j.presence in ("TP", "FN")}
            strata = {
                "all": pairs,
                "normal": [p for p in pairs if p.pair_id not in positive],
                "abnormal": [p for p in pairs if p.pair_id in positive],
            }
            for stratum, subset in strata.items():
                if not subset:
                    continue
                ev = {m["name"]: m["value"] for m in cxreval.evaluate(subset).metrics()}
                board = next(b for b in result.leaderboards if b.dataset == ds.name and b.stratum == stratum)
                row = next(r for r in board.rows if r.system == system.name)
                assert row.n_pairs == len(subset)
                for bench_name, name in LEADERBOARD.items():
                    assert _same(row.metrics[bench_name].value, ev[name]), (system.name, stratum, bench_name)
                assert _same(row.error_free.value, ev["error_free_rate"]), (system.name, stratum)
                assert _same(row.critical_error_free.value, ev["critical_error_free_rate"]), (system.name, stratum)
                if "ran-score" in cfg.metrics:  # a label metric through the Metric interface
                    evaluator = cxreval.Evaluator()
                    want = ran_score(evaluator, subset, evaluator.ontology).macro_f1
                    assert _same(row.metrics["ran-score"].value, want), (system.name, stratum)
                checked += 1
            summary = next(s for s in result.summaries if s.system == system.name and s.dataset == ds.name)
            every = {m["name"]: m["value"] for m in full.metrics()}
            assert set(summary.values) == set(every)
            assert all(_same(summary.values[k], every[k]) for k in every), system.name
            ents = {e.entity: e for e in result.entities if e.system == system.name and e.dataset == ds.name}
            for e in full.entities:
                p = e.presence
                if p.tp + p.fp + p.fn == 0:
                    assert e.entity not in ents
                    continue
                b = ents[e.entity]
                assert (b.tp, b.fp, b.fn) == (p.tp, p.fp, p.fn)
                assert _same(b.f1, p.f1) and _same(b.location_acc, e.location.accuracy)
                assert _same(b.severity_acc, e.severity.accuracy) and _same(b.comparison_acc, e.comparison.accuracy)
            groups = {g.group: g for g in result.groups if g.system == system.name and g.dataset == ds.name}
            for g in full.groups:
                assert _same(groups[g.group].f1, g.presence.f1) and groups[g.group].support == g.presence.support
    return checked


def test_synthetic_benchmark_numbers_equal_evaluate(tmp_path: Path) -> None:
    pairs = read_pairs(example_path())
    with (tmp_path / "refs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "report"])
        w.writerows((p.pair_id, p.reference) for p in pairs)
    shuffled = [pairs[(i * 7 + 3) % len(pairs)].candidate for i in range(len(pairs))]
    for name, texts in (
        ("A", [p.candidate for p in pairs]),
        ("B", shuffled),
        ("C", [p.reference if i % 3 == 0 else p.candidate for i, p in enumerate(pairs)]),
    ):
        with (tmp_path / f"{name}.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "report"])
            w.writerows((p.pair_id, t) for p, t in zip(pairs, texts))
    (tmp_path / "bench.yaml").write_text(
        "name: synthetic\nmetrics: [spec-errors, ran-score]\n"
        "datasets: [{name: example, references: {path: refs.csv, text_col: report}}]\n"
        "systems:\n"
        + "".join(f"  - {{name: {n}, path: {n}.csv}}\n" for n in "ABC")
        + "  - {name: normal-template, baseline: normal-template}\n"
    )
    assert _check(tmp_path / "bench.yaml", tmp_path / "out") == 4 * 3


def test_old_names_of_derived_metrics_are_still_read(tmp_path: Path) -> None:
    from cxreval.bench.config import BenchConfig

    base = {
        "name": "x",
        "datasets": [{"name": "d", "references": {"path": "r.csv"}}],
        "systems": [{"name": "s", "baseline": "normal-template"}],
    }
    assert BenchConfig.model_validate({**base, "rank_by": "presence-macro-f1"}).rank_by == "spec-presence-macro-f1"
    with pytest.raises(ValueError, match="computed from the judgements"):
        BenchConfig.model_validate({**base, "metrics": ["spec-errors", "spec-presence-micro-f1"]})


@pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")
def test_rexrank_iu_leaderboard_numbers_equal_evaluate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXREVAL_DATA_DIR", str(shared_data_dir()))
    assert _check(REPO / "benchmarks" / "configs" / "rexrank_iu_test.yaml", tmp_path / "out") >= 4 * 2
