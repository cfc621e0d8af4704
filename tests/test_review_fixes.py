"""Defects a review found in the issue 12-14 changes, each pinned (metric levels, pickled
metrics, unknown policies, word-defined labels, replicas, label signatures, grades)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from cxreval import Evaluator
from cxreval.extract.models import EntityState, Extraction, Mention
from cxreval.metrics import Metric, get_metric, register_metric
from cxreval.metrics.spec import SpecErrors
from cxreval.ontology import load_ontology
from cxreval.scores.labels import project_extraction
from cxreval.scores.signature import Signature


class _TokenRecall(Metric):
    """Corpus token recall: summed overlaps over summed reference lengths."""

    name = "tok-recall"
    higher_is_better = True
    level = "corpus"
    signature = Signature(metric="tok-recall", ontology="none", engine="none")

    def pair_stats(self, references, candidates):
        return np.array(
            [[len(set(r.split()) & set(c.split())), len(r.split())] for r, c in zip(references, candidates)], dtype=float
        )

    def compute(self, sums):
        s = np.atleast_2d(sums)
        return s[:, 0] / s[:, 1]


def test_a_corpus_plugin_keeps_its_corpus_value_and_level_mismatches_are_refused(monkeypatch) -> None:
    from cxreval.metrics import base

    base.available_metrics()  # the built-ins are registered before the copy
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # these test plug-ins leave no trace
    register_metric("tok-recall-test", level="corpus")(lambda: _TokenRecall())
    m = get_metric("tok-recall-test")
    refs, cands = ["a b c d", "e"], ["a", "e"]
    assert m.corpus_score(refs, cands).value == pytest.approx(2 / 5)  # not the mean of 1/4 and 1
    register_metric("tok-recall-wrong")(lambda: _TokenRecall())  # registered as pair level
    with pytest.raises(ValueError, match="level"):
        get_metric("tok-recall-wrong")

    class Old:  # the first interface: pair_stats + corpus_from_stats
        higher_is_better = True
        signature = Signature(metric="old", ontology="none", engine="none")

        def pair_stats(self, r, c):
            return _TokenRecall().pair_stats(r, c)

        def corpus_from_stats(self, sums):
            return _TokenRecall().compute(sums)

    register_metric("old-corpus-test", level="corpus")(lambda: Old())
    assert get_metric("old-corpus-test").corpus_score(refs, cands).value == pytest.approx(2 / 5)


def test_a_pickled_metric_keeps_every_evaluator_option() -> None:
    m = SpecErrors.from_runner(Evaluator(spec_compat=True).engine_runner)
    back = pickle.loads(pickle.dumps(m))
    refs, cands = ["Small left pleural effusion, increased from prior."], ["Small left pleural effusion, decreased from prior."]
    assert back.score_pairs(refs, cands).tolist() == m.score_pairs(refs, cands).tolist() == [0.0]
    assert str(back.signature) == str(m.signature)


def test_an_unknown_uncertain_policy_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="unknown uncertain policy 'Positive'"):
        Evaluator(uncertain="Positive")  # type: ignore[arg-type]


def test_word_defined_labels_keep_implied_absences_and_unquoted_llm_mentions() -> None:
    onto = load_ontology()
    text = "No acute cardiopulmonary process."
    implied = Extraction(
        engine="t",
        text=text,
        mentions=(
            Mention(
                entity="airspace_disease",
                status="absent",
                implied=True,
                start=0,
                end=len(text),
                sentence_start=0,
                sentence_end=len(text),
                source=text,
            ),
        ),
    )
    assert project_extraction(implied, onto, "chestxray14")["Infiltration"] == 0.0
    unquoted = Extraction(engine="llm", mentions=(Mention(entity="pneumonia", status="present"),))
    assert project_extraction(unquoted, onto, "chestxray14")["Pneumonia"] == 1.0


def test_replicas_need_a_base_url_and_distinct_endpoints() -> None:
    from cxreval.llm import LLMConfig

    with pytest.raises(ValueError, match="replicas need base_url"):
        LLMConfig(model="m", replicas=["http://127.0.0.1:8001/v1"])
    with pytest.raises(ValueError, match="twice"):
        LLMConfig(model="m", base_url="http://127.0.0.1:8000/v1", replicas=["http://127.0.0.1:8000/v1/"])


def test_label_metric_signature_names_label_policies_only() -> None:
    ran = str(get_metric("ran-score").signature)
    assert "comparison:" not in ran and "uncertain:negative" in ran
    assert "hedged:negative" in str(get_metric("labels-chestxray14").signature)


def test_a_grade_must_fit_its_status() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        EntityState(entity="pleural_effusion", status="uncertain", certainty="definite")
    with pytest.raises(ValueError, match="does not fit"):
        Mention(entity="pleural_effusion", status="present", certainty="probable")
    assert Mention(entity="pleural_effusion", status="uncertain", certainty="alternative").certainty == "alternative"


def test_bench_refuses_a_graded_policy_where_the_engine_cannot_grade() -> None:
    from cxreval.bench.config import EngineConfig

    with pytest.raises(ValueError, match="engine 'llm-extract' does not grade"):
        EngineConfig(name="llm-extract", uncertain="probable")
    assert EngineConfig(name="llm-pairwise", uncertain="probable").uncertain == "probable"  # told the grades
