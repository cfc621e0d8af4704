"""Tiny randomly initialised checkpoints of the weight-based metrics' architectures, built from
scratch in a test's temporary folder (nothing is downloaded): a 2-layer BERT, CheXbert in both
layouts, a 6-layer RoBERTa (distilroberta-base's shape), a RadGraph archive and RaTEScore's NER
and embedding models. ``tests/conftest.py`` builds each once per test session (per xdist worker)."""

from __future__ import annotations

import json
from pathlib import Path

TEXTS = [
    "No acute cardiopulmonary process.",
    "Small left pleural effusion.",
    "The heart is normal in size.",
    "Moderate cardiomegaly with pulmonary edema.",
    "No pneumothorax. Lungs are clear.",
    "Right lower lobe consolidation, likely pneumonia.",
    "Support devices in place.",
]

# RadGraph's shape: max span width, span-width feature size, feed-forward width, encoder segment length
WIDTH, FEATURE, HIDDEN, MAX_LEN = 3, 8, 16, 40

#: RaTEScore's NER labels (RaTE-NER-Deberta's id2label)
RATE_LABELS = ["O"] + [
    f"{p}-{t}" for t in ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY") for p in ("B", "I")
]


def tiny_bert(folder: Path) -> None:
    """A 2-layer BERT (hidden 32) with a WordPiece vocabulary trained on TEXTS, saved with save_pretrained."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(TEXTS * 5, vocab_size=200, min_frequency=1)
    wp.save_model(str(folder))
    BertTokenizerFast.from_pretrained(str(folder), local_files_only=True).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=wp.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(str(folder))


def write_chexbert(root: Path) -> dict[str, Path]:
    """Two layouts of one tiny CheXbert: the original ``chexbert.pth`` (DataParallel keys, with
    vocab.txt + config.json) and a transformers folder + ``heads.safetensors``."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    hf = root / "hf"
    tiny_bert(hf)
    torch.manual_seed(1)
    heads = {
        f"linear_heads.{i}.{p}": t for i in range(14) for p, t in torch.nn.Linear(32, 4 if i < 13 else 2).state_dict().items()
    }
    save_file({k: v.contiguous() for k, v in heads.items()}, str(hf / "heads.safetensors"))
    orig = root / "original"
    orig.mkdir()
    (orig / "vocab.txt").write_text((hf / "vocab.txt").read_text())
    (orig / "config.json").write_text((hf / "config.json").read_text())
    bert = BertModel.from_pretrained(str(hf), local_files_only=True)
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items()}
    state.update({f"module.{k}": v for k, v in heads.items()})
    torch.save({"epoch": 3, "model_state_dict": state}, str(orig / "chexbert.pth"))
    assert BertConfig.from_json_file(str(orig / "config.json")).hidden_size == 32
    return {"hf": hf, "original": orig}


def write_roberta(folder: Path) -> Path:
    """A 6-layer RoBERTa (hidden 32) with a byte-level BPE trained on TEXTS: distilroberta-base's shape."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder.mkdir(parents=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        TEXTS * 5, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    bpe.save_model(str(folder))
    RobertaTokenizerFast.from_pretrained(str(folder), local_files_only=True).save_pretrained(str(folder))
    torch.manual_seed(2)
    config = RobertaConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=6,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=514,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    RobertaModel(config).save_pretrained(str(folder))
    return folder


def _linear(gen: object, n_in: int, n_out: int, prefix: str, bias: list[float] | None = None) -> dict[str, object]:
    import torch

    b = torch.tensor(bias, dtype=torch.float32) if bias is not None else torch.randn(n_out, generator=gen) * 0.1
    return {f"{prefix}.weight": torch.randn(n_out, n_in, generator=gen) * 0.3, f"{prefix}.bias": b}


def _ff(gen: object, n_in: int, prefix: str) -> dict[str, object]:
    return {
        **_linear(gen, n_in, HIDDEN, f"{prefix}._linear_layers.0"),
        **_linear(gen, HIDDEN, HIDDEN, f"{prefix}._linear_layers.1"),
    }


def write_tiny_radgraph(folder: Path) -> dict[str, object]:
    """A radgraph archive's files for a 2-layer BERT: config.json, vocabulary/, weights.th (keys
    written here by hand with the package's names, unused coref/events keys included) + encoder/."""
    import torch
    from transformers import BertModel

    tiny_bert(folder / "encoder")
    bert = BertModel.from_pretrained(str(folder / "encoder"), local_files_only=True)
    gen = torch.Generator().manual_seed(5)
    span = 2 * 32 + FEATURE
    ner, rel = "radgraph__ner_labels", "radgraph__relation_labels"
    state: dict[str, object] = {
        f"_embedder.token_embedder_bert._matched_embedder.transformer_model.{k}": v for k, v in bert.state_dict().items()
    }
    state["_endpoint_span_extractor._span_width_embedding.weight"] = torch.randn(WIDTH, FEATURE, generator=gen)
    state |= _ff(gen, span, f"_ner._ner_scorers.{ner}.0._module")
    state |= _linear(gen, HIDDEN, 4, f"_ner._ner_scorers.{ner}.1._module", bias=[1.5, 0.5, -0.5, 0.0])
    state |= _ff(gen, span, f"_relation._mention_pruners.{rel}._scorer.0._module")
    state |= _linear(gen, HIDDEN, 1, f"_relation._mention_pruners.{rel}._scorer.1._module")
    state |= _ff(gen, 3 * span, f"_relation._relation_feedforwards.{rel}")
    state |= _linear(gen, HIDDEN, 3, f"_relation._relation_scorers.{rel}", bias=[1.0, 0.5, -1.0])
    state["_coref._antecedent_feedforward._module._linear_layers.0.weight"] = torch.zeros(2, 2)
    state["_events._trigger_scorers.x.weight"] = torch.zeros(2, 2)
    torch.save(state, str(folder / "weights.th"))
    (folder / "vocabulary").mkdir()
    (folder / "vocabulary" / f"{ner}.txt").write_text("\nANAT-DP\nOBS-DP\nOBS-U\nOBS-DA\n")
    (folder / "vocabulary" / f"{rel}.txt").write_text("suggestive_of\nlocated_at\nmodify\n")
    (folder / "vocabulary" / "non_padded_namespaces.txt").write_text("*tags\n*labels\n")
    bert_cfg = {"type": "pretrained_transformer_mismatched", "model_name": "tiny-bert", "max_length": MAX_LEN}
    config = {
        "dataset_reader": {"type": "dygie", "max_span_width": WIDTH, "token_indexers": {"bert": bert_cfg}},
        "model": {
            "type": "dygie",
            "embedder": {"token_embedders": {"bert": bert_cfg}},
            "feature_size": FEATURE,
            "max_span_width": WIDTH,
            "target_task": "relation",
            "feedforward_params": {"num_layers": 2, "hidden_dims": HIDDEN, "dropout": 0.4},
            "loss_weights": {"ner": 1.0, "relation": 1.0, "coref": 0.0, "events": 0.0},
            "modules": {"coref": {"coref_prop": 0}, "ner": {}, "relation": {"spans_per_word": 0.5}, "events": {}},
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    return state


def write_rate(root: Path, bias: list[float] | None = None) -> dict[str, Path]:
    """A tiny BERT token classifier over RaTE's labels (``RaTE-NER-Deberta``) and a tiny BERT
    entity encoder (``BioLORD-2023-C``); ``bias``: the classifier's bias per label."""
    import torch
    from transformers import BertConfig, BertForTokenClassification

    ner, emb = root / "RaTE-NER-Deberta", root / "BioLORD-2023-C"
    tiny_bert(ner)
    tiny_bert(emb)
    config = BertConfig.from_pretrained(str(ner), local_files_only=True)
    config.id2label = dict(enumerate(RATE_LABELS))
    config.label2id = {v: k for k, v in config.id2label.items()}
    torch.manual_seed(7)
    model = BertForTokenClassification(config)
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor(bias or [0.0, 0.6, 0.3, 0.5, 0.2, 0.6, 0.3, 0.5, 0.2, 0.6, 0.3]))
    model.save_pretrained(str(ner))
    return {"ner": ner, "emb": emb}
