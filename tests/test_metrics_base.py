"""The metric interface and registry."""

from __future__ import annotations

import numpy as np
import pytest

from cxreval.metrics import ReportMetric, UnknownMetric, available_metrics, get_metric, register_metric
from cxreval.scores.signature import Signature


def test_spec_errors_metric_scores_each_pair():
    m = get_metric("spec-errors")
    assert isinstance(m, ReportMetric) and m.higher_is_better is False
    scores = m.score_pairs(
        ["Small left pleural effusion.", "No pneumothorax.", "Moderate cardiomegaly."],
        ["No pleural effusion.", "No pneumothorax.", "Severe cardiomegaly."],
    )
    assert scores.tolist() == [1.0, 0.0, 1.0]  # FN; nothing; severity not aligned
    assert "engine:rules@" in str(m.signature) and "metric:spec-report-errors-mean|" in str(m.signature)
    with pytest.raises(ValueError, match="2 references but 1 candidates"):
        m.score_pairs(["a", "b"], ["a"])


def test_registry_names_what_it_knows():
    assert "spec-errors" in available_metrics()
    with pytest.raises(UnknownMetric, match="spec-errors"):
        get_metric("no-such-metric")


def test_a_plugin_registers_by_name():
    class Length:
        name = "length-diff"
        higher_is_better = False
        signature = Signature(metric="length-diff", ontology="none", engine="none")

        def score_pairs(self, references, candidates):
            return np.array([abs(len(r) - len(c)) for r, c in zip(references, candidates)], dtype=float)

    register_metric("length-diff")(lambda **_: Length())
    assert get_metric("length-diff").score_pairs(["abc"], ["a"]).tolist() == [2.0]
