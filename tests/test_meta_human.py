"""Human alignment: tau-b against scipy, the plain and ReXVal readers on files we wrote."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from typer.testing import CliRunner

from cxreval.cli.meta import meta_app
from cxreval.io import InputError
from cxreval.meta.human import (
    RatingsFormatError,
    RexvalColumns,
    align_scores,
    bootstrap_tau_b,
    human_alignment,
    kendall_tau_b,
    oriented,
    read_plain_ratings,
    read_rexval,
)
from cxreval.meta.robustness import EvaluatorMetric

PAIRS = [
    ("p1", "Small left pleural effusion.", "Small left pleural effusion."),
    ("p2", "Small left pleural effusion.", "No pleural effusion."),
    ("p3", "Mild cardiomegaly. No pneumothorax.", "Large right pneumothorax. Normal heart size."),
    ("p4", "The lungs are clear.", "Lungs are clear."),
    ("p5", "Right upper lobe consolidation.", "Left upper lobe consolidation."),
    ("p6", "Moderate pulmonary edema.", "Mild pulmonary edema. Small bilateral effusions."),
]
# three raters' error counts per pair, and per-category counts of rater 1..3
RATINGS = {"p1": (0, 0, 1), "p2": (1, 1, 1), "p3": (3, 2, 3), "p4": (0, 0, 0), "p5": (1, 1, 2), "p6": (2, 3, 2)}


def write_plain(path: Path, with_categories: bool = False) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        head = ["id", "reference", "candidate", "rater_1", "rater_2", "rater_3"]
        if with_categories:
            head += ["rater_1_false_finding", "rater_2_false_finding", "rater_1_omission", "rater_2_omission"]
        w.writerow(head)
        for pid, ref, cand in PAIRS:
            r = RATINGS[pid]
            row = [pid, ref, cand, *r]
            if with_categories:
                row += [r[0] // 2, r[1] // 2, r[0] - r[0] // 2, r[1] - r[1] // 2]
            w.writerow(row)
    return path


def test_tau_b_matches_scipy_with_ties() -> None:
    x = np.array([1, 2, 2, 3, 5, 5, 5, 8, 9, 9], dtype=float)
    y = np.array([2, 1, 3, 3, 4, 6, 6, 7, 9, 8], dtype=float)
    tau, p = kendall_tau_b(x, y)
    ref = sps.kendalltau(x, y, variant="b")
    assert tau == pytest.approx(ref.statistic, abs=1e-12)
    assert p == pytest.approx(ref.pvalue, abs=1e-12)
    # the tie-corrected value differs from tau-c on this data: we really use variant b
    assert tau != pytest.approx(sps.kendalltau(x, y, variant="c").statistic, abs=1e-6)
    # hand check on a tiny case: 3 concordant, 0 discordant, no ties -> 1.0
    assert kendall_tau_b(np.array([1.0, 2, 3]), np.array([10.0, 20, 30]))[0] == pytest.approx(1.0)


def test_nan_pairs_are_dropped_and_orientation_flips_higher_is_better() -> None:
    x = np.array([1.0, np.nan, 3.0, 4.0])
    y = np.array([1.0, 2.0, 3.0, 5.0])
    assert kendall_tau_b(x, y)[0] == pytest.approx(1.0)
    assert np.array_equal(oriented(np.array([0.9, 0.1]), higher_is_better=True), np.array([-0.9, -0.1]))


def test_bootstrap_ci_is_seeded_and_brackets_tau() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    y = x + rng.normal(scale=0.8, size=60)
    tau = kendall_tau_b(x, y)[0]
    lo, hi = bootstrap_tau_b(x, y, resamples=300, seed=5)
    assert (lo, hi) == bootstrap_tau_b(x, y, resamples=300, seed=5)
    assert lo < tau < hi


def test_plain_reader_totals_and_categories(tmp_path: Path) -> None:
    r = read_plain_ratings(write_plain(tmp_path / "r.csv", with_categories=True))
    assert r.ids == [p[0] for p in PAIRS] and r.raters == ["1", "2", "3"]
    assert r.mean().tolist() == pytest.approx([np.mean(RATINGS[p[0]]) for p in PAIRS])
    assert r.categories == ["total", "false_finding", "omission"]
    # rater 3 gave no category counts: NaN there, the mean is over raters who did
    assert r.mean("false_finding")[2] == pytest.approx((3 // 2 + 2 // 2) / 2)


def test_plain_reader_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,reference,candidate,rater_1\np1,a,b,two\n", encoding="utf-8")
    with pytest.raises(RatingsFormatError, match=r"bad.csv, line 2 \(id 'p1'\), field 'rater_1': 'two' is not a number"):
        read_plain_ratings(bad)
    bad.write_text("id,reference,candidate\np1,a,b\n", encoding="utf-8")
    with pytest.raises(RatingsFormatError, match="no rater columns"):
        read_plain_ratings(bad)
    assert issubclass(RatingsFormatError, InputError)  # callers catching either keep working


def write_rexval(folder: Path, one_based: bool = True) -> tuple[Path, Path]:
    """Two files in ReXVal's shape: wide reports, long per-rater x category x significance counts."""
    reports = folder / "50_samples_gt_and_candidates.csv"
    with reports.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["study_id", "gt_report", "radgraph", "bertscore", "s_emb", "bleu"])
        w.writerow(
            [
                "s10",
                "Small left pleural effusion.",
                "Small left pleural effusion.",
                "No effusion.",
                "Small right pleural effusion.",
                "Large left pneumothorax.",
            ]
        )
        w.writerow(
            [
                "s11",
                "Mild cardiomegaly.",
                "Mild cardiomegaly.",
                "Severe cardiomegaly.",
                "Normal heart size.",
                "Mild cardiomegaly. Right lower lobe consolidation.",
            ]
        )
    ratings = folder / "6_valid_raters_per_rater_error_categories.csv"
    base = 1 if one_based else 0
    # (study index, candidate, rater, category, significant, count)
    rows = [
        (0, "bertscore", 1, 2, True, 1),
        (0, "bertscore", 2, 2, True, 1),
        (0, "s_emb", 1, 3, True, 1),
        (0, "s_emb", 2, 3, False, 1),
        (0, "bleu", 1, 1, True, 1),
        (0, "bleu", 1, 2, True, 1),
        (0, "bleu", 2, 1, True, 2),
        (1, "bertscore", 1, 4, True, 1),
        (1, "bertscore", 2, 4, False, 1),
        (1, "s_emb", 1, 2, True, 1),
        (1, "s_emb", 2, 2, True, 1),
        (1, "bleu", 1, 1, True, 1),
        (1, "bleu", 2, 1, False, 1),
        (0, "radgraph", 1, 1, True, 0),
        (0, "radgraph", 2, 1, True, 0),
        (1, "radgraph", 1, 1, True, 0),
        (1, "radgraph", 2, 1, True, 0),
    ]
    with ratings.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["study_number", "candidate_type", "rater_index", "error_category", "clinically_significant", "num_errors"])
        for s, c, r, cat, sig, n in rows:
            w.writerow([s + base, c, r, cat, sig, n])
    return reports, ratings


@pytest.mark.parametrize("one_based", [True, False])
def test_rexval_reader(tmp_path: Path, one_based: bool) -> None:
    reports, ratings = write_rexval(tmp_path, one_based)
    r = read_rexval(reports, ratings)
    assert len(r.ids) == 8 and r.raters == ["1", "2"]
    idx = r.ids.index("s10:bleu")
    assert r.candidates[idx] == "Large left pneumothorax." and r.references[idx] == "Small left pleural effusion."
    assert r.counts["total"][idx] == [2.0, 2.0]
    assert r.counts["1"][idx] == [1.0, 2.0]  # category 1 of that pair
    assert r.mean()[r.ids.index("s11:radgraph")] == 0.0
    sig = read_rexval(reports, ratings, significance="significant")
    assert sig.counts["total"][sig.ids.index("s10:s_emb")] == [1.0, 0.0]
    insig = read_rexval(reports, ratings, significance="insignificant")
    assert insig.counts["total"][insig.ids.index("s11:bertscore")] == [0.0, 1.0]


def test_rexval_reader_configurable_columns_and_long_layout(tmp_path: Path) -> None:
    reports = tmp_path / "long.csv"
    reports.write_text("sid,gt,kind,text\nA,No effusion.,m1,Small effusion.\nA,No effusion.,m2,No effusion.\n", encoding="utf-8")
    ratings = tmp_path / "rates.csv"
    ratings.write_text("study,kind,reader,errors\nA,m1,r1,1\nA,m1,r2,2\nA,m2,r1,0\nA,m2,r2,0\n", encoding="utf-8")
    cols = RexvalColumns(
        study_id="sid",
        reference="gt",
        long_candidate_type="kind",
        long_report="text",
        study_number="study",
        rating_candidate_type="kind",
        rater="reader",
        count="errors",
        category="none",
        significant="none",
    )
    r = read_rexval(reports, ratings, columns=cols)
    assert r.ids == ["A:m1", "A:m2"] and r.mean().tolist() == [1.5, 0.0]
    bad = tmp_path / "bad.csv"
    bad.write_text("study,kind,reader,errors\nB,m1,r1,1\n", encoding="utf-8")
    with pytest.raises(RatingsFormatError):
        read_rexval(reports, bad, columns=cols)


def test_alignment_with_the_rule_engine_and_repeated_runs(tmp_path: Path) -> None:
    r = read_plain_ratings(write_plain(tmp_path / "r.csv"))
    a = human_alignment(EvaluatorMetric(), r, resamples=200, seed=1)
    total = a.correlations[0]
    scores = EvaluatorMetric().score_pairs(r.references, r.candidates)
    assert total.tau_b == pytest.approx(sps.kendalltau(scores, r.mean(), variant="b").statistic)
    assert total.spearman == pytest.approx(sps.spearmanr(scores, r.mean()).statistic)
    assert total.tau_b > 0.5  # the engine's error counts rank these pairs like the raters
    # a higher-is-better metric is negated: perfect agreement in its own direction gives +1
    sim = -r.mean()
    up = align_scores([sim, sim + 0.0], r, higher_is_better=True, resamples=0)
    assert up.correlations[0].tau_b == pytest.approx(1.0)
    assert up.correlations[0].tau_b_sd == pytest.approx(0.0) and up.runs == 2


def test_cli_human(tmp_path: Path) -> None:
    path = write_plain(tmp_path / "r.csv", with_categories=True)
    out = tmp_path / "a.json"
    res = CliRunner().invoke(meta_app, ["human", str(path), "--resamples", "50", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "tau-b" in res.output and "false_finding" in res.output and out.is_file()
    reports, ratings = write_rexval(tmp_path)
    res = CliRunner().invoke(meta_app, ["human", str(reports), "--rexval-ratings", str(ratings), "--resamples", "20"])
    assert res.exit_code == 0, res.output
    assert "8 pairs, 2 raters" in res.output
