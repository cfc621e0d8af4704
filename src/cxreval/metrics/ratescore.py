"""RaTEScore (Zhao et al. 2024) from two local checkpoints: a medical NER model and an entity encoder.

From the paper and its reference implementation (PyPI ``RaTEScore`` 0.6.0, ``scorer.py``,
``score.py``, ``utils.py``), reproduced here:

- each report is split into sentences; sentences with no word or under 3 characters are dropped;
- a token-classification model (RaTE-NER-Deberta in the paper) tags each sentence (up to 512
  tokens) with BIO labels over ABNORMALITY, NON-ABNORMALITY, DISEASE, NON-DISEASE, ANATOMY; the
  entities are decoded with the reference's ``post_process`` rules (its quirks kept) and their
  text is ``tokenizer.convert_tokens_to_string`` of their tokens;
- each entity is embedded by a synonym-aware encoder (BioLORD-2023-C in the paper): the [CLS]
  state of its last layer, entity text cut at 30 tokens;
- ``S(A -> B)``: each entity ``a`` of A is matched to its most cosine-similar entity ``b`` of B;
  ``S = sum(cos(a, b) * W[type a, type b] * P) / sum(W[type a, type b])`` where ``W`` is the
  learned type-pair affinity matrix (the reference's ``long`` or ``short`` defaults, copied
  below) and ``P`` is ``neg_weight`` when the two types are a negation mismatch (the
  reference's eight pairs, e.g. DISEASE vs NON-DISEASE, ABNORMALITY vs NON-DISEASE), else 1;
- RaTEScore = ``2 S(ref -> cand) S(cand -> ref) / (S(ref -> cand) + S(cand -> ref))`` (0 when
  both are 0); a report with no entity on either side scores **0.5** (the reference's rule).

cxreval's documented choices: the reference splits sentences with medspacy's PyRuSH; here a
sentence ends at ``.``, ``!`` or ``?`` followed by white space, or at a line break (a
dependency-free approximation: it can split differently on abbreviations and decimals).
Sentences and entity texts are run one at a time (no padding, so a report's value does not
depend on the other reports of the call; the reference pads a report's entity texts into one
batch, which changes [CLS] states by float rounding only). Ties in the best match take the first entity (the
reference uses ``torch.topk``).

Folders (``model_path`` / ``embedding_path``, or ``$CXREVAL_WEIGHTS/RaTE-NER-Deberta`` and
``$CXREVAL_WEIGHTS/BioLORD-2023-C``) are transformers folders (:data:`NER_EXPECTED`,
:data:`EMBEDDING_EXPECTED`); nothing is ever downloaded. torch and transformers are imported
when the metric is built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np

from cxreval.caches import ENTRY_BYTES, WEIGHT_METRIC_MIB, BoundedCache, mib, text_weight
from cxreval.metrics.base import MetricUnavailable, PairMeanMetric, check_lengths, register_metric
from cxreval.metrics.bertscore import local_checkpoint, weights_digest, weights_file
from cxreval.scores.signature import Signature

ENTITY_TYPES = ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY")
NER_EXPECTED = (
    "config.json whose id2label holds O and B-/I- labels of ABNORMALITY, NON-ABNORMALITY, DISEASE, "
    "NON-DISEASE, ANATOMY (a token-classification model), model.safetensors or pytorch_model.bin, "
    "and its tokenizer files"
)
EMBEDDING_EXPECTED = "config.json, model.safetensors or pytorch_model.bin, and its tokenizer files"
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")

#: The types in the order of the affinity rows and columns (the reference's keys, alphabetical).
AFFINITY_TYPES = ("ABNORMALITY", "ANATOMY", "DISEASE", "NON-ABNORMALITY", "NON-DISEASE")
#: RaTEScore 0.6.0 ``DEFAULT_MATRIX_LONG`` / ``DEFAULT_MATRIX_SHORT``: row = type in A, column =
#: type of its match in B (``"<a>_<b>"`` keys there), and ``neg_weight``.
AFFINITY: dict[str, tuple[tuple[float, ...], ...]] = {
    "long": (
        (0.4276119164393705, 0.6240929990607657, 0.0034478181112993847, 0.5431049700217344, 0.27005425386213877),
        (0.7487824274337533, 0.2856134859160784, 0.4592143222158069, 0.02097055139911715, 0.00013736314126696204),
        (0.8396510075734789, 0.9950209388542061, 0.8460555030578727, 0.9820689020512646, 0.3789136708096537),
        (0.16546764653692908, 0.018670610691852826, 0.719397354576018, 0.0009357166071730684, 0.0927333564267591),
        (0.7759420231214385, 0.1839139293714062, 0.10073046076318157, 0.03860183811876373, 0.34065681486566446),
    ),
    "short": (
        (0.4070293318365468, 0.6952639610605605, 0.28342529466226446, 0.9479148658006686, 0.23875064111146294),
        (0.5829759950441763, 0.7709590751917746, 0.0006059634829551632, 0.794672584951181, 0.27982942400798977),
        (0.8840397619834857, 0.9637659445696822, 0.19018958438059513, 0.6962283914800402, 0.943727057946997),
        (0.1712744286898638, 0.4485149671497294, 0.00045065329822896076, 0.0007887930317199857, 0.8555432840895761),
        (0.9555801066212176, 0.13122106162635216, 0.6072996585919443, 0.05650711141169969, 0.3214769399791204),
    ),
}
NEG_WEIGHT: dict[str, float] = {"long": 0.8716553966489615, "short": 0.3611577852354489}
#: The reference's ``neg_class``: (type in A, type of its match in B) pairs that cost ``neg_weight``.
NEGATION_MISMATCH = frozenset(
    {
        ("NON-DISEASE", "DISEASE"),
        ("NON-ABNORMALITY", "ABNORMALITY"),
        ("DISEASE", "NON-DISEASE"),
        ("ABNORMALITY", "NON-ABNORMALITY"),
        ("NON-DISEASE", "ABNORMALITY"),
        ("NON-ABNORMALITY", "DISEASE"),
        ("DISEASE", "NON-ABNORMALITY"),
        ("ABNORMALITY", "NON-DISEASE"),
    }
)
#: The value of a pair where either report has no entity (the reference's rule).
NO_ENTITY = 0.5


def affinity_matrix(name: str) -> dict[tuple[str, str], float]:
    """A published affinity matrix keyed by upper-case type pairs; ``("NEG", "WEIGHT")``: the penalty."""
    if name not in AFFINITY:
        raise ValueError(f"affinity must be one of {sorted(AFFINITY)}, not {name!r}")
    out = {(a, b): w for a, row in zip(AFFINITY_TYPES, AFFINITY[name]) for b, w in zip(AFFINITY_TYPES, row)}
    return {**out, ("NEG", "WEIGHT"): NEG_WEIGHT[name]}


def directed_score(
    a: np.ndarray, b: np.ndarray, types_a: Sequence[str], types_b: Sequence[str], matrix: dict[tuple[str, str], float]
) -> float:
    """The reference's ``compute(a, b)``: each entity of A matched to its most cosine-similar
    entity of B; weighted mean of the cosines by ``W[type a, type b]``, times ``neg_weight`` on a
    negation mismatch; 0 when the weights sum to 0."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    sim = a @ b.T
    best = sim.argmax(axis=1)
    neg = matrix[("NEG", "WEIGHT")]
    num = den = 0.0
    for i, j in enumerate(best):
        w = matrix[(types_a[i], types_b[j])]
        num += float(sim[i, j]) * w * (neg if (types_a[i], types_b[j]) in NEGATION_MISMATCH else 1.0)
        den += w
    return num / den if den != 0 else 0.0


def rate_score(
    ref: tuple[np.ndarray, Sequence[str]], cand: tuple[np.ndarray, Sequence[str]], matrix: dict[tuple[str, str], float]
) -> float:
    """RaTEScore of a pair from (embeddings, types) of each report's entities: the harmonic mean of
    both directions; :data:`NO_ENTITY` when a side has none."""
    if len(ref[1]) == 0 or len(cand[1]) == 0:
        return NO_ENTITY
    p = directed_score(ref[0], cand[0], ref[1], cand[1], matrix)
    r = directed_score(cand[0], ref[0], cand[1], ref[1], matrix)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def split_sentences(text: str) -> list[str]:
    """Sentences of a report (cxreval's stand-in for medspacy's PyRuSH, see module doc); those
    with no word or under 3 characters are dropped, as the reference does."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", str(text))
    return [s for s in (p.strip() for p in parts) if s.split() and len(s) >= 3]


def bio_entities(tokens: Sequence[str], labels: Sequence[str]) -> list[tuple[int, int, str]]:
    """The reference's ``post_process`` span rules on one sentence: ``(start, end, type)`` over
    token positions (``[CLS]``/``[SEP]`` skipped; an entity still open at the end, when none
    was closed before, ends at the token before the last)."""
    spans: list[tuple[int, int, str]] = []
    start: int | None = None
    end: int | None = None
    kind: str | None = None
    for i, (token, label) in enumerate(zip(tokens, labels[: len(tokens)])):
        if token in ("[CLS]", "[SEP]") or label == "O" or i >= len(labels) - 1:
            continue
        nxt = labels[i + 1]
        if label.startswith("B-") and nxt.startswith("I-"):
            start, kind = i, label[2:]
        elif label.startswith("B-") and nxt.startswith("B-"):
            start = end = i
            spans.append((i, i, label[2:]))
            start, kind = i, label[2:]
        elif label.startswith("B-") and nxt.startswith("O"):
            start = end = i
            spans.append((i, i, label[2:]))
            start = end = kind = None
        elif label.startswith("I-") and nxt.startswith("B-"):
            end = i
            if start is not None:
                spans.append((start, i, kind))  # type: ignore[arg-type]
            start, kind = i, label[2:]
        elif label.startswith("I-") and nxt.startswith("O"):
            end = i
            if start is not None:
                spans.append((start, i, kind))  # type: ignore[arg-type]
            start = end = kind = None
    if start is not None and end is None:
        spans.append((start, len(tokens) - 2, kind))  # type: ignore[arg-type]
    return spans


def _transformers_folder(model_path: str | Path | None, default: str, expected: str, metric: str) -> tuple[Path, str]:
    """A checked transformers folder and its ``name@digest``."""
    path = local_checkpoint(model_path, default, expected, metric)
    if not (path / "config.json").is_file():
        raise MetricUnavailable(f"{metric}: {path} has no config.json; it must hold {expected}")
    weights = weights_file(path, _WEIGHTS, metric, expected)
    return path, f"{path.name}@{weights_digest(weights)}"


class RaTEScore(PairMeanMetric):
    """RaTEScore per pair from local NER and entity-embedding checkpoints (see module doc)."""

    name = "ratescore"
    label = "RaTEScore"
    higher_is_better = True

    def __init__(
        self, model_path: str | Path | None = None, embedding_path: str | Path | None = None, affinity: str = "long"
    ) -> None:
        try:
            import torch  # noqa: F401  (here to say it is missing; the forward passes use it)
            from transformers import AutoConfig, AutoModel, AutoModelForTokenClassification, AutoTokenizer
        except ImportError as exc:
            raise MetricUnavailable(f"{self.name} needs torch and transformers: pip install 'cxreval[weights]'") from exc
        self.matrix = affinity_matrix(affinity)
        ner_path, self.ner_model = _transformers_folder(model_path, "RaTE-NER-Deberta", NER_EXPECTED, self.name)
        emb_path, self.emb_model = _transformers_folder(embedding_path, "BioLORD-2023-C", EMBEDDING_EXPECTED, self.name)
        config = AutoConfig.from_pretrained(str(ner_path), local_files_only=True)  # labels checked before loading
        self.id2label = {int(k): str(v) for k, v in config.id2label.items()}
        bad = [v for v in self.id2label.values() if v != "O" and (v[:2] not in ("B-", "I-") or v[2:] not in ENTITY_TYPES)]
        if bad:
            raise MetricUnavailable(f"{self.name}: {ner_path} labels {bad[:5]} are not RaTE's; it must hold {NER_EXPECTED}")
        self.ner = AutoModelForTokenClassification.from_pretrained(str(ner_path), config=config, local_files_only=True).eval()
        self.ner_tokenizer = AutoTokenizer.from_pretrained(str(ner_path), local_files_only=True)
        self.encoder = AutoModel.from_pretrained(str(emb_path), local_files_only=True).eval()
        self.emb_tokenizer = AutoTokenizer.from_pretrained(str(emb_path), local_files_only=True)
        self.affinity = affinity
        self._options = (model_path, embedding_path, affinity)
        self._entities: BoundedCache[str, list[tuple[str, str]]] = BoundedCache(
            mib(WEIGHT_METRIC_MIB / 2), _entities_weight, "ratescore entities"
        )
        self._vectors: BoundedCache[str, np.ndarray] = BoundedCache(
            mib(WEIGHT_METRIC_MIB / 2), _vector_weight, "ratescore vectors"
        )

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="ratescore",
            ontology="rate-ner",
            engine="ner",
            model=f"{self.ner_model}+{self.emb_model}",
            options={"affinity": self.affinity, "sentences": "regex", "empty": str(NO_ENTITY)},
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), self._options)

    def entities(self, text: str) -> list[tuple[str, str]]:
        """The (text, type) of each entity the NER model finds in a report, sentence by sentence
        (kept for the next call: the model is deterministic)."""
        import torch

        text = str(text)
        hit = self._entities.get(text)
        if hit is not None:
            return hit
        out: list[tuple[str, str]] = []
        for sentence in split_sentences(text):
            enc = self.ner_tokenizer(sentence, max_length=512, truncation=True, return_tensors="pt")
            with torch.no_grad():
                pred = self.ner(**enc).logits[0].argmax(dim=-1).tolist()
            tokens = cast(list[str], self.ner_tokenizer.convert_ids_to_tokens(enc["input_ids"][0]))  # ids in: a list out
            labels = [self.id2label[p] for p in pred]
            out += [
                (self.ner_tokenizer.convert_tokens_to_string(tokens[s : e + 1]), kind)
                for s, e, kind in bio_entities(tokens, labels)
            ]
        return self._entities.put(text, out)

    def embed(self, phrase: str) -> np.ndarray:
        """The [CLS] last-layer state of an entity text (cut at 30 tokens; one text a pass, so
        exactly the same vector whatever else is scored; kept for the next call)."""
        import torch

        hit = self._vectors.get(phrase)
        if hit is not None:
            return hit
        ids = self.emb_tokenizer(phrase, max_length=30, truncation=True, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            vec = self.encoder(input_ids=ids).last_hidden_state[0, 0].numpy().astype(np.float64)
        return self._vectors.put(phrase, vec)

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        dim = self.encoder.config.hidden_size

        def side(text: str) -> tuple[np.ndarray, list[str]]:
            found = self.entities(text)
            return np.array([self.embed(p) for p, _ in found]).reshape(len(found), dim), [k for _, k in found]

        return np.array([rate_score(side(r), side(c), self.matrix) for r, c in zip(references, candidates)], dtype=float)


def _entities_weight(text: str, found: list[tuple[str, str]]) -> int:
    """Estimated bytes of a report's cached entities (a short text and its type each)."""
    return text_weight(text, len(found), ENTRY_BYTES)


def _vector_weight(phrase: str, vec: np.ndarray) -> int:
    """Estimated bytes of an entity text's cached vector."""
    return text_weight(phrase) + int(vec.nbytes)


@register_metric("ratescore", higher_is_better=True, needs=("weights",))
def _ratescore(**options: object) -> RaTEScore:
    return RaTEScore(**options)  # type: ignore[arg-type]
