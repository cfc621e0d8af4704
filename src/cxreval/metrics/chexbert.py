"""CheXbert (Smit et al. 2020) from a local checkpoint: its 14 labels and SembScore.

The architecture is CheXbert's ``bert_labeler``: a BERT-base encoder and 14 linear heads on the
[CLS] hidden state of the last layer (13 heads of 4 classes: blank, positive, negative,
uncertain; "No Finding" with 2: blank, positive). SembScore is the cosine similarity of the
reference's and the candidate's [CLS] embeddings, as CXR-Report-Metric computes it
(``CheXbert/src/encode.py`` + ``run_eval.add_semb_col``) and ReXrank reports it.

The checkpoint folder (``model_path``, or ``$CXREVAL_WEIGHTS/chexbert``) holds :data:`EXPECTED`.
The original ``chexbert.pth`` is a ``{"model_state_dict": ...}`` whose keys are
``module.bert.*`` and ``module.linear_heads.{0..13}.*`` (saved from ``nn.DataParallel``); the
``module.`` prefix is dropped, as CheXbert's own ``encode.py`` does on CPU. Nothing is ever
downloaded: a string that is not a folder is refused (:func:`~cxreval.metrics.bertscore.local_checkpoint`).
torch and transformers are imported when the metric is built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.metrics.base import (
    MetricUnavailable,
    PairMeanMetric,
    check_lengths,
    register_metric,
)
from cxreval.metrics.bertscore import (
    length_batches,
    local_checkpoint,
    weights_digest,
    weights_file,
)
from cxreval.scores.signature import Signature

#: CheXbert's conditions, in the order of its heads (CheXpert's 14 observations).
CONDITIONS: tuple[str, ...] = (
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Opacity",
    "Lung Lesion",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
    "No Finding",
)
#: The class index of each head's output: 0 blank, 1 positive, 2 negative, 3 uncertain ("No Finding": 0, 1).
CLASSES: tuple[str, ...] = ("blank", "positive", "negative", "uncertain")
EXPECTED = (
    "chexbert.pth (CheXbert's original checkpoint) or model.safetensors/pytorch_model.bin "
    "(the BERT encoder) + heads.safetensors/heads.pt (linear_heads.0..13); vocab.txt "
    "(bert-base-uncased's WordPiece vocabulary) or tokenizer.json; config.json optional "
    "(bert-base-uncased's BertConfig when absent)"
)
MAX_TOKENS = 512  # CheXbert cuts reports at 512 tokens ([CLS] + 510 + [SEP])


def load_state(path: Path) -> dict[str, Any]:
    """A state dict from a .safetensors file or a torch file (tensors only: ``weights_only``)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return dict(load_file(str(path)))
    import torch

    obj = torch.load(str(path), map_location="cpu", weights_only=True)
    return dict(obj.get("model_state_dict", obj) if isinstance(obj, dict) else obj)


def check_loaded(result: Any, metric: str, weights: Path, kind: str) -> None:
    """Refuse a checkpoint that did not fill the network (``load_state_dict(strict=False)``'s
    ``result``): keys missing (other than ``position_ids`` buffers) or unexpected."""
    missing = [k for k in result.missing_keys if not k.endswith("position_ids")]
    if missing or result.unexpected_keys:
        raise MetricUnavailable(
            f"{metric}: {weights} is not a {kind} checkpoint of this config: "
            f"missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}"
        )


def map_chexbert_keys(state: dict[str, Any]) -> dict[str, Any]:
    """Keys of a CheXbert state dict as the module here names them: ``module.`` dropped, encoder
    keys under ``bert.``, heads under ``linear_heads.`` (``position_ids`` buffers dropped)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        k = key.removeprefix("module.")
        if k.endswith("position_ids"):
            continue
        out[k if k.startswith(("bert.", "linear_heads.")) else f"bert.{k}"] = value
    return out


class CheXbert:
    """CheXbert from a local folder (see module doc): [CLS] embeddings and 14 labels per report."""

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 16, metric: str = "chexbert") -> None:
        try:
            import torch
            from transformers import BertConfig, BertModel
        except ImportError as exc:
            raise MetricUnavailable(f"{metric} needs torch and transformers: pip install 'cxreval[weights]'") from exc
        path = local_checkpoint(model_path, "chexbert", EXPECTED, metric)
        original = path / "chexbert.pth"
        if original.is_file():
            weights, state = original, load_state(original)
        else:
            weights = weights_file(path, ("model.safetensors", "pytorch_model.bin"), metric, EXPECTED)
            heads = weights_file(path, ("heads.safetensors", "heads.pt"), metric, EXPECTED)
            state = {**load_state(weights), **load_state(heads)}
        self.tokenizer = self._tokenizer(path, metric)
        config = BertConfig.from_json_file(str(path / "config.json")) if (path / "config.json").is_file() else BertConfig()
        net = torch.nn.Module()
        net.bert = BertModel(config)
        net.linear_heads = torch.nn.ModuleList(
            [torch.nn.Linear(config.hidden_size, 4) for _ in range(13)] + [torch.nn.Linear(config.hidden_size, 2)]
        )
        check_loaded(net.load_state_dict(map_chexbert_keys(state), strict=False), metric, weights, "CheXbert")
        self.net: Any = net.eval()  # submodules set by name, which torch types as Tensor | Module
        self.path, self.batch_size, self._model_path = path, batch_size, model_path
        self.model = f"{path.name}@{weights_digest(weights)}"

    @staticmethod
    def _tokenizer(path: Path, metric: str) -> Any:
        from transformers import AutoTokenizer, BertTokenizerFast  # type: ignore[attr-defined]  # lazy alias, not in its hints

        if (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file():
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if (path / "vocab.txt").is_file():
            # the class's from_pretrained reads a bare vocab.txt in transformers 4 and 5 alike
            return BertTokenizerFast.from_pretrained(str(path), local_files_only=True, do_lower_case=True)
        raise MetricUnavailable(f"{metric}: {path} has no vocab.txt nor tokenizer.json; it must hold {EXPECTED}")

    def _forward(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """[CLS] embeddings ``(n, hidden)`` and class indices ``(n, 14)``."""
        import torch

        # CheXbert's preprocessing: strip, newlines to spaces, runs of whitespace to one space
        clean = [re.sub(r"\s+", " ", str(t).strip().replace("\n", " ")).strip() for t in texts]
        ids = self.tokenizer(clean, truncation=True, max_length=MAX_TOKENS)["input_ids"] if clean else []
        hidden = self.net.bert.config.hidden_size
        embs, labels = np.zeros((len(texts), hidden)), np.zeros((len(texts), len(CONDITIONS)), dtype=int)
        for batch in length_batches([len(x) for x in ids], self.batch_size):  # no padding: batch-independent
            with torch.no_grad():
                cls = self.net.bert(input_ids=torch.tensor([ids[i] for i in batch]))[0][:, 0, :]
                labels[batch] = torch.stack([h(cls).argmax(dim=-1) for h in self.net.linear_heads], dim=1).numpy()
            embs[batch] = cls.numpy().astype(np.float64)
        return embs, labels

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The [CLS] embedding of each report ``(n, hidden)``."""
        return self._forward(texts)[0]

    def labels(self, texts: Sequence[str]) -> np.ndarray:
        """Each report's class index per condition ``(n, 14)`` (see :data:`CONDITIONS`, :data:`CLASSES`)."""
        return self._forward(texts)[1]


class SembScore(PairMeanMetric):
    """Cosine of CheXbert [CLS] embeddings of reference and candidate (0 where a norm is 0)."""

    name = "sembscore"
    label = "SembScore"
    higher_is_better = True

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 16) -> None:
        self.chexbert = CheXbert(model_path, batch_size, metric=self.name)

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="sembscore",
            ontology="chexpert14",
            engine="chexbert",
            model=self.chexbert.model,
            options={"embedding": "cls", "max_length": str(MAX_TOKENS)},
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), (self.chexbert._model_path, self.chexbert.batch_size))

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        texts = list(dict.fromkeys([*references, *candidates]))
        emb = dict(zip(texts, self.chexbert.embed(texts)))
        out = np.empty(len(references))
        for i, (r, c) in enumerate(zip(references, candidates)):
            a, b = emb[r], emb[c]
            norm = float(np.linalg.norm(a) * np.linalg.norm(b))
            out[i] = 0.0 if norm == 0 else float(np.clip(a @ b / norm, -1.0, 1.0))
        return out


@register_metric("sembscore", higher_is_better=True, needs=("weights",))
def _sembscore(**options: object) -> SembScore:
    return SembScore(**options)  # type: ignore[arg-type]
