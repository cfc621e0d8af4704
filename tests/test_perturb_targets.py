"""Target variants of the perturbation suite: ``mesh`` (human MeSH codes, word search) and ``engine``.

Reports and MeSH fields here are written for the tests (no IU X-ray text).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cxreval.cli.meta import meta_app
from cxreval.meta.perturb import (
    INSIGNIFICANT,
    SIGNIFICANT,
    PerturbationSuite,
    PerturbedPair,
    read_suite,
    suite_summary_by_targets,
    write_suite,
)
from cxreval.meta.robustness import EvaluatorMetric, format_table, score_suite
from cxreval.scores.signature import Signature

# "Calcinosis" is the coders' MeSH heading, not an ontology term: the rule engine reads nothing there.
CALC = "Findings: Calcinosis in the right hilum. No pneumothorax. The heart is normal in size."
CALC_MESH = "Calcinosis/lung/hilum/right"
EFF = "Findings: The heart is mildly enlarged. Small left pleural effusion. No pneumothorax. Impression: Mild cardiomegaly."
EFF_MESH = "Cardiomegaly/mild;Pleural Effusion/left/small"


@pytest.fixture(scope="module")
def suite() -> PerturbationSuite:
    return PerturbationSuite(seed=0, per_type=10)


def sig(pairs: list[PerturbedPair], targets: str, ptype: str | None = None) -> list[PerturbedPair]:
    return [p for p in pairs if p.significant and p.targets == targets and ptype in (None, p.perturbation)]


def test_mesh_targets_a_coded_finding_the_engine_does_not_read(suite: PerturbationSuite) -> None:
    extraction = suite.extractor.extract(CALC)
    assert "calcified_lymph_nodes" not in {m.entity for m in extraction.mentions}  # the engine misses it
    pairs = suite.perturb("c", CALC, CALC_MESH)
    # engine targets: nothing to omit, negate or flip
    assert not [p for p in sig(pairs, "engine") if p.perturbation != "add_finding"]
    (omit,) = sig(pairs, "mesh", "omit_finding")
    assert omit.target_entity == "calcified_lymph_nodes" and omit.expected == "FN"
    assert omit.before == "Calcinosis in the right hilum."
    assert omit.candidate == "Findings: No pneumothorax. The heart is normal in size."
    assert omit.pair_id == "c:omit_finding:mesh:1"
    (neg,) = sig(pairs, "mesh", "negate_finding")
    assert neg.candidate == CALC.replace("Calcinosis in the right hilum.", "No calcified lymph nodes.")
    (flip,) = sig(pairs, "mesh", "flip_laterality")
    assert flip.candidate == CALC.replace("right hilum", "left hilum") and (flip.before, flip.after) == ("right", "left")


def test_mesh_sentences_are_found_by_word_search_on_ontology_names(suite: PerturbationSuite) -> None:
    pairs = suite.perturb("e", EFF, EFF_MESH)
    omit = {p.target_entity: p for p in sig(pairs, "mesh", "omit_finding")}
    assert set(omit) == {"cardiomegaly", "pleural_effusion"}
    assert omit["pleural_effusion"].candidate == EFF.replace("Small left pleural effusion. ", "")
    # both sentences naming cardiomegaly (an ontology name, "heart is mildly enlarged", and the term) go
    engine = {p.target_entity: p for p in sig(pairs, "engine", "omit_finding")}
    assert omit["cardiomegaly"].before == engine["cardiomegaly"].before == "The heart is mildly enlarged. Mild cardiomegaly."
    (sev,) = [p for p in sig(pairs, "mesh", "change_severity") if p.target_entity == "pleural_effusion"]
    assert sev.candidate == EFF.replace("Small left", "Large left")


def test_mesh_needs_a_stated_clean_target(suite: PerturbationSuite) -> None:
    # coded but denied in the text: no target
    assert not sig(suite.perturb("n", "Findings: No pleural effusion. Heart normal.", "Pleural Effusion"), "mesh", "omit_finding")
    # a denial in another clause does not reach it
    text = "Findings: Small left pleural effusion, no pneumothorax. Heart normal."
    (p,) = sig(suite.perturb("m", text, "Pleural Effusion/left/small"), "mesh", "omit_finding")
    assert p.target_entity == "pleural_effusion"
    # a sentence that states another coded finding is not removed for one of them
    text = "Findings: Small left pleural effusion and left basilar atelectasis. No pneumothorax."
    pairs = suite.perturb("t", text, "Pleural Effusion/left/small;Pulmonary Atelectasis/base/left")
    assert not sig(pairs, "mesh", "omit_finding") and not sig(pairs, "mesh", "negate_finding")


def test_variants_are_labelled_and_insignificant_pairs_shared(suite: PerturbationSuite, tmp_path: Path) -> None:
    pairs = suite.perturb("e", EFF, EFF_MESH)
    assert {p.targets for p in pairs if p.significant} == {"mesh", "engine"}
    assert {p.targets for p in pairs if not p.significant} == {"shared"}
    assert len({p.pair_id for p in pairs}) == len(pairs)
    counts = suite_summary_by_targets(pairs)
    assert counts["omit_finding"] == {"mesh": 2, "engine": 2}
    assert set(counts["change_case"]) == {"shared"}
    # no MeSH field: engine targets only; engine-only suites name their variants in the signature
    assert {p.targets for p in suite.perturb("e", EFF) if p.significant} == {"engine"}
    assert "targets:mesh+engine" in suite.signature
    only = PerturbationSuite(seed=0, targets=["engine"])
    assert "targets:engine|" in only.signature
    assert {p.targets for p in only.perturb("e", EFF, EFF_MESH) if p.significant} == {"engine"}
    with pytest.raises(ValueError, match="target variants"):
        PerturbationSuite(targets=["human"])  # type: ignore[list-item]
    for name in ("s.jsonl", "s.csv"):
        assert read_suite(write_suite(pairs, tmp_path / name)) == pairs
    # a version-1 suite (no targets column) reads as engine targets
    old = tmp_path / "old.csv"
    rows = [{k: v for k, v in p.model_dump().items() if k != "targets"} for p in pairs[:3]]
    with old.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    assert {p.targets for p in read_suite(old)} == {"engine"}


class WordCount:
    name = "word-count"
    higher_is_better = False
    signature = Signature(metric="word-count", ontology="none", engine="none")

    def score_pairs(self, references, candidates) -> np.ndarray:
        return np.array([abs(len(r.split()) - len(c.split())) for r, c in zip(references, candidates)], float)


def test_report_gives_both_variants_per_type(suite: PerturbationSuite) -> None:
    pairs = suite.build([("c", CALC, CALC_MESH), ("e", EFF, EFF_MESH)])
    report, _ = score_suite(pairs, [EvaluatorMetric(), WordCount()])
    assert report.variants == ["mesh", "engine"]
    for t in {p.perturbation for p in pairs}:
        for v in ("mesh", "engine"):
            if t in SIGNIFICANT and report.counts_by_variant[v].get(t, 0) == 0:
                continue
            row = report.row("spec-errors", t, v)
            assert row.targets == v and row.n == report.counts_by_variant[v][t]
    # the calcinosis omission counts for mesh only, and the engine cannot see it on the right entity
    mesh, engine = report.row("spec-errors", "omit_finding", "mesh"), report.row("spec-errors", "omit_finding", "engine")
    assert (mesh.n, engine.n) == (3, 2)
    assert engine.right_entity.rate == 1.0 and mesh.right_entity.k == 2
    # shared (insignificant) pairs give the same figure under both variants
    for t in INSIGNIFICANT:
        if t in report.counts:
            assert report.row("word-count", t, "mesh").robustness == report.row("word-count", t, "engine").robustness
    table = format_table(report)
    assert "| type | sig. | n mesh/engine | spec-errors [mesh] | spec-errors [engine] |" in table
    assert "| omit_finding | yes | 3/2 |" in table


def test_cli_perturb_with_mesh_column_and_score(tmp_path: Path) -> None:
    refs = tmp_path / "refs.csv"
    with refs.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "mesh"])
        w.writerows([("c", CALC, CALC_MESH), ("e", EFF, EFF_MESH)])
    out = tmp_path / "suite.csv"
    res = CliRunner().invoke(meta_app, ["perturb", "--refs", str(refs), "--mesh-col", "mesh", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "targets:mesh+engine" in res.output and "mesh  engine  shared" in res.output.replace("   ", "  ")
    pairs = read_suite(out)
    assert pairs == PerturbationSuite(seed=0).build([("c", CALC, CALC_MESH), ("e", EFF, EFF_MESH)])
    js = tmp_path / "r.json"
    res = CliRunner().invoke(meta_app, ["score", str(out), "-m", "spec-errors", "--out", str(js)])
    assert res.exit_code == 0, res.output
    assert "spec-errors [mesh] | spec-errors [engine]" in res.output
    data = json.loads(js.read_text())
    assert data["variants"] == ["mesh", "engine"]
    assert {(r["perturbation"], r["targets"]) for r in data["rows"]} >= {("omit_finding", "mesh"), ("omit_finding", "engine")}
