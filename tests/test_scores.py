"""Score arithmetic against hand-computed values."""

from __future__ import annotations

import math

import pytest

from cxreval.judge.models import EntityJudgement
from cxreval.scores import averages, entity_scores, error_distribution, group_scores, judgement_frame, pair_errors
from cxreval.scores.signature import Signature, SignatureMismatch, check_comparable


def J(pair, entity, presence, location="not-available", severity="not-available", comparison="other"):
    return EntityJudgement(
        pair_id=pair, entity=entity, presence=presence, location=location, severity=severity, comparison=comparison
    )


@pytest.fixture
def table():
    # 4 pairs. effusion: TP, TP, FN, FP -> P=2/3, R=2/3, F1=2/3.
    # pneumothorax: TP, FN -> P=1, R=1/2, F1=2/3. consolidation: FP only -> P=0, R undefined, F1=0.
    # pneumonia: TN only -> everything undefined.
    return [
        J("p1", "effusion", "TP", location="aligned", severity="not-aligned", comparison="other"),
        J("p2", "effusion", "TP", location="not-aligned", severity="not-available", comparison="missing-mentioned-comparison"),
        J("p3", "effusion", "FN"),
        J("p4", "effusion", "FP"),
        J("p1", "pneumothorax", "TP", location="aligned", severity="aligned", comparison="adding-unmentioned-comparison"),
        J("p2", "pneumothorax", "FN"),
        J("p3", "consolidation", "FP"),
        J("p4", "pneumonia", "TN"),
    ]


def by_id(scores):
    return {s.entity: s for s in scores}


def test_presence_counts_and_ratios(tiny, table):
    scores = by_id(entity_scores(judgement_frame(table), tiny, n_pairs=4))
    eff = scores["effusion"].presence
    assert (eff.tp, eff.fp, eff.fn, eff.tn) == (2, 1, 1, 0)
    assert eff.precision == pytest.approx(2 / 3)
    assert eff.recall == pytest.approx(2 / 3)
    assert eff.f1 == pytest.approx(2 / 3)
    ptx = scores["pneumothorax"].presence
    assert (ptx.tp, ptx.fp, ptx.fn, ptx.tn) == (1, 0, 1, 2)
    assert ptx.precision == 1.0 and ptx.recall == 0.5 and ptx.f1 == pytest.approx(2 / 3)
    cons = scores["consolidation"].presence
    assert cons.precision == 0.0 and cons.recall is None and cons.f1 == 0.0
    pna = scores["pneumonia"].presence
    assert pna.tn == 4  # one explicit TN row + three implicit
    assert pna.precision is None and pna.recall is None and pna.f1 is None


def test_attribute_accuracy_on_tp_only(tiny, table):
    scores = by_id(entity_scores(judgement_frame(table), tiny, n_pairs=4))
    eff = scores["effusion"]
    assert (eff.location.correct, eff.location.judged, eff.location.not_available) == (1, 2, 0)
    assert eff.location.accuracy == 0.5
    assert (eff.severity.correct, eff.severity.judged, eff.severity.not_available) == (0, 1, 1)
    assert eff.severity.accuracy == 0.0
    assert (eff.comparison.correct, eff.comparison.judged) == (1, 2)
    ptx = scores["pneumothorax"]
    assert ptx.severity.accuracy == 1.0 and ptx.comparison.accuracy == 0.0
    # pneumonia has no attributes and no TP: undefined, not zero
    assert scores["pneumonia"].location.accuracy is None


def test_macro_micro_and_groups(tiny, table):
    scores = entity_scores(judgement_frame(table), tiny, n_pairs=4)
    avg = averages(scores)
    # macro F1 over defined entities: (2/3 + 2/3 + 0) / 3
    assert avg.macro_f1 == pytest.approx(4 / 9)
    assert avg.n_entities_f1_defined == 3 and avg.n_entities == 4
    # macro precision: (2/3 + 1 + 0)/3 ; macro recall over defined: (2/3 + 1/2)/2
    assert avg.macro_precision == pytest.approx(5 / 9)
    assert avg.macro_recall == pytest.approx(7 / 12)
    # micro: TP=3, FP=2, FN=2 -> F1 = 6/10
    assert (avg.micro.tp, avg.micro.fp, avg.micro.fn) == (3, 2, 2)
    assert avg.micro.f1 == pytest.approx(0.6)
    assert avg.location.accuracy == pytest.approx(2 / 3)
    groups = {g.group: g for g in group_scores(scores, tiny)}
    assert groups["pleural"].presence.f1 == pytest.approx(2 * 3 / (2 * 3 + 1 + 2))
    assert groups["parenchyma"].presence.f1 == 0.0
    assert groups["parenchyma"].n_entities == 2


def test_report_level_errors(table):
    frame = judgement_frame(table)
    errors = pair_errors(frame, ["p1", "p2", "p3", "p4", "p5"])
    # p1: severity not-aligned + adding comparison = 2
    # p2: location not-aligned + missing comparison + FN = 3
    # p3: FN + FP = 2 ; p4: FP = 1 ; p5: no rows = 0
    assert errors["errors"].to_dict() == {"p1": 2, "p2": 3, "p3": 2, "p4": 1, "p5": 0}
    assert errors.loc["p2", "missing_mentioned_comparison"] == 1
    dist = error_distribution(errors)
    assert dist.mean == pytest.approx(8 / 5)
    assert dist.median == 2.0
    assert dist.std == pytest.approx(math.sqrt(((2 - 1.6) ** 2 * 2 + (3 - 1.6) ** 2 + (1 - 1.6) ** 2 + 1.6**2) / 4))
    assert dist.error_free == pytest.approx(0.2)
    assert dist.histogram["2"] == 2 and dist.histogram["10+"] == 0
    # the row-level property agrees with the table
    assert sum(r.error_count for r in table) == 8


def test_empty_table(tiny):
    scores = entity_scores(judgement_frame([]), tiny, n_pairs=3)
    assert all(s.presence.f1 is None for s in scores)
    assert all(s.presence.tn == 3 for s in scores)
    assert averages(scores).macro_f1 is None


def test_signature_text_and_comparability():
    a = Signature(metric="spec-presence-macro-f1", ontology="o@1", engine="rules@1", options={"uncertain": "positive"})
    assert str(a) == (
        f"metric:spec-presence-macro-f1|ontology:o@1|engine:rules@1|model:none|prompt:none|uncertain:positive|version:{a.version}"
    )
    check_comparable(a, a.model_copy(update={"version": "9.9"}))
    with pytest.raises(SignatureMismatch, match="options"):
        check_comparable(a, a.model_copy(update={"options": {"uncertain": "negative"}}))


def test_signature_short_form_and_intervals_round_trip():
    import cxreval

    sig = cxreval.Signature(metric="spec-cxr", ontology="o@1", engine="rules@2", options={"uncertain": "positive"})
    boot = sig.with_intervals(method="percentile", resamples=1000, seed=7, confidence=0.9)
    assert "resamples:1000" in str(boot) and "seed:7" in str(boot) and "ci:percentile" in str(boot)
    assert boot.short().startswith("m:spec-cxr|o:o@1|e:rules@2|")
    assert cxreval.Signature.parse(boot.short()) == boot == cxreval.Signature.parse(str(boot))


def test_bench_interval_signatures_name_the_resampling(tmp_path):
    from cxreval.bench.config import BenchConfig
    from cxreval.bench.runner import run_benchmark
    from cxreval.cli import example_path
    from cxreval.io import read_pairs

    pairs = read_pairs(example_path())
    (tmp_path / "refs.csv").write_text("id,report\n" + "".join(f'{p.pair_id},"{p.reference}"\n' for p in pairs))
    cfg = BenchConfig.model_validate(
        {
            "name": "t",
            "metrics": ["spec-errors", "bleu2"],
            "bootstrap": {"resamples": 17, "seed": 3},
            "datasets": [{"name": "d", "references": {"path": str(tmp_path / "refs.csv")}}],
            "systems": [{"name": "n", "baseline": "normal-template"}],
        }
    )
    result, _ = run_benchmark(cfg, tmp_path / "out")
    for info in result.metrics:
        assert "resamples:17" in info.signature and "seed:3" in info.signature, info
