"""Weight-based metrics from local checkpoints (issue 16): the real loading and inference code on
tiny randomly initialised checkpoints of the same architectures (tests/tiny_checkpoints.py, built
once per session by the fixtures of tests/conftest.py); nothing is downloaded."""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cxreval.metrics import MetricUnavailable, get_metric
from tests.tiny_checkpoints import TEXTS

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

REFS = ["No pleural effusion.", "Large left pleural effusion.", "Heart size is normal.", "", "Lungs are clear."]
CANDS = ["No pleural effusion.", "The heart is normal.", "Mild cardiomegaly.", "No pneumothorax.", ""]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, one_torch_thread: None) -> Iterator[None]:
    """Belt and braces: hub offline, and any socket connection fails the test (with one torch
    thread: conftest.py)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield


# --- CheXbert / SembScore ----------------------------------------------------------------------


def test_chexbert_layouts_agree_and_shapes(chexbert_dirs: dict[str, Path]) -> None:
    from cxreval.metrics.chexbert import CONDITIONS, CheXbert

    a, b = CheXbert(chexbert_dirs["original"]), CheXbert(chexbert_dirs["hf"])
    ea, eb = a.embed(TEXTS), b.embed(TEXTS)
    assert ea.shape == (len(TEXTS), 32) and np.allclose(ea, eb, atol=1e-6)
    labels = a.labels(TEXTS)
    assert labels.shape == (len(TEXTS), len(CONDITIONS)) == (len(TEXTS), 14)
    assert labels[:, :13].max() <= 3 and labels[:, 13].max() <= 1 and labels.min() >= 0
    assert np.array_equal(labels, b.labels(TEXTS))
    assert np.array_equal(a.embed(TEXTS), ea)  # deterministic (eval mode, no dropout)


def test_chexbert_cls_is_the_encoders_first_token(chexbert_dirs: dict[str, Path]) -> None:
    """The embedding is the [CLS] state of the last layer, independent of the code under test."""
    import torch
    from transformers import BertModel, BertTokenizerFast

    from cxreval.metrics.chexbert import CheXbert

    tok = BertTokenizerFast.from_pretrained(str(chexbert_dirs["hf"]), local_files_only=True)
    ids = tok("Small left pleural effusion.")["input_ids"]
    assert tok.unk_token_id not in ids and len(ids) >= 6  # the tiny vocabulary really tokenizes
    bert = BertModel.from_pretrained(str(chexbert_dirs["hf"]), local_files_only=True).eval()
    with torch.no_grad():
        want = bert(**tok(["  Small left\n pleural   effusion. "], return_tensors="pt"))[0][0, 0].numpy()
    got = CheXbert(chexbert_dirs["original"]).embed(["Small left pleural effusion."])[0]
    assert np.allclose(got, want, atol=1e-5)


def test_sembscore_values(chexbert_dirs: dict[str, Path]) -> None:
    m = get_metric("sembscore", model_path=chexbert_dirs["original"])
    v = m.score_pairs(REFS, CANDS)
    assert v.shape == (5,) and np.isfinite(v).all() and ((v >= -1) & (v <= 1)).all()
    assert v[0] == pytest.approx(1.0, abs=1e-12)  # identical reports
    assert np.allclose(m.score_pairs(CANDS, REFS), v, atol=1e-6)  # symmetric
    emb = m.chexbert.embed([REFS[1], CANDS[1]])
    assert v[1] == pytest.approx(emb[0] @ emb[1] / np.linalg.norm(emb[0]) / np.linalg.norm(emb[1]), abs=1e-6)
    sig = str(m.signature)
    assert "metric:sembscore" in sig and "model:original@" in sig and "engine:chexbert" in sig
    assert str(get_metric("sembscore", model_path=chexbert_dirs["hf"]).signature) != sig  # other weights file


@pytest.mark.parametrize("remove", ["chexbert.pth", "vocab.txt"])
def test_chexbert_missing_file_is_named(chexbert_dirs: dict[str, Path], tmp_path: Path, remove: str) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for f in chexbert_dirs["original"].iterdir():
        if f.name != remove:
            (folder / f.name).write_bytes(f.read_bytes())
    with pytest.raises(MetricUnavailable, match="vocab.txt" if remove == "vocab.txt" else "heads.safetensors"):
        get_metric("sembscore", model_path=folder)


def test_chexbert_wrong_checkpoint_is_refused(chexbert_dirs: dict[str, Path], tmp_path: Path) -> None:
    import torch

    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "vocab.txt").write_text((chexbert_dirs["original"] / "vocab.txt").read_text())
    (folder / "config.json").write_text((chexbert_dirs["original"] / "config.json").read_text())
    torch.save(
        {"model_state_dict": {"module.bert.embeddings.word_embeddings.weight": torch.zeros(3, 3)}}, str(folder / "chexbert.pth")
    )
    with pytest.raises((MetricUnavailable, RuntimeError)):
        get_metric("sembscore", model_path=folder)


@pytest.mark.parametrize("name", ["sembscore", "bertscore-distilroberta", "radgraph-f1", "ratescore"])
@pytest.mark.parametrize(
    "given",
    [
        "StanfordAIMI/chexbert",
        "distilroberta-base",
        "bert-base-uncased",
        "StanfordAIMI/RRG_scorers",
        "Angelakeke/RaTE-NER-Deberta",
    ],
)
def test_hub_ids_are_refused_without_network(name: str, given: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # so that no folder of that name exists
    with pytest.raises(MetricUnavailable, match="never downloads"):
        get_metric(name, model_path=given)


def test_no_path_says_what_to_supply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXREVAL_WEIGHTS", raising=False)
    with pytest.raises(MetricUnavailable, match="chexbert.pth.*CXREVAL_WEIGHTS"):
        get_metric("sembscore")
    with pytest.raises(MetricUnavailable, match="config.json.*CXREVAL_WEIGHTS"):
        get_metric("bertscore-distilroberta")


def test_weights_env_folder_is_used(chexbert_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "chexbert").symlink_to(chexbert_dirs["original"], target_is_directory=True)
    monkeypatch.setenv("CXREVAL_WEIGHTS", str(tmp_path))
    assert get_metric("sembscore").score_pairs(["a b"], ["a b"])[0] == pytest.approx(1.0)


# --- ReXrank's BERTScore -------------------------------------------------------------------------


def _bert_score_by_hand(folder: Path, refs: list[str], cands: list[str], idf: bool, max_length: int = 512) -> np.ndarray:
    """bert-score 0.3.13's greedy_cos_idf, unbatched: layer 5, specials weight 0, rescaled F
    (also the MetricTester's reference for bertscore-distilroberta: tests/metric_tester.py)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, add_prefix_space=True)
    assert tok.unk_token_id not in tok.encode("Small left pleural effusion.")  # really tokenizes
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    specials = {tok.cls_token_id, tok.sep_token_id}

    def enc(text: str) -> tuple[list[int], np.ndarray]:
        ids = tok.encode(re.sub(r" +", " ", text).strip(), add_special_tokens=True, truncation=True, max_length=max_length)
        with torch.no_grad():
            h = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[5][0]
        return ids, torch.nn.functional.normalize(h, dim=-1).numpy()

    df: dict[int, int] = {}
    for r in refs:
        for i in set(enc(r)[0]):
            df[i] = df.get(i, 0) + 1

    def w(ids: list[int]) -> np.ndarray:
        base = [math.log((len(refs) + 1) / (df.get(i, 0) + 1)) if idf else 1.0 for i in ids]
        return np.array([0.0 if i in specials else x for i, x in zip(ids, base)])

    out = []
    for r, c in zip(refs, cands):
        (ir, er), (ic, ec) = enc(r), enc(c)
        wr, wc = w(ir), w(ic)
        sim = ec @ er.T
        p = 0.0 if wc.sum() == 0 else (sim.max(1) * wc).sum() / wc.sum()
        rr = 0.0 if wr.sum() == 0 else (sim.max(0) * wr).sum() / wr.sum()
        f = 0.0 if p + rr == 0 else 2 * p * rr / (p + rr)
        out.append((f - 0.8473319) / (1 - 0.8473319))
    return np.array(out)


@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_distilroberta_equals_bert_score_by_hand(roberta_dir: Path, idf: bool) -> None:
    refs, cands = [r for r in REFS if r], [c or "x" for c, r in zip(CANDS, REFS) if r]
    m = get_metric("bertscore-distilroberta", model_path=roberta_dir, idf=idf, batch_size=2)
    assert np.allclose(m.score_pairs(refs, cands), _bert_score_by_hand(roberta_dir, refs, cands, idf), atol=1e-5)


def test_bertscore_distilroberta_values_and_signature(roberta_dir: Path) -> None:
    m = get_metric("bertscore-distilroberta", model_path=roberta_dir)
    v = m.score_pairs(REFS, CANDS)
    assert v.shape == (5,) and v[0] == pytest.approx(1.0, abs=1e-6)
    b = 0.8473319
    assert v[3] == pytest.approx(-b / (1 - b)) and v[4] == pytest.approx(-b / (1 - b))  # an empty side: F = 0
    assert np.allclose(
        get_metric("bertscore-distilroberta", model_path=roberta_dir).score_pairs(CANDS, REFS), v, atol=1e-6
    )  # symmetric F, deterministic
    sig = str(m.signature)
    for part in ("metric:bertscore-f1", "layer:5", "idf:no", "rescale:bert-score-0.3.13:0.8473319", "model:distilroberta-base@"):
        assert part in sig, (part, sig)


def test_bertscore_distilroberta_refuses_too_few_layers(chexbert_dirs: dict[str, Path]) -> None:
    with pytest.raises(MetricUnavailable, match="layer 5"):
        get_metric("bertscore-distilroberta", model_path=chexbert_dirs["hf"])  # a 2-layer BERT


def test_bertscore_distilroberta_missing_weights_named(roberta_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "distilroberta-base"
    folder.mkdir()
    for f in roberta_dir.iterdir():
        if f.name != "model.safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    with pytest.raises(MetricUnavailable, match="model.safetensors"):
        get_metric("bertscore-distilroberta", model_path=folder)


# The MetricTester's checks on these checkpoints (sembscore, bertscore-distilroberta, and every
# other weight-based metric): tests/test_metric_tester.py, with the session fixtures of conftest.py.


# --- RadCliQ-v1 ----------------------------------------------------------------------------------


def test_radcliq_formula_by_hand() -> None:
    from cxreval.metrics.radcliq import (
        COEFS,
        INTERCEPT,
        PERFECT,
        SCALER_MEAN,
        radcliq_v1,
    )

    assert radcliq_v1(SCALER_MEAN)[0] == pytest.approx(INTERCEPT, abs=1e-15)  # at the mean: the intercept
    x = np.array([0.5, 0.4, 0.9, 0.3])
    by_hand = (
        -0.377083683 * (0.5 - 0.53792312) / 0.30282584
        - 0.370300100 * (0.4 - 0.61757256) / 0.22430938
        - 0.252616218 * (0.9 - 0.76479421) / 0.25394391
        + 4.31504841e-12 * (0.3 - 0.44738335) / 0.29892717
        + 2.46655256e-10
    )
    assert radcliq_v1(x)[0] == pytest.approx(by_hand, abs=1e-12)
    assert (COEFS[:3] < 0).all() and PERFECT == pytest.approx(-1.44069, abs=1e-4)


# RadCliQ-v1 on its four real components (tiny checkpoints): tests/test_weight_metrics_radgraph.py
