"""``cxreval agree``: label files, majority vote, the agreement table and the command."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import typer
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from cxreval.agree import agreement_table, majority_vote, parse_label_value, read_labels
from cxreval.cli.agree import agree
from cxreval.io import InputError

PRED = "id,A,B\n1,1,0\n2,0,-1\n3,1,1\n4,,0\n"
G1 = "id,A,B\n1,1,0\n2,0,1\n3,0,1\n4,0,0\n"
G2 = "id,A,B\n1,positive,negative\n2,negative,uncertain\n3,1,1\n4,blank,1\n"
G3 = "id,A,B\n1,1,0\n2,0,0\n3,1,0\n4,0,1\n"


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, text in {"pred.csv": PRED, "g1.csv": G1, "g2.csv": G2, "g3.csv": G3}.items():
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


def app() -> typer.Typer:
    a = typer.Typer()
    a.command("agree")(agree)
    a.command("noop")(lambda: None)  # two commands, so "agree" is addressed by name as in cxreval
    return a


def test_values_accepted():
    for raw, want in [
        ("1", 1.0),
        ("1.0", 1.0),
        (1, 1.0),
        (True, 1.0),
        ("Positive", 1.0),
        ("present", 1.0),
        ("0", 0.0),
        ("negative", 0.0),
        (False, 0.0),
        ("-1", -1.0),
        (-1.0, -1.0),
        ("uncertain", -1.0),
    ]:
        assert parse_label_value(raw) == want
    for raw in ("", "blank", None, float("nan"), " "):
        assert math.isnan(parse_label_value(raw))
    for raw in ("2", "maybe", 0.5, [1]):
        assert parse_label_value(raw) is None


def test_read_wide_and_long_give_the_same_table(tmp_path):
    wide = tmp_path / "w.csv"
    wide.write_text("id,A,B\nx,1,\ny,uncertain,0\n")
    long = tmp_path / "l.jsonl"
    long.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "x", "label": "A", "value": 1},
                {"id": "y", "label": "A", "value": "uncertain"},
                {"id": "y", "label": "B", "value": 0},
            ]
        )
        + "\n"
    )
    a, b = read_labels(wide), read_labels(long)
    assert a.index.tolist() == ["x", "y"] and a.columns.tolist() == ["A", "B"]
    pd.testing.assert_frame_equal(a, b)


def test_bad_files_list_every_problem(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,A,B\n1,1,maybe\n1,0,0\n,1,1\n")
    with pytest.raises(InputError) as exc:
        read_labels(bad)
    text = str(exc.value)
    assert "line 2" in text and "'maybe'" in text and "duplicate id" in text and "empty id" in text
    with pytest.raises(InputError, match="missing column"):
        read_labels(bad, labels=["A", "C"])


def test_majority_vote_and_ties():
    g = [pd.DataFrame({"A": v}, dtype=float) for v in ([1, 1, 0, -1], [1, 0, 0, -1], [0, 0, 1, -1])]
    assert majority_vote(g)["A"].tolist() == [1.0, 0.0, 0.0, 0.0]
    two = g[:2]
    vote = majority_vote(two)["A"].tolist()
    assert vote[0] == 1.0 and math.isnan(vote[1]) and vote[2] == 0.0
    assert majority_vote(two, tie="positive")["A"].tolist()[1] == 1.0
    # uncertain excluded: item 4 (all uncertain) has no defined vote -> excluded whatever the tie policy
    assert math.isnan(majority_vote(g, uncertain="exclude", tie="positive")["A"].tolist()[3])


def test_agreement_table_single_annotator_against_statsmodels(files):
    pred, gold = read_labels(files["pred.csv"]), read_labels(files["g1.csv"])
    t = agreement_table(pred, [gold])
    a = t.rows[0]
    # A: pred 1,0,1,0 vs gold 1,0,0,0 -> TP 1, FP 1, FN 0, TN 2
    assert (a.tp, a.fp, a.fn, a.tn) == (1, 1, 0, 2)
    assert a.accuracy == 0.75 and a.precision == 0.5 and a.recall == 1.0 and a.f1 == pytest.approx(2 / 3)
    lo, hi = proportion_confint(3, 4, method="beta")
    assert (a.accuracy_low, a.accuracy_high) == pytest.approx((lo, hi))
    assert a.kappa == pytest.approx(sm_cohens_kappa(np.array([[1, 0], [1, 2]])).kappa)
    assert a.raters_kappa is None and t.n_raters == 1
    assert (t.micro.tp, t.micro.fp, t.micro.fn, t.micro.tn) == (2, 1, 1, 4)
    assert t.macro.f1 == pytest.approx(np.mean([r.f1 for r in t.rows]))


def test_agreement_table_several_annotators(files):
    pred = read_labels(files["pred.csv"])
    golds = [read_labels(files[f]) for f in ("g1.csv", "g2.csv", "g3.csv")]
    t = agreement_table(pred, golds)
    a, b = t.rows
    assert a.accuracy == 1.0  # majority A: 1,0,1,0
    assert (b.tp, b.fp, b.fn, b.tn) == (1, 0, 1, 2)  # majority B: 0,0,1,1
    votes_b = np.array([[0, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 1]])  # raters x items, binarised
    counts = np.stack([(votes_b == 1).sum(0), (votes_b == 0).sum(0)], axis=1)
    assert b.raters_kappa == pytest.approx(sm_fleiss_kappa(counts))
    assert t.signature.options["reference"] == "majority" and t.signature.options["raters"] == "3"


def test_agree_command_formats(files, tmp_path):
    runner = CliRunner()
    args = ["agree", str(files["pred.csv"]), "-g", str(files["g1.csv"]), "-g", str(files["g2.csv"]), "-g", str(files["g3.csv"])]
    res = runner.invoke(app(), args)
    assert res.exit_code == 0, res.output
    assert "Accuracy [95% CI]" in res.output and "Micro" in res.output and "Macro" in res.output
    assert "1.000 [0.398, 1.000]" in res.output and "signature:\nmetric:label-agreement" in res.output
    res = runner.invoke(app(), [*args, "--format", "json"])
    data = json.loads(res.output)
    assert data["rows"][1]["recall"] == 0.5 and data["signature"].startswith("metric:label-agreement")
    res = runner.invoke(app(), [*args, "--format", "csv"])
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("label,n,tp,fp,fn,tn") and len(lines) == 5
    out = tmp_path / "t.tex"
    res = runner.invoke(app(), [*args, "--format", "latex", "--out", str(out)])
    tex = out.read_text()
    assert res.exit_code == 0 and r"\begin{tabular}" in tex and r"Accuracy [95\% CI]" in tex
    assert r"$\kappa$" in tex and "Raters kappa (Fleiss)" in tex


def test_agree_command_reports_input_problems(files, tmp_path):
    extra = tmp_path / "extra.csv"
    extra.write_text(G1 + "5,1,1\n")
    res = CliRunner().invoke(app(), ["agree", str(files["pred.csv"]), "-g", str(extra)])
    assert res.exit_code == 2
    assert "id not in" in res.output and "'5'" in res.output


def test_agree_command_with_a_label_set(tmp_path):
    from cxreval.ontology import load_ontology

    labels = load_ontology().labelsets["ran21"].labels
    rng = np.random.default_rng(0)
    for name in ("p.csv", "g.csv"):
        frame = pd.DataFrame(rng.integers(0, 2, (30, 21)), columns=labels)
        frame.insert(0, "study", [f"s{i}" for i in range(30)])
        frame.to_csv(tmp_path / name, index=False)
    res = CliRunner().invoke(
        app(),
        [
            "agree",
            str(tmp_path / "p.csv"),
            "-g",
            str(tmp_path / "g.csv"),
            "--id-col",
            "study",
            "--labelset",
            "ran21",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [r["label"] for r in data["rows"]] == labels
    assert "labelset:ran21" in data["signature"] and "ontology:cxreval-cxr@" in data["signature"]


def test_agree_runs_in_a_subprocess(files):
    code = (
        "import typer, sys; from cxreval.cli.agree import agree; a = typer.Typer(); "
        "a.command('agree')(agree); a.command('noop')(lambda: None); sys.exit(a())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "agree", str(files["pred.csv"]), "-g", str(files["g1.csv"]), "--format", "csv"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].startswith("A,4,1,1,0,2")
