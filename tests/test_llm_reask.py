"""Issue 28, item 4: the one re-ask names what each task's answer is made of (entity ids only for
the tasks that answer with entity ids), against the loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cxreval.io import ReportPair
from cxreval.labelers import label_reports
from cxreval.metrics import get_metric
from cxreval.ontology import load_ontology
from cxreval.testing.loopback import LoopbackServer
from tests.llm_support import loop_config

REF = "Small left pleural effusion."
CAND = "Large left pleural effusion. FAULT:schema"


def _answers(reports: dict[str, str], instructions: str) -> dict[str, Any] | None:
    if "ERROR COUNT TASK" in instructions:
        zero: dict[str, list[str]] = {
            c: [] for c in ("false_finding", "missing_finding", "location", "severity", "false_comparison", "missing_comparison")
        }
        significant = {**zero, "severity": ["effusion size"]}
        return {"explanation": "x", "significant": significant, "insignificant": zero, "matched_findings": []}
    if "CORRECTION TASK" in instructions:
        return {"corrections": [{"type": "replace", "line": 1, "text": "Small left pleural effusion.", "severity": 2}]}
    return None


def _reasks(srv: LoopbackServer) -> list[str]:
    return [e["reask_text"] for e in srv.log if e["reask"]]


def test_each_task_reasks_in_its_own_terms(tmp_path: Path) -> None:
    with LoopbackServer(script=_answers) as srv:
        cfg = loop_config(srv.base_url, tmp_path / "answers.sqlite")
        for metric, words in (
            ("green", "list of short phrases (at most 12) for every category"),
            ("fineradscore", "candidate's numbered lines"),
        ):
            before = len(_reasks(srv))
            assert get_metric(metric, llm=cfg).score_pairs([REF], [CAND])[0] >= 0  # answered after the re-ask
            asked = _reasks(srv)[before:]
            assert asked and all(words in t and "entity ids" not in t for t in asked), (metric, asked)

        before = len(_reasks(srv))
        run = label_reports({"r": "Small left pleural effusion. FAULT:schema"}, load_ontology(), cfg)
        asked = _reasks(srv)[before:]
        assert run.failures == [] and asked
        assert all("every label key of the list" in t and "entity ids" not in t for t in asked)

        from cxreval import Evaluator

        before = len(_reasks(srv))
        ev = Evaluator(engine="llm-pairwise", llm=cfg)
        ev.evaluate([ReportPair(pair_id="p", reference=REF, candidate="Large left pleural effusion. FAULT:schema")])
        asked = _reasks(srv)[before:]
        assert asked and all("only entity ids from the list" in t for t in asked)
