"""Facts the README and docs state about the package are read from it, not written by hand."""

from __future__ import annotations

import math
import re
from pathlib import Path

from cxreval.ontology import load_ontology

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_counts_the_ontology_as_cxreval_ontology_does() -> None:
    onto = load_ontology()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"the ontology \((\d+) entities, (\d+) groups", text)
    assert found, "the README names the ontology's size"
    assert (int(found.group(1)), int(found.group(2))) == (len(onto.entities), len(onto.groups))


def test_a_perfect_completion_is_a_reward_of_plain_zero() -> None:
    from cxreval.reward import ClinicalReward

    for shape in ("neg-errors", "critical-weighted", "graded"):
        (value,) = ClinicalReward(shape=shape).score(["Small left pleural effusion."], ["Small left pleural effusion."])
        assert value == 0.0 and math.copysign(1.0, value) == 1.0 and str(value) == "0.0", shape


def test_counts_read_as_english() -> None:
    from cxreval.cli.review import _reviews_by

    assert _reviews_by(0, []) == "no review yet"
    assert _reviews_by(1, ["ann"]) == "1 review by ann" and _reviews_by(3, ["ann", "bob"]) == "3 reviews by ann, bob"
