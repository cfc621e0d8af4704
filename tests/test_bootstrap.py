"""Per-pair caches of entity / report scores agree with the scores computed from the table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cxreval
from cxreval.cli import example_path
from cxreval.judge.table import JudgementTable
from cxreval.metrics.intervals import (
    bootstrap_evaluation,
    compare_evaluations,
    table_cache,
)
from cxreval.scores import averages, entity_scores, judgement_frame, pair_errors
from cxreval.scores.resampling import weights_from_indices
from cxreval.scores.signature import SignatureMismatch
from cxreval.scores.statistics import TableStatistics
from tests.test_scores import J


@pytest.fixture
def table():
    return [
        J("p1", "effusion", "TP", location="aligned", severity="not-aligned"),
        J("p2", "effusion", "TP", location="not-aligned", comparison="missing-mentioned-comparison"),
        J("p3", "effusion", "FN"),
        J("p4", "effusion", "FP"),
        J("p1", "pneumothorax", "TP", location="aligned", severity="aligned", comparison="adding-unmentioned-comparison"),
        J("p2", "pneumothorax", "FN"),
        J("p3", "consolidation", "FP"),
        J("p4", "pneumonia", "TN"),
    ]


PAIRS = ["p1", "p2", "p3", "p4", "p5"]


def entity_cache(rows, ontology, pair_ids):
    return table_cache(JudgementTable.from_rows(rows, pair_ids), ontology)


def test_entity_counts_sum_to_the_entity_scores(tiny, table):
    frame = judgement_frame(table)
    counts = TableStatistics(JudgementTable.from_rows(table, PAIRS), tiny).presence()
    assert counts.shape == (5, 4, 3)
    for j, s in enumerate(entity_scores(frame, tiny, len(PAIRS))):
        assert counts[:, j].sum(axis=0).tolist() == [s.presence.tp, s.presence.fp, s.presence.fn]


def test_cache_estimates_equal_the_table_scores(tiny, table):
    frame = judgement_frame(table)
    ents = entity_scores(frame, tiny, len(PAIRS))
    avg = averages(ents)
    est = dict(zip((c := entity_cache(table, tiny, PAIRS)).names, c.estimate()))
    assert est["presence_macro_f1"] == pytest.approx(avg.macro_f1)
    assert est["presence_micro_f1"] == pytest.approx(avg.micro.f1)
    assert est["presence_micro_precision"] == pytest.approx(avg.micro.precision)
    assert est["effusion/recall"] == pytest.approx(2 / 3)
    assert np.isnan(est["pneumonia/f1"]) and np.isnan(est["consolidation/recall"])
    for attr in ("location", "severity", "comparison"):
        assert est[f"{attr}_accuracy"] == pytest.approx(getattr(avg, attr).accuracy)
    errs = pair_errors(frame, PAIRS)["errors"]
    assert [est["errors_per_report_mean"], est["error_free_rate"]] == pytest.approx([errs.mean(), (errs == 0).mean()])
    # effusion and pneumothorax are not critical in the tiny ontology unless marked: the rate is of marked ones
    critical = {e.id for e in tiny.entities if e.critical}
    crit = pair_errors(frame[frame["entity"].isin(critical)], PAIRS)["errors"]
    assert est["critical_error_free_rate"] == pytest.approx((crit == 0).mean())


def test_weighted_cache_equals_recomputing_on_the_resampled_table(tiny, table):
    """One resample: weights @ counts gives the same scores as rebuilding the table."""
    frame = judgement_frame(table)
    cache = entity_cache(table, tiny, PAIRS)
    idx = np.array([[0, 0, 3, 4, 2]])
    fast = dict(zip(cache.names, cache.weighted(weights_from_indices(idx, len(PAIRS)))[0]))
    parts = [frame[frame["pair_id"] == PAIRS[i]].assign(pair_id=f"r{k}") for k, i in enumerate(idx[0])]
    slow = entity_scores(pd.concat(parts), tiny, len(PAIRS))
    for s in slow:
        f1 = fast[f"{s.entity}/f1"]
        assert (s.presence.f1 is None and np.isnan(f1)) or f1 == pytest.approx(s.presence.f1)
    assert fast["presence_macro_f1"] == pytest.approx(averages(slow).macro_f1)


def test_unknown_pair_in_the_table_is_an_error(tiny, table):
    with pytest.raises(ValueError, match="not in pair_ids"):
        TableStatistics(JudgementTable.from_rows(table, ["p1"]), tiny)


@pytest.fixture(scope="module")
def two_systems():
    pairs = cxreval.read_pairs(example_path(), meta_cols=["model"])
    a = [p for p in pairs if p.meta["model"] == "demo-a"]
    b = [p for p in pairs if p.meta["model"] == "demo-b"]
    ev = cxreval.Evaluator()
    return ev.evaluate(a), ev.evaluate(b), ev


def test_bootstrap_evaluation_brackets_the_headline_numbers(two_systems):
    res, _, _ = two_systems
    boot = bootstrap_evaluation(res, resamples=300, seed=1)
    macro = boot.get("presence_macro_f1")
    assert macro.estimate == pytest.approx(res.averages.macro_f1)
    assert macro.low <= macro.estimate <= macro.high
    assert boot.get("errors_per_report_mean").estimate == pytest.approx(res.error_summary.mean)
    sig = str(boot.signature)
    assert "seed:1" in sig and "resamples:300" in sig and "ci:bca" in sig and "uncertain:positive" in sig


def test_compare_evaluations_is_paired_and_checks_signatures(two_systems):
    res, _, ev = two_systems
    # same system against itself (pairs in another order): no difference
    from cxreval.evaluate import EvaluationResult

    shuffled = ev.score(res.judgements, list(reversed(res.pair_ids)))
    assert isinstance(shuffled, EvaluationResult)
    cmp = compare_evaluations(res, shuffled, resamples=100, permutations=100)
    t = cmp.get("presence_macro_f1")
    assert t.difference == 0.0 and t.p_randomization == 1.0
    other = cxreval.Evaluator(uncertain="negative").score(res.judgements, res.pair_ids)
    with pytest.raises(SignatureMismatch):
        compare_evaluations(res, other)
