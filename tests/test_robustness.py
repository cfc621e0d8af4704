"""Discrimination / robustness scoring, the two-pass LLM judge on the loopback server, the HTML section."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cxreval.cli.meta import meta_app
from cxreval.evaluate import Evaluator
from cxreval.llm import LLMConfig
from cxreval.meta.judge_passes import LLMJudgeMetric
from cxreval.meta.page_section import bar_chart_svg, render_page
from cxreval.meta.perturb import PerturbationSuite, PerturbedPair, read_suite, write_suite
from cxreval.meta.robustness import (
    EvaluatorMetric,
    Share,
    failures,
    format_table,
    penalised,
    score_suite,
)
from cxreval.metrics import available_metrics, get_metric
from cxreval.scores.resampling import clopper_pearson
from cxreval.scores.signature import Signature
from cxreval.testing.loopback import LoopbackServer

REPORTS = [
    (
        "a",
        "Findings: The heart is mildly enlarged. Small left pleural effusion. No pneumothorax. "
        "The lungs are clear. Impression: Mild cardiomegaly.",
    ),
    (
        "b",
        "Findings: Right upper lobe consolidation. No pleural effusion. Heart size is normal. "
        "Impression: Right upper lobe pneumonia.",
    ),
    ("c", "Findings: Moderate right pneumothorax. The heart is normal in size. Impression: Moderate right pneumothorax."),
]


class LengthMetric:
    """A real (if silly) metric: absolute difference in word count; lower is better."""

    name = "length-diff"
    higher_is_better = False
    signature = Signature(metric="length-diff", ontology="none", engine="none")

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return np.array([abs(len(r.split()) - len(c.split())) for r, c in zip(references, candidates)], float)


@pytest.fixture(scope="module")
def pairs() -> list[PerturbedPair]:
    return PerturbationSuite(seed=1).build(REPORTS)


def test_penalised_compares_with_the_identity_pair() -> None:
    assert penalised(np.array([0.5, 1.0, np.nan]), np.array([1.0, 1.0, 1.0]), True).tolist() == [True, False, False]
    assert penalised(np.array([2.0, 0.0]), np.array([0.0, 0.0]), False).tolist() == [True, False]
    # an identity score that is not the metric's best still serves as the baseline
    assert penalised(np.array([3.0]), np.array([3.0]), False).tolist() == [False]


def test_share_uses_clopper_pearson() -> None:
    s = Share.of(7, 9)
    lo, hi = clopper_pearson(7, 9)
    assert (s.rate, s.low, s.high) == (pytest.approx(7 / 9), pytest.approx(float(lo)), pytest.approx(float(hi)))
    assert Share.of(0, 0).rate is None


def test_rule_engine_on_written_reports(pairs: list[PerturbedPair]) -> None:
    report, runs = score_suite(pairs, [EvaluatorMetric(), LengthMetric()])
    rule, length = runs
    sig = report.row("spec-errors", "overall-significant")
    ins = report.row("spec-errors", "overall-insignificant")
    # one of the 19 "significant" edits omits "Right upper lobe consolidation." from a report whose
    # impression keeps "Right upper lobe pneumonia.": pneumonia is-a consolidation (CheXpert), so
    # the finding is still reported at its place and the finding hierarchy rightly counts no error;
    # the generalised consolidation and the over-specified pneumothorax are caught on their entity
    assert (sig.discrimination.k, sig.discrimination.n) == (18, 19) and sig.right_entity.rate == 18 / 19
    assert report.row("spec-errors", "generalise").right_entity.rate == 1.0
    assert report.row("spec-errors", "over_specify").right_entity.rate == 1.0
    assert [(p.perturbation, p.target_entity) for p in failures(rule, pairs)] == [("omit_finding", "consolidation")]
    assert ins.robustness.rate == 1.0
    # the length metric has no entity rows and misses flips (same words count)
    assert report.row("length-diff", "flip_laterality").discrimination.rate == 0.0
    assert report.row("length-diff", "flip_laterality").right_entity is None
    assert report.row("length-diff", "change_case").robustness.rate == 1.0
    assert report.row("length-diff", "omit_finding").discrimination.rate == 1.0
    assert {p.perturbation for p in failures(length, pairs)} >= {"flip_laterality", "synonym_swap"}
    table = format_table(report)
    assert "| flip_laterality | yes |" in table and "1.000 (1.000)" in table


def test_right_entity_is_checked(pairs: list[PerturbedPair]) -> None:
    # retarget every significant pair to an entity the reports never mention: still penalised,
    # but never on the right entity
    wrong = [p.model_copy(update={"target_entity": "hiatal_hernia"}) if p.significant else p for p in pairs]
    report, _ = score_suite(wrong, [EvaluatorMetric()])
    row = report.row("spec-errors", "overall-significant")
    assert row.discrimination.rate == 18 / 19 and row.right_entity.rate == 0.0  # the one implied omission aside


@pytest.mark.skipif("bleu2" not in available_metrics(), reason="lexical metrics not installed")
def test_lexical_metrics_penalise_rewording(pairs: list[PerturbedPair]) -> None:
    report, _ = score_suite(pairs, [get_metric("bleu2"), get_metric("rouge-l")])
    assert report.row("bleu2", "overall-significant").discrimination.rate == 1.0
    assert report.row("bleu2", "synonym_swap").robustness.rate == 0.0


def test_one_pass_and_two_pass_llm_on_loopback(tmp_path: Path, pairs: list[PerturbedPair]) -> None:
    with LoopbackServer() as srv:
        cfg = LLMConfig(
            base_url=srv.base_url, model="loopback", local_only=True, timeout=10.0, cache_path=tmp_path / "answers.sqlite"
        )
        one, two = LLMJudgeMetric(cfg, passes=1), LLMJudgeMetric(cfg, passes=2)
        # the pairwise LLM judges flat (SPEC-CXR's prompt): compared with the flat rule engine
        report, runs = score_suite(pairs, [EvaluatorMetric(Evaluator(hierarchy=False)), one, two])
        verify = [e for e in srv.log if e["reask"]]
        n_calls = len(srv.log)
        # the loopback answers both passes with the rule engine's reading: identical outcomes
        assert runs[1].scores == runs[0].scores == runs[2].scores
        assert runs[2].right_entity == runs[0].right_entity
        # one verification call per distinct pair: the suite's pairs plus each identity pair
        distinct = {(p.reference, p.candidate) for p in pairs} | {(r, r) for _, r in REPORTS}
        assert len(verify) == len(distinct)
        assert "verify@2" in str(two.signature) and "passes:2" in str(two.signature)
        # a rerun is answered from the cache, verification included
        score_suite(pairs, [two])
        assert len(srv.log) == n_calls
    assert report.row("llm-pairwise-2pass", "overall-significant").right_entity.rate == 1.0


def test_html_section_is_self_contained(pairs: list[PerturbedPair]) -> None:
    report, _ = score_suite(pairs, [EvaluatorMetric(), LengthMetric()])
    page = render_page(report)
    assert "<svg" in page and "flip_laterality" in page and "length-diff" in page
    assert not re.search(r"(src|href)=[\"']https?://", page)
    assert "<script src" not in page and "<link" not in page
    svg = str(bar_chart_svg(report))
    assert svg.count("<rect") >= len(report.metrics) * 6


def test_cli_perturb_and_score(tmp_path: Path) -> None:
    refs = tmp_path / "refs.csv"
    with refs.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference"])
        w.writerows(REPORTS)
    suite = tmp_path / "suite.jsonl"
    res = CliRunner().invoke(meta_app, ["perturb", "--refs", str(refs), "--out", str(suite), "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert read_suite(suite) == PerturbationSuite(seed=1).build(REPORTS)
    html, out = tmp_path / "m.html", tmp_path / "m.json"
    res = CliRunner().invoke(meta_app, ["score", str(suite), "-m", "spec-errors", "--html", str(html), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "| omit_finding | yes |" in res.output and html.is_file() and out.is_file()
    res = CliRunner().invoke(meta_app, ["score", str(suite), "-m", "spec-errors", "--table", "csv"])
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(res.stdout)))  # stdout is the CSV alone; the legend went to stderr
    assert rows[0] == ["type", "sig.", "n", "spec-errors"] and ["omit_finding", "yes"] == rows[1][:2]
    assert "cells: discrimination" in res.stderr
    res = CliRunner().invoke(meta_app, ["score", str(suite), "--table", "html"])
    assert res.exit_code != 0 and "--table 'html'" in res.output


def test_cli_score_takes_the_generated_llm_options(tmp_path: Path) -> None:
    """``meta score``'s LLM options come from LLMConfig's fields (cxreval.cli.llm_options) and reach the judge."""
    suite = tmp_path / "suite.jsonl"
    write_suite(PerturbationSuite(seed=1).build(REPORTS[:2]), suite)
    out = tmp_path / "m.json"
    with LoopbackServer() as srv:
        args = ["score", str(suite), "-m", "llm-pairwise", "--base-url", srv.base_url, "--model", "loopback"]
        args += ["--local-only", "--timeout", "10", "--concurrency", "2", "--cache", str(tmp_path / "a.sqlite")]
        res = CliRunner().invoke(meta_app, [*args, "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert srv.log and all(e["params"].get("temperature", 0) == 0 for e in srv.log)
    assert (tmp_path / "a.sqlite").is_file() and "llm-pairwise" in out.read_text(encoding="utf-8")
