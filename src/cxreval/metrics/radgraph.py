"""RadGraph-F1 (Jain et al. 2021; Yu et al. 2023) from a local RadGraph checkpoint.

The model is the DyGIE++ span model of the ``radgraph`` package (Stanford-AIMI, 0.1.x),
re-implemented here on plain torch + transformers with the package's parameter names, so its
``weights.th`` loads unchanged:

1. the report is split into words (the package's ``radgraph`` regex, or ``wordpunct`` for the
   ``radgraph-xl`` models), each word into WordPieces; the BERT encoder runs on
   ``[CLS] pieces [SEP]`` (folded into segments of ``max_length`` when longer, as AllenNLP's
   mismatched embedder does) and a word's vector is the mean of its pieces' last-layer states;
2. every span of up to ``max_span_width`` words gets ``[x_start, x_end, width embedding]``;
3. NER: a feed-forward scorer per span over the entity labels (ANAT-DP, OBS-DP, OBS-U, OBS-DA),
   with a fixed 0 score for "no entity"; the argmax is the span's label;
4. relations: a mention scorer keeps the ``ceil(words * spans_per_word)`` best spans (in text
   order), every ordered pair gets ``ff([a, b, a * b]) + mention(a) + mention(b)`` over the
   relation labels (suggestive_of, located_at, modify) plus a fixed 0 for "none";
5. decoding as ``radgraph.utils.get_entity``: entities in span order; a relation is kept when its
   source and its target are predicted entities.

RadGraph-F1 is CXR-Report-Metric's ``radgraph_combined`` (what ReXrank and RadCliQ-v1 use): the
mean of the F1 of entity sets ``(tokens, label)`` and of relation sets ``(source tokens, source
label, target tokens, target label, relation)`` of the two reports, with CXR-Report-Metric's
``compute_f1``: precision or recall with an empty denominator is 0, so two reports with no
entities (or no relations) give F1 = 0, not 1. Tokens are compared as written (case kept).

The checkpoint folder (``model_path``, or ``$CXREVAL_WEIGHTS/radgraph``) holds :data:`EXPECTED`;
nothing is ever downloaded (:func:`~cxreval.metrics.bertscore.local_checkpoint`). torch and
transformers are imported when the metric is built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.caches import ENTRY_BYTES, WEIGHT_METRIC_MIB, BoundedCache, mib, text_weight
from cxreval.metrics.base import MetricUnavailable, PairMeanMetric, check_lengths, register_metric
from cxreval.metrics.bertscore import checkpoint_json, local_checkpoint, weights_digest, weights_file
from cxreval.metrics.chexbert import check_loaded, load_state
from cxreval.scores.signature import Signature

EXPECTED = (
    "config.json (the radgraph archive's AllenNLP config), weights.th (its state dict), vocabulary/ "
    "(<dataset>__ner_labels.txt and <dataset>__relation_labels.txt) and encoder/ (the BERT encoder's "
    "config.json and tokenizer, vocab.txt or tokenizer.json, of the model named in config.json); "
    "see docs/weight-metrics.md"
)
ENTITY_LABELS = ("ANAT-DP", "OBS-DP", "OBS-U", "OBS-DA")
RELATION_LABELS = ("suggestive_of", "located_at", "modify")
#: Keys of modules the radgraph checkpoint holds but inference never runs (loss weight 0).
_UNUSED = ("_coref.", "_events.")


@dataclass(frozen=True)
class Entity:
    """One predicted entity: its words joined by spaces, its label, and its word span (inclusive)."""

    tokens: str
    label: str
    start: int
    end: int


@dataclass(frozen=True)
class Annotation:
    """A report's RadGraph: entities, and relations as ``(source index, target index, label)``."""

    entities: tuple[Entity, ...]
    relations: tuple[tuple[int, int, str], ...]


# ------------------------------------------------------------------------------------------
# RadGraph-F1 as pure functions (CXR-Report-Metric's radgraph_evaluate_model)
# ------------------------------------------------------------------------------------------


def set_f1(reference: set[Any], candidate: set[Any]) -> float:
    """CXR-Report-Metric's ``compute_f1``: exact-match F1 of two sets; 0 when either is empty
    (an empty precision or recall denominator counts as 0), so empty vs empty gives 0."""
    tp = len(reference & candidate)
    precision = tp / len(candidate) if candidate else 0.0
    recall = tp / len(reference) if reference else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def entity_set(graph: Annotation) -> set[tuple[str, str]]:
    """The ``(tokens, label)`` of every entity."""
    return {(e.tokens, e.label) for e in graph.entities}


def relation_set(graph: Annotation) -> set[tuple[str, str, str, str, str]]:
    """The ``(source tokens, source label, target tokens, target label, relation)`` of every relation."""
    ents = graph.entities
    return {(ents[i].tokens, ents[i].label, ents[j].tokens, ents[j].label, rel) for i, j, rel in graph.relations}


def radgraph_combined(reference: Annotation, candidate: Annotation) -> float:
    """RadGraph-F1 of a pair: the mean of entity F1 and relation F1 (``radgraph_combined``)."""
    return (set_f1(entity_set(reference), entity_set(candidate)) + set_f1(relation_set(reference), relation_set(candidate))) / 2


# ------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------


def split_words(text: str, style: str) -> list[str]:
    """The radgraph package's word split: ``radgraph`` (its regex, the original RadGraph and
    CXR-Report-Metric) or ``wordpunct`` (``radgraph-xl``: whitespace runs, nltk's wordpunct and its
    fix-ups); DyGIE's ``/.`` and ``/?`` normalisation applied."""
    if style == "radgraph":
        words = re.sub(r"(?<! )(?=[/,-,:,.,!?()])|(?<=[/,-,:,.,!?()])(?! )", " ", text).split()
    else:
        t = re.sub(r"\s+", " ", text.replace("\\n", "  ").replace("\\f", "  ").replace("\n", " ").replace('\\"', "``"))
        t = " ".join(re.findall(r"\w+|[^\w\s]+", t))
        for a, b in ((").", ") ."), ("%.", "% ."), (".'", ". '"), ("%,", "% ,"), ("%)", "% )")):
            t = t.replace(a, b)
        words = t.split()
    return [w[1:] if w in ("/.", "/?") else w for w in words]


def enumerate_spans(n_words: int, max_width: int) -> list[tuple[int, int]]:
    """Every ``(start, end)`` span (inclusive) of at most ``max_width`` words, by start then end."""
    return [(s, e) for s in range(n_words) for e in range(s, min(s + max_width, n_words))]


def _feedforward(torch: Any, input_dim: int, hidden: Sequence[int]) -> Any:
    """AllenNLP's FeedForward as parameters (``_linear_layers.k``); ReLU after every layer."""
    ff = torch.nn.Module()
    dims = [input_dim, *hidden]
    ff._linear_layers = torch.nn.ModuleList([torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:])])
    return ff


def _run_ff(ff: Any, x: Any) -> Any:
    for layer in ff._linear_layers:
        x = layer(x).relu()
    return x


def _time_distributed(torch: Any, module: Any) -> Any:
    wrapper = torch.nn.Module()
    wrapper._module = module
    return wrapper


def _scorer(torch: Any, input_dim: int, hidden: Sequence[int], n_out: int) -> Any:
    """``Sequential(TimeDistributed(FeedForward), TimeDistributed(Linear))`` with the package's names."""
    return torch.nn.Sequential(
        _time_distributed(torch, _feedforward(torch, input_dim, hidden)),
        _time_distributed(torch, torch.nn.Linear(hidden[-1], n_out)),
    )


def _run_scorer(scorer: Any, x: Any) -> Any:
    return scorer[1]._module(_run_ff(scorer[0]._module, x))


def _labels(path: Path) -> list[str]:
    """An AllenNLP non-padded vocabulary file: one label a line, index = line number."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return [x.replace("@@NEWLINE@@", "\n") for x in (lines[:-1] if lines and lines[-1] == "" else lines)]


class RadGraphModel:
    """The RadGraph DyGIE++ model from a local folder (see module doc): :meth:`annotate` reports."""

    def __init__(self, model_path: str | Path | None = None, metric: str = "radgraph") -> None:
        try:
            import torch
            from transformers import AutoConfig, AutoModel, AutoTokenizer
        except ImportError as exc:
            raise MetricUnavailable(f"{metric} needs torch and transformers: pip install 'cxreval[weights]'") from exc
        path = local_checkpoint(model_path, "radgraph", EXPECTED, metric)
        weights = weights_file(path, ("weights.th",), metric, EXPECTED)
        encoder = path / "encoder"
        if not (path / "config.json").is_file() or not (encoder / "config.json").is_file():
            raise MetricUnavailable(f"{metric}: {path} lacks config.json or encoder/config.json; it must hold {EXPECTED}")
        cfg = checkpoint_json(path / "config.json", metric, EXPECTED)
        model_cfg, reader = cfg["model"], cfg["dataset_reader"]
        ner_files = sorted((path / "vocabulary").glob("*__ner_labels.txt"))
        if len(ner_files) != 1:
            raise MetricUnavailable(
                f"{metric}: {path / 'vocabulary'} must hold one *__ner_labels.txt "
                f"(found {len(ner_files)}); it must hold {EXPECTED}"
            )
        self.dataset = ner_files[0].name.removesuffix("__ner_labels.txt")
        rel_file = path / "vocabulary" / f"{self.dataset}__relation_labels.txt"
        if not rel_file.is_file():
            raise MetricUnavailable(f"{metric}: {rel_file} is missing; it must hold {EXPECTED}")
        self.ner_labels, self.relation_labels = _labels(ner_files[0]), _labels(rel_file)
        if self.ner_labels[:1] != [""]:
            raise MetricUnavailable(f"{metric}: {ner_files[0]} must start with the empty (null) label")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(encoder), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise MetricUnavailable(f"{metric}: no tokenizer in {encoder}; it must hold {EXPECTED}") from exc
        self.max_span_width = int(reader["max_span_width"])
        bert_cfg = model_cfg["embedder"]["token_embedders"]["bert"]
        self.max_length = bert_cfg.get("max_length")
        self.spans_per_word = float(model_cfg["modules"]["relation"]["spans_per_word"])
        self.style = "radgraph" if self.dataset == "radgraph" else "wordpunct"
        feature, ff = int(model_cfg["feature_size"]), model_cfg["feedforward_params"]
        dims = ff["hidden_dims"]  # AllenNLP: one int for every layer, or one per layer
        hidden = [int(dims)] * int(ff["num_layers"]) if isinstance(dims, int) else [int(d) for d in dims]

        net = torch.nn.Module()
        bert = AutoModel.from_config(AutoConfig.from_pretrained(str(encoder), local_files_only=True))
        emb_dim = bert.config.hidden_size
        span_dim = 2 * emb_dim + feature
        net._embedder = torch.nn.Module()
        net._embedder.token_embedder_bert = torch.nn.Module()
        net._embedder.token_embedder_bert._matched_embedder = torch.nn.Module()
        net._embedder.token_embedder_bert._matched_embedder.transformer_model = bert
        net._endpoint_span_extractor = torch.nn.Module()
        net._endpoint_span_extractor._span_width_embedding = torch.nn.Embedding(self.max_span_width, feature)
        ner_ns, rel_ns = f"{self.dataset}__ner_labels", f"{self.dataset}__relation_labels"
        net._ner = torch.nn.Module()
        net._ner._ner_scorers = torch.nn.ModuleDict({ner_ns: _scorer(torch, span_dim, hidden, len(self.ner_labels) - 1)})
        net._relation = torch.nn.Module()
        pruner = torch.nn.Module()
        pruner._scorer = _scorer(torch, span_dim, hidden, 1)
        net._relation._mention_pruners = torch.nn.ModuleDict({rel_ns: pruner})
        net._relation._relation_feedforwards = torch.nn.ModuleDict({rel_ns: _feedforward(torch, 3 * span_dim, hidden)})
        net._relation._relation_scorers = torch.nn.ModuleDict({rel_ns: torch.nn.Linear(hidden[-1], len(self.relation_labels))})
        state = {k: v for k, v in load_state(weights).items() if not k.startswith(_UNUSED) and not k.endswith("position_ids")}
        check_loaded(net.load_state_dict(state, strict=False), metric, weights, "RadGraph")
        self.net: Any = net.eval()  # submodules set by name, which torch types as Tensor | Module
        self.bert = bert.eval()
        self.ner_scorer = net._ner._ner_scorers[ner_ns]
        self.pruner = pruner._scorer
        self.rel_ff = net._relation._relation_feedforwards[rel_ns]
        self.rel_scorer = net._relation._relation_scorers[rel_ns]
        self.path, self._model_path = path, model_path
        self.model = f"{path.name}@{weights_digest(weights)}"
        self._cache: BoundedCache[str, Annotation] = BoundedCache(
            mib(WEIGHT_METRIC_MIB), _annotation_weight, "radgraph annotations"
        )

    def _word_vectors(self, words: Sequence[str]) -> Any:
        """Each word's vector: the mean of its WordPieces' last-layer states (zeros if it has none)."""
        import torch

        pieces: list[int] = []
        offsets: list[tuple[int, int] | None] = []
        for w in words:
            ids = self.tokenizer(w, add_special_tokens=False)["input_ids"]
            offsets.append((len(pieces), len(pieces) + len(ids)) if ids else None)
            pieces.extend(ids)
        inner = (self.max_length - 2) if self.max_length else max(len(pieces), 1)
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        # AllenNLP's folding: [CLS] segment [SEP] per max_length; the full segments run as one batch
        segments = [[cls, *pieces[k : k + inner], sep] for k in range(0, max(len(pieces), 1), inner)]
        full, last = (segments[:-1], segments[-1:]) if len(segments[-1]) < inner + 2 else (segments, [])
        states = [
            self.bert(input_ids=torch.tensor(group)).last_hidden_state[:, 1:-1].reshape(-1, self.bert.config.hidden_size)
            for group in (full, last)
            if group
        ]
        hidden = torch.cat(states)
        zero = hidden.new_zeros(hidden.shape[-1])
        return torch.stack([hidden[o[0] : o[1]].mean(dim=0) if o else zero for o in offsets])

    def annotate_words(self, words: Sequence[str]) -> Annotation:
        """The RadGraph of one report already split into words."""
        import torch

        if not words:
            return Annotation((), ())
        with torch.no_grad():
            x = self._word_vectors(words)
            spans = enumerate_spans(len(words), self.max_span_width)
            idx = torch.tensor(spans)
            width = self.net._endpoint_span_extractor._span_width_embedding(idx[:, 1] - idx[:, 0])
            emb = torch.cat([x[idx[:, 0]], x[idx[:, 1]], width], dim=-1)
            ner = _run_scorer(self.ner_scorer, emb)
            labels = torch.cat([ner.new_zeros(len(spans), 1), ner], dim=-1).max(dim=-1)[1].tolist()
            keep = min(max(math.ceil(len(words) * self.spans_per_word), 1), len(spans))
            mention = _run_scorer(self.pruner, emb)
            top = torch.sort(mention.topk(keep, dim=0)[1].squeeze(-1))[0]
            e, m = emb[top], mention[top]
            n = len(top)
            a, b = e.unsqueeze(1).expand(n, n, -1), e.unsqueeze(0).expand(n, n, -1)
            rel = self.rel_scorer(_run_ff(self.rel_ff, torch.cat([a, b, a * b], dim=-1)))
            rel = rel + m.unsqueeze(1) + m.unsqueeze(0)
            rel_labels = (torch.cat([rel.new_zeros(n, n, 1), rel], dim=-1).max(dim=-1)[1] - 1).tolist()
        found = [(s, lab) for s, lab in zip(spans, labels) if lab != 0]
        index = {s: i for i, (s, _) in enumerate(found)}
        entities = tuple(Entity(" ".join(words[s : t + 1]), self.ner_labels[lab], s, t) for (s, t), lab in found)
        top_spans = [spans[i] for i in top.tolist()]
        pairs = [
            (top_spans[i], top_spans[j], self.relation_labels[r])
            for i, row in enumerate(rel_labels)
            for j, r in enumerate(row)
            if r >= 0
        ]
        relations = [(index[s], index[t], lab) for s, t, lab in pairs if s in index and t in index]
        relations.sort(key=lambda r: r[0])  # get_entity lists them per source entity, in entity order
        return Annotation(entities, tuple(relations))

    def annotate(self, text: str) -> Annotation:
        """The RadGraph of one report (its words split as the checkpoint's dataset does); kept for
        the next call (the model is deterministic; a bootstrap or a bench scores the same texts
        again), within :data:`cxreval.caches.WEIGHT_METRIC_MIB`."""
        text = str(text)
        hit = self._cache.get(text)
        return hit if hit is not None else self._cache.put(text, self.annotate_words(split_words(text, self.style)))


def _annotation_weight(text: str, annotation: Annotation) -> int:
    """Estimated bytes of a report's cached RadGraph: its text, entities and relations."""
    return text_weight(text, len(annotation.entities) + len(annotation.relations), ENTRY_BYTES)


class RadGraphF1(PairMeanMetric):
    """RadGraph-F1 per pair (CXR-Report-Metric's ``radgraph_combined``; see module doc)."""

    name = "radgraph-f1"
    label = "RadGraph-F1"
    higher_is_better = True

    def __init__(self, model_path: str | Path | None = None) -> None:
        self.radgraph = RadGraphModel(model_path, metric=self.name)

    @property
    def signature(self) -> Signature:
        rg = self.radgraph
        return Signature(
            metric="radgraph-f1",
            ontology="radgraph",
            engine="dygie",
            model=rg.model,
            options={"reward": "combined", "words": rg.style, "max_span_width": str(rg.max_span_width), "empty": "0"},
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), (self.radgraph._model_path,))

    def annotations(self, texts: Sequence[str]) -> dict[str, Annotation]:
        """Each distinct text's RadGraph (one forward pass per report: no padding, batch-independent)."""
        return {t: self.radgraph.annotate(t) for t in dict.fromkeys(texts)}

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        check_lengths(references, candidates)
        graphs = self.annotations([*references, *candidates])
        return np.array([radgraph_combined(graphs[r], graphs[c]) for r, c in zip(references, candidates)], dtype=float)


@register_metric("radgraph-f1", higher_is_better=True, needs=("weights",))
def _radgraph_f1(**options: object) -> RadGraphF1:
    return RadGraphF1(**options)  # type: ignore[arg-type]
