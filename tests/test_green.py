"""GREEN-style and FineRadScore-style LLM metrics against the loopback server (a real HTTP server
on 127.0.0.1) with scripted answers and faults; the expected values are computed by hand here."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cxreval.bench.config import BenchConfig, resolve_paths
from cxreval.bench.runner import run_benchmark
from cxreval.llm.schemas import AnswerError
from cxreval.metrics import MetricUnavailable, get_metric, metric_spec
from cxreval.metrics.fineradscore import FineRadJudge, candidate_lines
from cxreval.metrics.green import CATEGORIES, GreenJudge, green_score
from cxreval.scores import Signature
from cxreval.testing.loopback import LoopbackServer

from .llm_support import loop_config

ZERO: dict[str, list[str]] = {c: [] for c in CATEGORIES}
# Three pairs we wrote; per pair the scripted GREEN lists and FineRadScore corrections.
PAIRS = [
    (
        "p1",
        "Small left pleural effusion. Mild cardiomegaly. No pneumothorax.",
        "Large right pleural effusion. Right upper lobe pneumonia. No pneumothorax.",
    ),
    ("p2", "Mild cardiomegaly. The lungs are clear.", "Mild cardiomegaly. Lungs are clear."),
    ("p3", "The lungs are clear.", "Lungs clear. Stable appearance since the prior study."),
]
GREEN = {
    # p1: pneumonia invented (a), cardiomegaly missed (b), wrong side (c), wrong size (d); an
    # insignificant missed detail; effusion and "no pneumothorax" matched. GREEN's counts are the
    # lists' lengths.
    "p1": {
        "explanation": "The candidate puts a large effusion on the wrong side, invents a pneumonia and misses the cardiomegaly.",
        "significant": {
            **ZERO,
            "false_finding": ["right upper lobe pneumonia"],
            "missing_finding": ["mild cardiomegaly"],
            "location": ["pleural effusion on the right instead of the left"],
            "severity": ["pleural effusion large instead of small"],
        },
        "insignificant": {**ZERO, "missing_finding": ["a detail"]},
        "matched_findings": ["pleural effusion", "no pneumothorax"],
    },
    "p2": {
        "explanation": "Same findings.",
        "significant": ZERO,
        "insignificant": ZERO,
        "matched_findings": ["mild cardiomegaly", "clear lungs"],
    },
    "p3": {
        "explanation": "The candidate adds a comparison the reference does not make.",
        "significant": ZERO,
        "insignificant": {**ZERO, "false_comparison": ["stable since the prior study"]},
        "matched_findings": [],
    },
}
FINERAD = {
    "p1": {
        "corrections": [
            {"type": "replace", "line": 1, "text": "Small left pleural effusion.", "severity": 2},
            {"type": "delete", "line": 2, "text": "", "severity": 3},
            {"type": "insert", "line": 0, "text": "Mild cardiomegaly.", "severity": 2},
        ]
    },
    "p2": {"corrections": []},
    "p3": {"corrections": [{"type": "delete", "line": 2, "text": "", "severity": 1}]},
}
# By hand. GREEN = matched / (matched + significant), 0 when nothing matched:
#   p1 2 / (2 + 4) = 1/3;  p2 2 / 2 = 1;  p3 matched 0 -> 0.  Mean (1/3 + 1 + 0) / 3 = 4/9.
#   No significant error: p1 0, p2 1, p3 1 -> 2/3.
# FineRadScore = sum of grades: p1 2 + 3 + 2 = 7, p2 0, p3 1 -> mean 8/3.
#   No actionable error (no grade >= 2): p1 0, p2 1, p3 1 -> 2/3; no significant (no grade >= 3): 0, 1, 1 -> 2/3.
# Strata (the reference states a positive finding): p1, p2 abnormal; p3 normal.
#   abnormal: GREEN (1/3 + 1) / 2 = 2/3, no significant error 1/2; FineRadScore 7/2, no actionable 1/2.
#   normal:   GREEN 0, no significant error 1; FineRadScore 1, no actionable 1.
EXPECTED = {
    "all": {
        "green": 4 / 9,
        "green-no-significant-error-rate": 2 / 3,
        "fineradscore": 8 / 3,
        "fineradscore-no-actionable-error-rate": 2 / 3,
        "fineradscore-no-significant-error-rate": 2 / 3,
    },
    "abnormal": {
        "green": 2 / 3,
        "green-no-significant-error-rate": 1 / 2,
        "fineradscore": 7 / 2,
        "fineradscore-no-actionable-error-rate": 1 / 2,
        "fineradscore-no-significant-error-rate": 1 / 2,
    },
    "normal": {
        "green": 0.0,
        "green-no-significant-error-rate": 1.0,
        "fineradscore": 1.0,
        "fineradscore-no-actionable-error-rate": 1.0,
        "fineradscore-no-significant-error-rate": 1.0,
    },
}
METRICS = list(EXPECTED["all"])


def script(reports: dict[str, str], instructions: str) -> dict[str, Any] | None:
    """The scripted answer of a pair, found by its reference text."""
    pid = next(p for p, ref, _ in PAIRS if reports["reference"].startswith(ref.split(" FAULT")[0]))
    if "ERROR COUNT TASK" in instructions:
        return GREEN[pid]
    if "CORRECTION TASK" in instructions:
        return FINERAD[pid]
    return None


def _llm(srv: LoopbackServer, cache: Path) -> dict[str, Any]:
    return loop_config(srv.base_url, cache).model_dump(mode="json", exclude_none=True)


def test_formula_and_registry() -> None:
    assert green_score(2, 4) == pytest.approx(1 / 3) and green_score(0, 0) == 0.0 and green_score(3, 0) == 1.0
    for name in METRICS:
        spec = metric_spec(name)
        assert spec.needs == ("llm",) and spec.level == "pair" and not spec.parallel_safe
    assert not metric_spec("fineradscore").higher_is_better and metric_spec("green").higher_is_better
    with pytest.raises(MetricUnavailable, match="needs an LLM endpoint"):
        get_metric("green")
    assert candidate_lines("Lungs clear.  Heart normal!\nNo effusion") == ["Lungs clear.", "Heart normal!", "No effusion"]


def test_answers_are_validated(tmp_path: Path) -> None:
    cfg = loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite")
    g = GreenJudge(cfg)
    ok = g.parse_value(GREEN["p1"], "r", "c")
    assert ok["matched"] == 2 and sum(ok["significant"].values()) == 4
    assert ok["lists"]["significant"]["false_finding"] == ["right upper lobe pneumonia"] and ok["explanation"].startswith(
        "The candidate"
    )
    with pytest.raises(AnswerError, match="significant.location: -1 is not a list of at most 12 phrases"):
        g.parse_value({**GREEN["p2"], "significant": {**ZERO, "location": -1}}, "r", "c")
    with pytest.raises(AnswerError, match="unknown categories"):
        g.parse_value({**GREEN["p2"], "insignificant": {**ZERO, "style": []}}, "r", "c")
    with pytest.raises(AnswerError, match="significant.severity: .* is not a list of at most 12"):
        g.parse_value({**GREEN["p2"], "significant": {**ZERO, "severity": ["x"] * 13}}, "r", "c")
    with pytest.raises(AnswerError, match="matched_findings"):
        g.parse_value({"significant": ZERO, "insignificant": ZERO}, "r", "c")
    f = FineRadJudge(cfg)
    cand = PAIRS[0][2]  # three lines
    assert len(f.parse_value(FINERAD["p1"], "r", cand)["corrections"]) == 3
    bad = {"corrections": [{"type": "delete", "line": 4, "text": "", "severity": 2}]}
    with pytest.raises(AnswerError, match="line: 4 is not a line number from 0 to 3"):
        f.parse_value(bad, "r", cand)
    with pytest.raises(AnswerError, match="a delete names a line from 1 to 3"):
        f.parse_value({"corrections": [{"type": "delete", "line": 0, "text": "", "severity": 2}]}, "r", cand)
    with pytest.raises(AnswerError, match="severity: 5"):
        f.parse_value({"corrections": [{"type": "insert", "line": 0, "text": "x", "severity": 5}]}, "r", cand)
    # the prompt: candidate as numbered lines inside its fence; prompt version and hash in the signature
    user = f.task("Ref.", cand).messages[1]["content"]
    assert "1. Large right pleural effusion.\n2. Right upper lobe pneumonia.\n3. No pneumothorax." in user
    sig = Signature.parse(str(get_metric("fineradscore", llm=cfg).signature))
    assert sig.prompt.startswith("fineradscore@2#") and sig.options["significant_from"] == "3"
    assert Signature.parse(str(get_metric("green", llm=cfg).signature)).prompt.startswith("green@2#")


def _bench(tmp_path: Path, llm: dict[str, Any]) -> BenchConfig:
    with (tmp_path / "refs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "report"])
        w.writerows((p, r) for p, r, _ in PAIRS)
    with (tmp_path / "sys.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "report"])
        w.writerows((p, c) for p, _, c in PAIRS)
    raw = {
        "name": "llm-metrics",
        "bootstrap": {"resamples": 10},
        "engine": {"name": "rules", "workers": 1},
        "metrics": ["spec-errors", *METRICS],
        "metric_options": {m: {"llm": llm} for m in METRICS},
        "datasets": [{"name": "d", "references": {"path": "refs.csv", "text_col": "report"}}],
        "systems": [{"name": "S", "path": "sys.csv", "text_col": "report"}],
    }
    return resolve_paths(BenchConfig.model_validate(raw), tmp_path)


def test_hand_computed_scores_and_rates_per_stratum(tmp_path: Path) -> None:
    with LoopbackServer(script=script) as srv:
        cfg = _bench(tmp_path, _llm(srv, tmp_path / "answers.sqlite"))
        result, _ = run_benchmark(cfg, tmp_path / "out")
        # one call per pair per family: the second and third metric of a family read the stored answer
        assert len(srv.log) == 2 * len(PAIRS)
        for stratum, want in EXPECTED.items():
            row = result.leaderboard("d", stratum).rows[0]
            assert row.n_pairs == {"all": 3, "abnormal": 2, "normal": 1}[stratum]
            for name, value in want.items():
                assert row.metrics[name].value == pytest.approx(value), (stratum, name)
        info = {m.name: m for m in result.metrics}
        assert Signature.parse(info["green"].signature).engine == "green-judge@3"
        assert info["fineradscore"].higher_is_better is False
        # a rerun asks nothing (bench's value cache; then the answer store for a fresh metric)
        n = len(srv.log)
        run_benchmark(cfg, tmp_path / "out")
        metric = get_metric("green", llm=_llm(srv, tmp_path / "answers.sqlite"))
        values = metric.score_pairs([r for _, r, _ in PAIRS], [c for _, _, c in PAIRS])
        assert np.allclose(values, [1 / 3, 1.0, 0.0]) and len(srv.log) == n
        assert metric.last_run is not None and metric.last_run.usage.cache_hits == 3


def test_faults_retry_reask_and_unusable_answers(tmp_path: Path) -> None:
    refs = [r for _, r, _ in PAIRS]
    cands = [PAIRS[0][2] + " FAULT:500", PAIRS[1][2] + " FAULT:truncate", PAIRS[2][2] + " FAULT:schema-always"]
    with LoopbackServer(script=script) as srv:
        llm = _llm(srv, tmp_path / "answers.sqlite")
        metric = get_metric("green", llm=llm)
        values = metric.score_pairs(refs, cands)
        run = metric.last_run
        assert run is not None
        # 500 twice, then answered; truncated once, re-asked, answered; wrong types twice: not scored
        assert values[0] == pytest.approx(1 / 3) and values[1] == pytest.approx(1.0) and np.isnan(values[2])
        assert list(run.failures) == [2] and "significant" in run.failures[2]
        assert run.usage.retries == 2 and run.usage.reasks == 2 and run.usage.failed == 1
        # the system value is the mean over the scored pairs only
        assert metric.corpus_score(refs, cands).value == pytest.approx((1 / 3 + 1.0) / 2)
        requests = len(srv.log)
        fr = get_metric("fineradscore-no-actionable-error-rate", llm=llm)
        out = fr.score_pairs(refs, cands)
        assert out[0] == 0.0 and out[1] == 1.0 and np.isnan(out[2])
        assert len(srv.log) > requests
        # a failed answer is stored too: a rerun does not pay for it again
        again = len(srv.log)
        assert np.isnan(get_metric("green", llm=llm).score_pairs(refs, cands)[2]) and len(srv.log) == again
    assert json.dumps(FINERAD)  # scripted answers are plain JSON


def test_fineradscore_lines_keep_their_list_numbers() -> None:
    """Issue 28, item 3: a list number is no line of its own (FineRadScore numbers sentences)."""
    assert candidate_lines("1. Small effusion. 2. Large left pleural effusion.") == [
        "1. Small effusion.",
        "2. Large left pleural effusion.",
    ]
    assert candidate_lines("Findings:\n10) Nodule at T10.\n11) No effusion.") == [
        "Findings:",
        "10) Nodule at T10.",
        "11) No effusion.",
    ]
    assert candidate_lines("The ETT tip is 4.5 cm above the carina. No pneumothorax.") == [
        "The ETT tip is 4.5 cm above the carina.",
        "No pneumothorax.",
    ]


def test_no_corrections_for_reports_that_differ_is_asked_again_then_a_failure(tmp_path: Path) -> None:
    """Issue 28, item 3: an empty corrections list scores a pair as perfect; where the rule engine
    reads a finding only one report states, it is re-asked once, then listed, never scored. A pair
    whose reports state the same findings keeps its empty list (p2)."""
    f = FineRadJudge(loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"))
    with pytest.raises(AnswerError, match="reads findings that only one report states"):
        f.parse_value({"corrections": []}, PAIRS[0][1], PAIRS[0][2])
    assert f.parse_value({"corrections": []}, PAIRS[1][1], PAIRS[1][2]) == {"corrections": []}

    def silent(reports: dict[str, str], instructions: str) -> dict[str, Any] | None:
        return {"corrections": []} if "CORRECTION TASK" in instructions else script(reports, instructions)

    refs, cands = [r for _, r, _ in PAIRS], [c for _, _, c in PAIRS]
    with LoopbackServer(script=silent) as srv:
        metric = get_metric("fineradscore", llm=_llm(srv, tmp_path / "answers.sqlite"))
        values = metric.score_pairs(refs, cands)
        run = metric.last_run
        assert run is not None and list(run.failures) == [0] and "no correction" in run.failures[0]
        assert np.isnan(values[0]) and values[1] == 0.0  # p2: the same findings, nothing to correct
        assert run.usage.reasks >= 1


def test_a_blank_phrase_names_no_error(tmp_path: Path) -> None:
    g = GreenJudge(loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"))
    answer = {**GREEN["p2"], "significant": {**ZERO, "missing_finding": ["", "  ", "left effusion"]}}
    assert g.parse_value(answer, "r", "c")["significant"]["missing_finding"] == 1
