"""cxreval bench: config, cached runner, analyses, tables, CLI (small fixtures written here)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import typer
import yaml
from typer.testing import CliRunner

from cxreval.bench import BenchmarkResult
from cxreval.bench.analysis import _ranks, correlations
from cxreval.bench.config import NORMAL_TEMPLATE, load_config
from cxreval.bench.runner import run_benchmark
from cxreval.bench.tables import leaderboard_latex, leaderboard_markdown, write_tables
from cxreval.io import InputError
from tests.conftest import shared_data_path

REFS = {
    "s1": ("Small left pleural effusion. The heart is normal in size.", "A", "0"),
    "s2": ("The lungs are clear. No pneumothorax.", "A", "1"),
    "s3": ("Moderate cardiomegaly. No pleural effusion.", "A", "0"),
    "s4": ("Large right pneumothorax.", "B", "0"),
    "s5": ("Heart size is normal. The lungs are clear.", "B", "1"),
    "s6": ("Right lower lobe atelectasis, unchanged from prior.", "B", "0"),
    "s7": ("No acute cardiopulmonary abnormality.", "B", "1"),
    "s8": ("Mild cardiomegaly. Small bilateral pleural effusions.", "A", "0"),
}
GOOD = {
    "s1": "Small left pleural effusion. Normal heart size.",
    "s2": "Lungs are clear. No pneumothorax.",
    "s3": "Moderate cardiomegaly. No effusion.",
    "s4": "Large right pneumothorax.",
    "s5": "Normal heart size. Clear lungs.",
    "s6": "Right lower lobe atelectasis.",
    "s7": "No acute cardiopulmonary abnormality.",
    "s8": "Mild cardiomegaly. Small bilateral pleural effusions.",
}
BAD = {
    "s1": "The lungs are clear.",
    "s2": "Small right pleural effusion.",
    "s3": "No acute disease.",
    "s4": "No pneumothorax.",
    "s5": "Large left pneumothorax.",
    "s6": "No acute disease.",
    "s7": "Moderate cardiomegaly.",
    "s8": "The lungs are clear.",
}


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture()
def bench_dir(tmp_path: Path) -> Path:
    _write(tmp_path / "refs.csv", ["id", "report"], [[k, v[0]] for k, v in REFS.items()])
    _write(tmp_path / "meta.csv", ["id", "site", "normal"], [[k, v[1], v[2]] for k, v in REFS.items()])
    _write(tmp_path / "good.csv", ["study", "text"], [[k, v] for k, v in GOOD.items()])
    _write(tmp_path / "bad.csv", ["study", "text"], [[k, v] for k, v in BAD.items()])
    cfg = {
        "name": "tiny",
        "out": str(tmp_path / "out"),
        "metrics": ["spec-errors", "bleu2", "rouge-l", "bleu4-corpus"],
        "rank_by": "spec-errors",
        "bootstrap": {"resamples": 200, "seed": 3},
        "datasets": [
            {
                "name": "tiny-set",
                "references": {"path": "refs.csv"},
                "metadata": {"path": "meta.csv", "site_col": "site", "normal_col": "normal"},
                "normal_from": "metadata",
            }
        ],
        "systems": [
            {"name": "good", "path": "good.csv", "id_col": "study", "text_col": "text"},
            {"name": "bad", "path": "bad.csv", "id_col": "study", "text_col": "text"},
            {"name": "template", "baseline": "normal-template"},
            {"name": "oracle", "baseline": "copy-reference"},
        ],
    }
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path


def _set_systems(d: Path, names: list[str]) -> Path:
    cfg = yaml.safe_load((d / "bench.yaml").read_text())
    cfg["systems"] = [s for s in cfg["systems"] if s["name"] in names]
    p = d / f"bench-{len(names)}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_leaderboard_ranks_strata_sites_and_rates(bench_dir: Path) -> None:
    cfg = load_config(bench_dir / "bench.yaml")
    result, stats = run_benchmark(cfg)
    assert result.systems == ["good", "bad", "template", "oracle"]
    assert result.baselines == ["template", "oracle"]
    lb = result.leaderboard("tiny-set")
    order = [r.system for r in lb.rows]
    assert order[0] == "oracle" and order[-1] == "bad"
    oracle = lb.rows[0]
    assert oracle.metrics["spec-errors"].value == 0.0
    assert oracle.metrics["bleu2"].value == pytest.approx(1.0)
    assert oracle.metrics["bleu4-corpus"].value == pytest.approx(1.0)
    assert oracle.error_free is not None and oracle.error_free.value == 1.0
    assert oracle.n_pairs == 8 and oracle.rank == oracle.rank_low == 1
    bad = next(r for r in lb.rows if r.system == "bad")
    assert bad.metrics["spec-errors"].value > 1
    # s4 misses a pneumothorax (critical) and s5 adds one
    assert bad.critical_error_free is not None and bad.critical_error_free.value == pytest.approx(6 / 8)
    for r in lb.rows:
        for iv in r.metrics.values():
            if iv.value is not None and iv.low is not None:
                assert iv.low <= iv.value + 1e-9 and iv.value <= iv.high + 1e-9  # type: ignore[operator]
        assert r.rank_low <= r.rank <= r.rank_high or r.rank_low <= r.rank_high
    strata = {b.stratum: b.n_pairs for b in result.leaderboards}
    assert strata == {"all": 8, "normal": 3, "abnormal": 5, "site:A": 4, "site:B": 4}
    # a stratum of fewer than MIN_PAIRS_FOR_INTERVAL (5) studies gets no interval; the others do
    for board in result.leaderboards:
        ivs = [iv for r in board.rows for iv in r.metrics.values() if iv.value is not None]
        few = board.n_pairs < 5
        assert all((iv.low is None and iv.high is None) == few for iv in ivs), board.stratum
        assert not few or all(r.rank_low == r.rank == r.rank_high for r in board.rows)
    cells = [c for c in result.sites if c.metric == "spec-errors" and c.site == "B"]
    assert len(cells) == 4 and min(c.rank for c in cells if c.rank is not None) == 1
    assert stats.pairs == 32 and stats.failed == 0
    # metric infos: direction and signature for every metric shown
    info = {m.name: m for m in result.metrics}
    assert info["spec-errors"].higher_is_better is False
    assert "metric:spec-report-errors-mean|" in info["spec-errors"].signature
    assert info["bleu4-corpus"].level == "corpus"
    assert set(oracle.metrics) == set(info)


def test_entities_groups_examples_and_correlations(bench_dir: Path) -> None:
    result, _ = run_benchmark(load_config(bench_dir / "bench.yaml"))
    bad = {e.entity: e for e in result.entities if e.system == "bad"}
    pt = bad["pneumothorax"]
    assert pt.critical and pt.fn == 1 and pt.fp == 1 and pt.tp == 0
    kinds = {x.kind: x for x in pt.examples}
    assert kinds["FN"].pair_id == "s4" and "pneumothorax" in kinds["FN"].reference.lower()
    assert kinds["FP"].pair_id == "s5" and "pneumothorax" in kinds["FP"].candidate.lower()
    good = {e.entity: e for e in result.entities if e.system == "good"}
    assert good["cardiomegaly"].tp == 2 and good["cardiomegaly"].f1 == 1.0
    oracle_groups = [g for g in result.groups if g.system == "oracle" and g.support > 0]
    assert oracle_groups and all(g.f1 == 1.0 for g in oracle_groups)
    methods = {c.method: c for c in result.correlations}
    assert set(methods) == {"pearson", "kendall"}
    p = methods["pearson"]
    assert p.metrics == ["spec-errors", "bleu2", "rouge-l", "bleu4-corpus"]
    m = np.array([[np.nan if v is None else v for v in row] for row in p.matrix])
    assert np.allclose(np.diag(m), 1.0) and np.allclose(m, m.T, equal_nan=True)
    assert m[1, 2] > 0.5  # BLEU-2 and ROUGE-L agree
    assert p.n == 16  # two non-baseline systems x 8 studies


def test_cache_rerun_judges_nothing_and_a_new_system_only_itself(bench_dir: Path) -> None:
    two = load_config(_set_systems(bench_dir, ["good", "bad"]))
    _, first = run_benchmark(two)
    assert first.judged == 16 and first.judgement_hits == 0
    assert first.metric_computed["bleu2"] == 16
    _, again = run_benchmark(two)
    assert again.judged == 0 and again.judgement_hits == 16
    assert again.metric_computed == {"bleu2": 0, "rouge-l": 0, "bleu4-corpus": 0}
    three = load_config(_set_systems(bench_dir, ["good", "bad", "template"]))
    _, added = run_benchmark(three)
    assert added.judged == 8 and added.judgement_hits == 16
    assert added.metric_computed["rouge-l"] == 8
    assert (Path(two.out) / "cache.sqlite").exists()


def test_cached_and_fresh_results_agree(bench_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(bench_dir / "bench.yaml")
    a, _ = run_benchmark(cfg)
    b, stats = run_benchmark(cfg)
    assert stats.judged == 0
    assert a.leaderboards == b.leaderboards and a.entities == b.entities


def test_normal_flag_from_findings(bench_dir: Path) -> None:
    cfg = yaml.safe_load((bench_dir / "bench.yaml").read_text())
    cfg["datasets"][0]["normal_from"] = "findings"
    del cfg["datasets"][0]["metadata"]["normal_col"]
    p = bench_dir / "findings.yaml"
    p.write_text(yaml.safe_dump(cfg))
    result, _ = run_benchmark(load_config(p))
    strata = {b.stratum: b.n_pairs for b in result.leaderboards}
    assert strata["normal"] == 3 and strata["abnormal"] == 5
    assert any("normal = the reference states no positive entity" in n for n in result.notes)


def test_bad_inputs_are_listed(bench_dir: Path) -> None:
    _write(bench_dir / "short.csv", ["study", "text"], [["s1", "No effusion."]])
    cfg = yaml.safe_load((bench_dir / "bench.yaml").read_text())
    cfg["systems"].append({"name": "short", "path": "short.csv", "id_col": "study", "text_col": "text"})
    cfg["systems"].append({"name": "wrongcol", "path": "good.csv", "id_col": "nope", "text_col": "text"})
    p = bench_dir / "bad.yaml"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InputError) as err:
        run_benchmark(load_config(p))
    text = str(err.value)
    assert "short.csv" in text and "7 of the 8 studies" in text
    assert "nope" in text
    cfg["systems"] = [{"name": "x", "path": "good.csv", "baseline": "copy-reference"}]
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InputError, match="exactly one of path or baseline"):
        load_config(p)
    cfg["systems"] = [{"name": "x", "baseline": "copy-reference"}]
    cfg["rank_by"] = "meteor"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InputError, match="rank_by"):
        load_config(p)
    p.write_text("name: [unclosed")
    with pytest.raises(InputError, match="invalid YAML"):
        load_config(p)


def test_tables_json_round_trip(bench_dir: Path, tmp_path: Path) -> None:
    result, _ = run_benchmark(load_config(bench_dir / "bench.yaml"))
    paths = write_tables(result, tmp_path / "tables")
    back = BenchmarkResult.model_validate_json(paths["json"].read_text())
    assert back == result
    with paths["leaderboards"].open() as fh:
        rows = list(csv.DictReader(fh))
    n_metrics = len(result.metrics)
    assert len(rows) == sum(len(lb.rows) for lb in result.leaderboards) * n_metrics
    oracle = [r for r in rows if r["system"] == "oracle" and r["stratum"] == "all" and r["metric"] == "spec-errors"]
    assert oracle[0]["value"] == "0.000000" and oracle[0]["rank"] == "1"
    tex = (paths["latex"] / "leaderboard_tiny-set_all.tex").read_text()
    assert r"\begin{tabular}" in tex and "oracle (baseline)" in tex and r"$\downarrow$" in tex
    md = leaderboard_markdown(result, result.leaderboard("tiny-set"), ["spec-errors", "bleu2"])
    assert md.splitlines()[2].startswith("| 1 | oracle (baseline) | 8 | 0.000 [0.000, 0.000] | 1.000")
    assert "n/a" not in leaderboard_latex(result, result.leaderboard("tiny-set"))
    assert paths["entities"].read_text().count("\n") > 1


def test_ranks_helper() -> None:
    theta = np.array([[0.5, 0.2], [0.7, 0.2], [np.nan, 0.9]])
    assert _ranks(theta, higher=True).tolist() == [[2, 2], [1, 2], [3, 1]]
    assert _ranks(theta, higher=False).tolist() == [[1, 1], [2, 1], [3, 3]]


def test_correlations_need_variation() -> None:
    out = correlations("d", {"a": np.array([1.0, 2, 3, 4]), "b": np.array([2.0, 4, 6, 9]), "c": np.ones(4)})
    p = out[0].matrix
    assert p[0][1] == pytest.approx(np.corrcoef([1, 2, 3, 4], [2, 4, 6, 9])[0, 1])
    assert p[0][2] is None and p[2][2] is None
    assert out[1].matrix[0][1] == pytest.approx(1.0)


def test_cli_writes_outputs(bench_dir: Path, tmp_path: Path) -> None:
    from cxreval.cli.bench import bench

    app = typer.Typer()
    app.command("bench")(bench)
    app.command("other")(lambda: None)
    out = tmp_path / "cli-out"
    res = CliRunner().invoke(app, ["bench", str(bench_dir / "bench.yaml"), "--out", str(out), "--resamples", "50", "--no-html"])
    assert res.exit_code == 0, res.output
    assert "oracle" in res.output and "judged now" in res.output
    data = json.loads((out / "result.json").read_text())
    assert data["name"] == "tiny" and data["primary_metric"] == "spec-errors"
    assert (out / "leaderboards.csv").exists() and (out / "latex").is_dir()
    bad = CliRunner().invoke(app, ["bench", str(bench_dir / "missing.yaml")])
    assert bad.exit_code == 2


def test_normal_template_default_text_has_no_finding() -> None:
    from cxreval import Evaluator, ReportPair

    rows = Evaluator().judge(ReportPair(pair_id="x", reference=NORMAL_TEMPLATE, candidate=NORMAL_TEMPLATE))
    assert all(r.presence == "TN" for r in rows)


@pytest.mark.skipif(
    not (shared_data_path() / "rexrank-iu" / "ReXRank_IUXray_test.json").exists(), reason="../shared/data not available"
)
def test_rexrank_iu_config(tmp_path: Path) -> None:
    cfg = load_config(Path(__file__).resolve().parents[1] / "benchmarks" / "configs" / "rexrank_iu_test.yaml")
    cfg = cfg.model_copy(update={"bootstrap": cfg.bootstrap.model_copy(update={"resamples": 100})})
    result, stats = run_benchmark(cfg, tmp_path)
    lb = result.leaderboard("iu-xray-test")
    rows = {r.system: r for r in lb.rows}
    retrieval = {"random-train", "retrieval-oracle", "oracle-noise-0.1", "oracle-noise-0.3"}
    assert set(rows) == {"MoERad", "CvT2DistilGPT2", "normal-template", "copy-reference", *retrieval}
    assert all(r.n_pairs == 590 for r in lb.rows)
    assert rows["MoERad"].metrics["bleu2"].value == pytest.approx(0.2704, abs=5e-5)  # ReXrank / MoERad README
    assert rows["copy-reference"].rank == 1
    assert stats.pairs == 8 * 590
    # issue 16: the retrieval oracle gives the page entity-level figures (the two models write normal reports)
    tp = {e.entity for e in result.entities if e.system == "retrieval-oracle" and e.tp > 0}
    assert len(tp) >= 20
    assert not [e for e in result.entities if e.system in ("MoERad", "CvT2DistilGPT2") and e.tp > 0]
    f1 = {r.system: r.metrics["spec-presence-micro-f1"].value for r in lb.rows}
    assert f1["retrieval-oracle"] > f1["oracle-noise-0.3"] > f1["random-train"]
    abnormal = {r.system: r.error_free.value for r in result.leaderboard("iu-xray-test", "abnormal").rows}
    assert abnormal["retrieval-oracle"] > abnormal["MoERad"] == 0.0


def test_the_terminal_leaderboard_fits_80_columns_without_cutting_a_number(bench_dir: Path) -> None:
    from rich.console import Console

    from cxreval.cli.bench import print_leaderboard

    result, _ = run_benchmark(load_config(bench_dir / "bench.yaml"))
    board = result.leaderboards[0]
    console = Console(width=80, record=True)
    print_leaderboard(result, board, console)
    screen = console.export_text()
    assert max(len(line) for line in screen.splitlines()) <= 80
    table_rows = [line for line in screen.splitlines() if line.startswith("│")]
    assert len(table_rows) == len(board.rows)
    for line in table_rows:  # only the system's name may end in an ellipsis; every number is whole
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert all("…" not in c for c in cells[1:])
        assert all(re.fullmatch(r"[\d.\[\], ()-]+|n/a", c) for c in cells[2:])
    ranked_by = next(m for m in result.metrics if m.name == board.rank_by)
    assert ranked_by.label in screen  # the ranking metric is kept first
    if "not shown at this width" in screen:
        assert "leaderboards.csv" in screen
