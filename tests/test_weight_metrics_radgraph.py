"""RadGraph-F1, RaTEScore and RadCliQ-v1 from local checkpoints (issue 16, item 2): the F1 and
RaTE functions against hand-computed values, and the real loading and inference code on tiny
randomly initialised checkpoints of the same architectures (tests/tiny_checkpoints.py, built once
per session by the fixtures of tests/conftest.py); nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cxreval.metrics import MetricUnavailable, get_metric
from cxreval.metrics.radgraph import (
    Annotation,
    Entity,
    radgraph_combined,
    relation_set,
    set_f1,
)
from cxreval.metrics.ratescore import (
    NO_ENTITY,
    affinity_matrix,
    bio_entities,
    directed_score,
    rate_score,
)
from cxreval.testing.metric_tester import IDENTICAL
from tests.test_weight_metrics import _offline  # noqa: F401  (an autouse fixture, used by name)
from tests.tiny_checkpoints import MAX_LEN, TEXTS, WIDTH

REFS = ["Small left pleural effusion.", "No pneumothorax. Lungs are clear.", "", "Heart is normal in size.", ""]
CANDS = [
    "Small left pleural effusion.",
    "Moderate cardiomegaly with pulmonary edema.",
    "No pneumothorax.",
    "The heart is normal.",
    "",
]


# --- RadGraph-F1 as pure functions, by hand ------------------------------------------------------


def _graph(entities: list[tuple[str, str]], relations: list[tuple[int, int, str]] = ()) -> Annotation:  # type: ignore[assignment]
    return Annotation(tuple(Entity(t, lab, i, i) for i, (t, lab) in enumerate(entities)), tuple(relations))


def test_set_f1_by_hand() -> None:
    ref = {("effusion", "OBS-DP"), ("pleural", "ANAT-DP"), ("left", "ANAT-DP")}
    cand = {("effusion", "OBS-DP"), ("pleural", "ANAT-DP"), ("edema", "OBS-DP"), ("heart", "ANAT-DP")}
    # tp = 2, P = 2/4, R = 2/3, F1 = 2 * (1/2 * 2/3) / (1/2 + 2/3) = 4/7
    assert set_f1(ref, cand) == pytest.approx(4 / 7, abs=1e-15)
    assert set_f1(cand, ref) == pytest.approx(4 / 7, abs=1e-15)  # symmetric
    assert set_f1(ref, ref) == 1.0
    # CXR-Report-Metric's compute_f1: an empty denominator counts 0, so empty vs empty is 0, not 1
    assert set_f1(set(), set()) == 0.0
    assert set_f1(ref, set()) == 0.0 and set_f1(set(), cand) == 0.0
    assert set_f1({("a", "OBS-DP")}, {("a", "OBS-U")}) == 0.0  # the label is part of the match


def test_radgraph_combined_by_hand() -> None:
    ref = _graph([("effusion", "OBS-DP"), ("pleural", "ANAT-DP"), ("left", "ANAT-DP")], [(0, 1, "located_at"), (2, 1, "modify")])
    cand = _graph([("effusion", "OBS-DP"), ("pleural", "ANAT-DP")], [(1, 0, "located_at")])
    assert relation_set(ref) == {
        ("effusion", "OBS-DP", "pleural", "ANAT-DP", "located_at"),
        ("left", "ANAT-DP", "pleural", "ANAT-DP", "modify"),
    }
    # entities: tp 2, P 1, R 2/3 -> F1 0.8; relations: the candidate's points the other way -> 0
    assert radgraph_combined(ref, cand) == pytest.approx(0.4, abs=1e-15)
    same = _graph([("effusion", "OBS-DP"), ("pleural", "ANAT-DP")], [(0, 1, "located_at")])
    assert radgraph_combined(ref, same) == pytest.approx((0.8 + 2 / 3) / 2, abs=1e-15)  # rel: tp 1, P 1, R 1/2
    assert radgraph_combined(ref, ref) == 1.0
    assert radgraph_combined(_graph([]), _graph([])) == 0.0  # both empty: 0 (reference behaviour)
    # entities but no relation on either side: entity F1 1, relation F1 0 -> 0.5
    assert radgraph_combined(_graph([("effusion", "OBS-DP")]), _graph([("effusion", "OBS-DP")])) == 0.5
    assert radgraph_combined(_graph([("Effusion", "OBS-DP")]), _graph([("effusion", "OBS-DP")])) == 0.0  # cased


def test_word_split_follows_the_radgraph_package() -> None:
    from cxreval.metrics.radgraph import enumerate_spans, split_words

    assert split_words("No effusion/pneumothorax, (stable).", "radgraph") == [
        "No",
        "effusion",
        "/",
        "pneumothorax",
        ",",
        "(",
        "stable",
        ")",
        ".",
    ]
    assert split_words("ET tube 2.5cm above carina; 50%.", "wordpunct") == [
        "ET",
        "tube",
        "2",
        ".",
        "5cm",
        "above",
        "carina",
        ";",
        "50",
        "%",
        ".",
    ]  # "%." -> "% ."
    assert enumerate_spans(3, 2) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)]


# --- a tiny RadGraph checkpoint in the radgraph package's layout (tests/tiny_checkpoints.py) ---------


def test_radgraph_word_vectors_are_bert_piece_means(radgraph_dir: Path) -> None:
    """A word's vector is the mean of its pieces' last-layer states, computed here without the code under test."""
    import torch
    from transformers import BertModel, BertTokenizerFast

    from cxreval.metrics.radgraph import RadGraphModel

    words = ["small", "left", "pleural", "effusion", "."]
    tok = BertTokenizerFast.from_pretrained(str(radgraph_dir / "encoder"), local_files_only=True)
    bert = BertModel.from_pretrained(str(radgraph_dir / "encoder"), local_files_only=True).eval()
    pieces = [tok(w, add_special_tokens=False)["input_ids"] for w in words]
    joined = [t for p in pieces for t in p]
    assert all(pieces) and tok.unk_token_id not in joined
    flat = [tok.cls_token_id, *joined, tok.sep_token_id]
    assert len(flat) <= MAX_LEN  # one segment: no folding
    with torch.no_grad():
        h = bert(input_ids=torch.tensor([flat])).last_hidden_state[0]
        got = RadGraphModel(radgraph_dir)._word_vectors(words).numpy()
    pos = 1
    for w, p in enumerate(pieces):
        assert np.allclose(got[w], h[pos : pos + len(p)].mean(dim=0).numpy(), atol=1e-5)
        pos += len(p)


def test_radgraph_ner_label_by_hand(radgraph_dir: Path) -> None:
    """The label of every span equals the checkpoint's scorer applied by hand (relu FF, linear, null 0)."""
    import torch

    from cxreval.metrics.radgraph import ENTITY_LABELS, RadGraphModel, enumerate_spans

    state = torch.load(str(radgraph_dir / "weights.th"), weights_only=True)
    p = "_ner._ner_scorers.radgraph__ner_labels"
    model = RadGraphModel(radgraph_dir)
    words = ["small", "left", "pleural", "effusion"]
    with torch.no_grad():
        x = model._word_vectors(words)
    width = state["_endpoint_span_extractor._span_width_embedding.weight"]
    want = []
    for s, e in enumerate_spans(len(words), WIDTH):
        v = torch.cat([x[s], x[e], width[e - s]])
        for k in (0, 1):
            v = (state[f"{p}.0._module._linear_layers.{k}.weight"] @ v + state[f"{p}.0._module._linear_layers.{k}.bias"]).relu()
        scores = [0.0, *(state[f"{p}.1._module.weight"] @ v + state[f"{p}.1._module.bias"]).tolist()]
        best = int(np.argmax(scores))
        if best:
            want.append((" ".join(words[s : e + 1]), ENTITY_LABELS[best - 1], s, e))
    graph = model.annotate_words(words)
    assert [(e.tokens, e.label, e.start, e.end) for e in graph.entities] == want and want
    assert all(0 <= i < len(want) and 0 <= j < len(want) for i, j, _ in graph.relations)


def test_radgraph_metric_values(radgraph_dir: Path) -> None:
    m = get_metric("radgraph-f1", model_path=radgraph_dir)
    graph = m.radgraph.annotate(REFS[0])
    assert graph.entities and graph.relations  # the tiny model predicts both, so identity can score 1
    long = " ".join(TEXTS * 3)  # more WordPieces than max_length: folded into segments
    assert len(m.radgraph.annotate(long).entities) > 0
    v = m.score_pairs(REFS, CANDS)
    assert v.shape == (5,) and ((v >= 0) & (v <= 1)).all()
    assert v[0] == 1.0  # identical reports
    assert v[2] == 0.0 and v[4] == 0.0  # an empty side, and empty vs empty: 0 (CXR-Report-Metric)
    assert np.array_equal(m.score_pairs(CANDS, REFS), v)  # both F1s are symmetric
    by_hand = [radgraph_combined(m.radgraph.annotate(r), m.radgraph.annotate(c)) for r, c in zip(REFS, CANDS)]
    assert np.array_equal(v, by_hand)
    sig = str(m.signature)
    for part in ("metric:radgraph-f1", "model:radgraph@", "words:radgraph", "max_span_width:3", "reward:combined"):
        assert part in sig, (part, sig)


@pytest.mark.parametrize("remove", ["weights.th", "vocabulary", "encoder", "config.json"])
def test_radgraph_missing_file_is_named(radgraph_dir: Path, tmp_path: Path, remove: str) -> None:
    import shutil

    folder = tmp_path / "radgraph"
    shutil.copytree(radgraph_dir, folder)
    target = folder / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(MetricUnavailable, match=remove.replace(".", r"\.") if remove != "encoder" else "encoder/"):
        get_metric("radgraph-f1", model_path=folder)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_radgraph_broken_config_is_named(radgraph_dir: Path, tmp_path: Path, text: str) -> None:
    import shutil

    folder = tmp_path / "radgraph"
    shutil.copytree(radgraph_dir, folder)
    (folder / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(MetricUnavailable, match=r"radgraph-f1: .*config\.json"):
        get_metric("radgraph-f1", model_path=folder)


def test_radgraph_wrong_checkpoint_is_refused(radgraph_dir: Path, tmp_path: Path) -> None:
    import shutil

    import torch

    folder = tmp_path / "radgraph"
    shutil.copytree(radgraph_dir, folder)
    state = torch.load(str(folder / "weights.th"), weights_only=True)
    state.pop("_relation._relation_scorers.radgraph__relation_labels.bias")
    torch.save(state, str(folder / "weights.th"))
    with pytest.raises(MetricUnavailable, match="missing.*_relation_scorers"):
        get_metric("radgraph-f1", model_path=folder)


# hub ids ("StanfordAIMI/RRG_scorers", ...) are refused without a network call: test_weight_metrics.py


def test_no_path_says_what_to_supply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXREVAL_WEIGHTS", raising=False)
    with pytest.raises(MetricUnavailable, match="weights.th.*CXREVAL_WEIGHTS"):
        get_metric("radgraph-f1")
    with pytest.raises(MetricUnavailable, match="id2label.*CXREVAL_WEIGHTS"):
        get_metric("ratescore")
    with pytest.raises(MetricUnavailable, match="weights.th"):
        get_metric("radcliq-v1")  # no RadGraph-F1: unavailable, never approximated


# --- RadCliQ-v1 on its four real components --------------------------------------------------------


def test_radcliq_on_tiny_checkpoints(radgraph_dir: Path, request: pytest.FixtureRequest) -> None:
    from cxreval.metrics.radcliq import PERFECT, radcliq_v1

    chexbert, roberta = request.getfixturevalue("chexbert_dirs"), request.getfixturevalue("roberta_dir")
    m = get_metric("radcliq-v1", radgraph_path=radgraph_dir, bertscore_path=roberta, chexbert_path=chexbert["original"])
    names = [c.name for c in m.components]
    assert names == ["radgraph-f1", "bertscore-distilroberta", "sembscore", "bleu2"]
    assert m.components[0].radgraph.path == radgraph_dir.resolve()
    x = np.column_stack([p.score_pairs(REFS, CANDS) for p in m.components])
    v = m.score_pairs(REFS, CANDS)
    assert np.allclose(v, radcliq_v1(x), atol=1e-12) and m.higher_is_better is False
    assert v[0] == pytest.approx(PERFECT, abs=1e-6)  # identical reports: every input at its best
    assert (v[1:] > PERFECT).all()
    sig = str(m.signature)
    assert "radgraph-f1=radgraph@" in sig and "coefs:cxr-report-metric:radcliq-v1.pkl" in sig


# --- RaTEScore ---------------------------------------------------------------------------------


def test_bio_entities_follow_post_process() -> None:
    toks = ["[CLS]", "small", "left", "pleural", "effusion", "no", "edema", "[SEP]"]
    labels = ["O", "B-ABNORMALITY", "B-ANATOMY", "I-ANATOMY", "B-ABNORMALITY", "O", "B-NON-ABNORMALITY", "O"]
    assert bio_entities(toks, labels) == [
        (1, 1, "ABNORMALITY"),
        (2, 3, "ANATOMY"),
        (4, 4, "ABNORMALITY"),
        (6, 6, "NON-ABNORMALITY"),
    ]
    # an entity still open at the end (nothing closed before) ends at the token before the last
    assert bio_entities(["[CLS]", "a", "b", "[SEP]"], ["O", "B-DISEASE", "I-DISEASE", "I-DISEASE"]) == [(1, 2, "DISEASE")]


def test_rate_score_by_hand() -> None:
    w = affinity_matrix("long")
    a = np.array([[1.0, 0.0], [0.0, 2.0]])  # DISEASE, ANATOMY
    b = np.array([[3.0, 4.0]])  # NON-DISEASE
    # A -> B: both match b; cos 0.6 (DISEASE vs NON-DISEASE: negation, times neg_weight) and 0.8
    wd, wa, neg = w[("DISEASE", "NON-DISEASE")], w[("ANATOMY", "NON-DISEASE")], w[("NEG", "WEIGHT")]
    assert wd == 0.3789136708096537 and neg == 0.8716553966489615
    ab = (0.6 * wd * neg + 0.8 * wa) / (wd + wa)
    assert directed_score(a, b, ["DISEASE", "ANATOMY"], ["NON-DISEASE"], w) == pytest.approx(ab, abs=1e-12)
    # B -> A: b's best match is the anatomy entity (cos 0.8); no negation pair
    ba = 0.8 * w[("NON-DISEASE", "ANATOMY")] / w[("NON-DISEASE", "ANATOMY")]
    got = rate_score((a, ["DISEASE", "ANATOMY"]), (b, ["NON-DISEASE"]), w)
    assert got == pytest.approx(2 * ab * ba / (ab + ba), abs=1e-12)
    assert rate_score((b, ["NON-DISEASE"]), (a, ["DISEASE", "ANATOMY"]), w) == pytest.approx(got, abs=1e-12)
    assert rate_score((a, ["DISEASE", "ANATOMY"]), (a, ["DISEASE", "ANATOMY"]), w) == pytest.approx(1.0)
    empty = (np.zeros((0, 2)), [])
    assert rate_score(empty, (a, ["DISEASE", "ANATOMY"]), w) == NO_ENTITY == rate_score(empty, empty, w) == 0.5
    assert affinity_matrix("short")[("NEG", "WEIGHT")] == 0.3611577852354489
    with pytest.raises(ValueError, match="long"):
        affinity_matrix("medium")


def test_ratescore_values(rate_dirs: dict[str, Path]) -> None:
    m = get_metric("ratescore", model_path=rate_dirs["ner"], embedding_path=rate_dirs["emb"])
    found = m.entities("Small left pleural effusion. No pneumothorax.")
    assert found and all(k in ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY") for _, k in found)
    v = m.score_pairs(REFS, CANDS)
    assert v.shape == (5,) and np.isfinite(v).all() and (v <= 1 + 1e-9).all()
    assert v[0] == pytest.approx(1.0, abs=1e-6)  # identical reports
    assert v[2] == NO_ENTITY and v[4] == NO_ENTITY  # a side with no entity: 0.5 (the reference's rule)
    assert np.allclose(m.score_pairs(CANDS, REFS), v, atol=1e-12)  # the harmonic mean is symmetric
    sig = str(m.signature)
    for part in ("metric:ratescore", "model:RaTE-NER-Deberta@", "+BioLORD-2023-C@", "affinity:long", "sentences:regex"):
        assert part in sig, (part, sig)
    short = get_metric("ratescore", model_path=rate_dirs["ner"], embedding_path=rate_dirs["emb"], affinity="short")
    assert "affinity:short" in str(short.signature)


def test_ratescore_refuses_other_labels_and_missing_files(rate_dirs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "ner"
    shutil.copytree(rate_dirs["ner"], folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["id2label"] = {"0": "O", "1": "B-PER", "2": "I-PER"}
    cfg["label2id"] = {"O": 0, "B-PER": 1, "I-PER": 2}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MetricUnavailable, match="B-PER"):
        get_metric("ratescore", model_path=folder, embedding_path=rate_dirs["emb"])
    emb = tmp_path / "emb"
    shutil.copytree(rate_dirs["emb"], emb)
    (emb / "model.safetensors").unlink()
    with pytest.raises(MetricUnavailable, match="model.safetensors"):
        get_metric("ratescore", model_path=rate_dirs["ner"], embedding_path=emb)


# The MetricTester's checks on these checkpoints: tests/test_metric_tester.py (session fixtures of
# conftest.py). What it cannot check on the random NER is checked here:


def test_ratescore_identity_follows_the_first_entity_rule(rate_dirs: dict[str, Path]) -> None:
    """Identical reports score 1 when every entity text has one type; the tiny random NER tags one
    word with several types, and the tie between equal embeddings goes to the first entity (as in
    the reference), so such a report scores below 1 against itself."""
    m = get_metric("ratescore", model_path=rate_dirs["ner"], embedding_path=rate_dirs["emb"])
    seen = set()
    for text, _ in IDENTICAL:
        found = m.entities(text)
        value = m.score_pairs([text], [text])[0]
        one_type = len(dict(found)) == len(set(found))  # no entity text with two types
        seen.add(one_type)
        if one_type:
            assert value == pytest.approx(1.0, abs=1e-6), (text, found)
        else:
            assert value < 1.0
    assert seen == {True, False}  # both rules are seen on this NER (the long report has a two-type word)
