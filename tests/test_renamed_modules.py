"""Modules renamed in 0.8.1 so that each name has one meaning: the old import paths still work for
one minor version, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = {
    "cxreval.scores.report": ("cxreval.scores.report_errors", "distribution_of"),
    "cxreval.meta.report": ("cxreval.meta.page_section", None),
    "cxreval.scores.stats": ("cxreval.scores.resampling", "clopper_pearson"),
    "cxreval.review.stats": ("cxreval.review.accuracy", "review_stats"),
    "cxreval.scores.spec": ("cxreval.scores.spec_tables", None),
    "cxreval.extract.llm_answers": ("cxreval.extract.llm_mentions", None),
    "cxreval.judge.llm_answers": ("cxreval.judge.llm_verdicts", None),
    "cxreval.meta.twopass": ("cxreval.meta.judge_passes", "LLMJudgeMetric"),
    "cxreval.report": ("cxreval.page", "write_html"),
    "cxreval.report.html": ("cxreval.page.html", None),
    "cxreval.report.charts": ("cxreval.page.charts", "radar_svg"),
    "cxreval.outputs": ("cxreval.io.writers", "atomic_write_text"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_path_warns_and_gives_the_new_modules_names(old: str) -> None:
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        shim = importlib.import_module(old)
    target = importlib.import_module(new)
    name = name or next(n for n in vars(target) if not n.startswith("_") and callable(getattr(target, n)))
    assert getattr(shim, name) is getattr(target, name)
