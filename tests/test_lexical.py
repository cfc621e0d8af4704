"""Lexical metrics: ReXrank's BLEU-2 (exact), ROUGE-L, corpus BLEU-4 (sacreBLEU), BERTScore."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import numpy as np
import pytest

from cxreval.metrics import MetricUnavailable, available_metrics, get_metric
from cxreval.metrics.lexical import (
    Bleu4Corpus,
    bleu2_rexrank,
    bleu_from_stats,
    lcs_length,
    rexrank_tokens,
    rouge_l,
)
from cxreval.testing.reference import lcs_length_dp
from tests.conftest import shared_data_path

MOERAD = shared_data_path() / "iu-gen-moerad"


def test_registered_with_directions_and_signatures() -> None:
    names = available_metrics()
    for name in ("bleu2", "rouge-l", "bleu4-corpus", "bertscore", "spec-errors"):
        assert name in names
    for name in ("bleu2", "rouge-l", "bleu4-corpus"):
        m = get_metric(name)
        assert m.higher_is_better is True
        assert f"metric:{name}" in str(m.signature)
    assert "tok:rexrank" in str(get_metric("bleu2").signature)
    assert "beta:1.2" in str(get_metric("rouge-l").signature)
    assert "tok:13a" in str(get_metric("bleu4-corpus").signature)


def test_rexrank_tokens_lowercase_and_space_out_periods() -> None:
    assert rexrank_tokens("No  effusion.Heart NORMAL.") == ["no", "effusion", ".heart", "normal", "."]


def test_bleu2_conventions_by_hand() -> None:
    # identical: 1
    assert bleu2_rexrank("a b c d", "a b c d") == pytest.approx(1.0)
    # p1 = 2/4, p2 = 1/3, no brevity penalty
    assert bleu2_rexrank("a b c d", "a b x y") == pytest.approx(math.sqrt(0.5 / 3))
    # no bigram match: p2 smoothed to 0.1 / #bigrams (3); BP exp(1 - 8/4)
    assert bleu2_rexrank("a b c d e f g h", "a c e g") == pytest.approx(math.exp(1 - 2) * math.sqrt(1 * 0.1 / 3))
    # a one-token candidate has no bigram: 0.1 / max(1, 0)
    assert bleu2_rexrank("a b c d", "a") == pytest.approx(math.exp(1 - 4) * math.sqrt(0.1))
    # no unigram match, or an empty candidate: 0
    assert bleu2_rexrank("a b", "c d") == 0.0
    assert bleu2_rexrank("a b", "") == 0.0
    # case and '.' spacing
    assert bleu2_rexrank("No effusion.", "no EFFUSION .") == pytest.approx(1.0)


@pytest.mark.skipif(not (MOERAD / "report_scores.csv").exists(), reason="../shared/data not available")
def test_bleu2_equals_rexrank_values_for_moerad_on_all_590_studies() -> None:
    with (MOERAD / "gts.csv").open(newline="", encoding="utf-8") as fh:
        refs = [r["report"] for r in csv.DictReader(fh)]
    with (MOERAD / "report_scores.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(refs) == 590
    # report_scores.study_id is the row index into gts/preds
    ours = get_metric("bleu2").score_pairs([refs[int(r["study_id"])] for r in rows], [r["report"] for r in rows])
    theirs = np.array([float(r["bleu_score"]) for r in rows])
    assert np.max(np.abs(ours - theirs)) <= 1e-6
    assert ours.mean() == pytest.approx(0.2704, abs=5e-5)  # MoERad's published IU BLEU


def test_bleu2_matches_fast_bleu_when_installed() -> None:
    fast_bleu = pytest.importorskip("fast_bleu")
    rng = random.Random(1)
    words = ["no", "effusion", "heart", "normal", "size", ".", "left", "mild", "the", "lungs", "clear"]
    for _ in range(200):
        ref = " ".join(rng.choice(words) for _ in range(rng.randint(1, 25)))
        cand = " ".join(rng.choice(words) for _ in range(rng.randint(1, 25)))
        want = fast_bleu.BLEU([rexrank_tokens(ref)], {"b": [0.5, 0.5]}).get_score([rexrank_tokens(cand)])["b"][0]
        assert bleu2_rexrank(ref, cand) == pytest.approx(want, abs=1e-9)


def test_lcs_bit_parallel_equals_dynamic_programme() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        a = [rng.choice("abcdef") for _ in range(rng.randint(0, 40))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == lcs_length_dp(a, b)


def test_rouge_l_by_hand() -> None:
    assert rouge_l("The lungs are clear.", "the lungs are CLEAR") == pytest.approx(1.0)
    assert rouge_l("a b c d", "x y") == 0.0
    # LCS 2 ("a c"), P = 2/3, R = 2/4, beta 1.2
    p, r, b = 2 / 3, 2 / 4, 1.2
    assert rouge_l("a b c d", "a x c") == pytest.approx((1 + b * b) * p * r / (r + b * b * p))
    assert rouge_l("a b c d", "a x c", beta=1.0) == pytest.approx(2 * p * r / (p + r))


def test_corpus_bleu4_equals_sacrebleu() -> None:
    sacrebleu = pytest.importorskip("sacrebleu")
    rng = random.Random(2)
    words = "no pleural effusion or pneumothorax the heart is normal in size mild left basilar atelectasis".split()
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 20))) + "." for _ in range(60)]
    cands = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 20))).upper() for _ in range(60)]
    m = Bleu4Corpus()
    want = sacrebleu.corpus_bleu(cands, [refs], lowercase=True).score / 100
    assert m.corpus_score(refs, cands).value == pytest.approx(want, abs=1e-12)
    stats = m.pair_stats(refs, cands)
    assert stats.shape == (60, 10)
    # sums over any subset give that subset's corpus BLEU (what the bootstrap relies on)
    sub = slice(10, 35)
    assert m.compute(stats[sub].sum(axis=0, keepdims=True))[0] == pytest.approx(
        sacrebleu.corpus_bleu(cands[sub], [refs[sub]], lowercase=True).score / 100, abs=1e-12
    )
    # per pair: sentence-level values in [0, 1]
    per = m.score_pairs(refs, cands)
    assert per.shape == (60,) and np.all((per >= 0) & (per <= 1))
    assert m.corpus_score(["a b c"], [""]).value == 0.0
    assert bleu_from_stats(np.zeros(10))[0] == 0.0


def test_bertscore_unavailable_or_sane() -> None:
    try:
        m = get_metric("bertscore")
    except MetricUnavailable as exc:
        assert "pip install" in str(exc)
        return
    s = m.score_pairs(["No pleural effusion.", "Large left pleural effusion."], ["No pleural effusion.", "The heart is normal."])
    assert s[0] == pytest.approx(1.0, abs=1e-5)
    assert 0 <= s[1] < s[0]
    assert "model:all-MiniLM-L6-v2" in str(m.signature)


def test_bertscore_missing_encoder_path_says_how_to_fix(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    with pytest.raises(MetricUnavailable, match="no encoder"):
        get_metric("bertscore", model_path=tmp_path)
