"""MetricTester: the checks every registered report metric must pass (cf. torchmetrics' testers.py).

``tests/test_metric_tester.py`` runs :class:`MetricTester` once per name in
:func:`cxreval.metrics.available_metrics`; :data:`CASES` says, per metric, what it promises
(bounds, the value of identical reports, documented NaN, the options that change its numbers and
what they put in the signature) and what it is checked against (a reference implementation, a
functional form). A newly registered metric fails until it has a :class:`MetricCase` here.

The report pairs (:func:`report_pairs`) are the package example (20 pairs), ten pairs that cross
its references with other candidates (so references repeat, as they do in a benchmark), and edge
cases: identical reports, reports differing only in case, one-token and empty reports,
whitespace, no-break spaces, ligatures, accents, CJK, emoji, a long repeated report.
"""

from __future__ import annotations

import csv
import inspect
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cxreval.metrics import ReportMetric, get_metric

Options = dict[str, Any]
Reference = Callable[[Options, Sequence[str], Sequence[str]], np.ndarray]
Functional = Callable[[ReportMetric, str, str], float]

# --------------------------------------------------------------------------------------------
# The pairs
# --------------------------------------------------------------------------------------------

_LONG = ("Findings: The heart is normal in size. The mediastinum is unremarkable. The lungs are clear "
         "without focal consolidation, pleural effusion or pneumothorax. No acute bony abnormality. ")

#: Identical or case-only-different reports of at least four words: every metric's best value.
IDENTICAL: list[tuple[str, str]] = [
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary process."),
    ("NO PLEURAL EFFUSION OR PNEUMOTHORAX.", "no pleural effusion or pneumothorax."),
    (_LONG * 3, _LONG * 3),
]

EDGE: list[tuple[str, str]] = [
    (".", "."),  # one token, identical
    ("a", "a"),
    ("", "No pneumothorax."),  # empty reference
    ("No pneumothorax.", ""),  # empty candidate
    ("", ""),
    ("\t \n", "   "),  # whitespace only
    ("\u00a0No\u00a0pneumothorax.\u00a0", "No pneumothorax."),  # no-break spaces
    ("ﬁndings: small left eﬀusion.", "Findings: small left effusion."),  # ligatures (NFKC)
    ("Épanchement pleural gauche, modéré.", "Épanchement pleural gauche, modéré."),  # accents, identical
    ("Pleural effusion — small, left-sided (≈ 2 cm).", "Small left pleural effusion ≈ 2 cm."),
    ("肺野清晰。心影不大。", "肺野清晰。心影不大。"),  # CJK, identical
    ("No effusion 🙂. Heart normal ✓", "No effusion. Heart normal 🙂"),  # emoji, symbols
    ("the the the the the the", "the the"),  # clipping of repeated n-grams
    (_LONG * 3, _LONG + "Small right pleural effusion."),  # long vs short
]


def example_pairs() -> list[tuple[str, str]]:
    """The 20 (reference, candidate) pairs of the package example, in file order."""
    from cxreval.cli import example_path

    with example_path().open(newline="", encoding="utf-8") as fh:
        return [(row["reference"], row["candidate"]) for row in csv.DictReader(fh)]


def report_pairs() -> tuple[list[str], list[str]]:
    """The fixed pairs every metric is run on (references, candidates): 47 pairs."""
    ex = example_pairs()
    crossed = [(ex[i][0], ex[(i + 7) % len(ex)][1]) for i in range(0, len(ex), 2)]
    pairs = ex + crossed + IDENTICAL + EDGE
    return [r for r, _ in pairs], [c for _, c in pairs]


# --------------------------------------------------------------------------------------------
# What each metric promises
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """Non-default options for the factory, and what they must put in the signature."""

    options: Callable[[], Options]
    shows: tuple[str, ...]
    scored: bool = True  # False: built for its signature only (e.g. an LLM engine with no server)


@dataclass(frozen=True)
class MetricCase:
    name: str
    signature_metric: str  # ``metric:`` field of the signature
    bounds: tuple[float, float]
    perfect: float  # the value for :data:`IDENTICAL` pairs
    variants: tuple[Variant, ...] = ()
    unsigned: dict[str, str] = field(default_factory=dict)  # option -> why it is not in the signature
    nan: str | None = None  # when the metric documents NaN; None: never
    integer: bool = False
    reference: Reference | None = None  # options, refs, cands -> per-pair values
    corpus_reference: Callable[[Options, Sequence[str], Sequence[str]], float] | None = None
    reference_elsewhere: tuple[str, ...] = ()  # tests that already check the values exactly
    functional: Functional | None = None  # a per-pair function the class must agree with
    atol: float = 0.0  # batch composition may move values this much (padding in an encoder)
    slack: float = 0.0  # rounding past the bounds that the metric's own reference also shows
    extra: str = ""  # what to install when the metric is unavailable
    cased: str = ""  # why reports that differ only in case are not perfect (a cased encoder); "" : they are


def _sacrebleu(options: Options) -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(lowercase=options.get("lowercase", True), tokenize=options.get("tokenize", "13a"),
                smooth_method="exp", effective_order=False)


def _bleu4_sentences(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    bleu = _sacrebleu(options)
    return np.array([bleu.sentence_score(c, [r]).score / 100 for r, c in zip(refs, cands)])


def _bleu4_corpus(options: Options, refs: Sequence[str], cands: Sequence[str]) -> float:
    return _sacrebleu(options).corpus_score(list(cands), [list(refs)]).score / 100


def _rouge_l_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    from cxreval.metrics.lexical import rouge_tokens
    from cxreval.testing.reference import rouge_l_f

    beta = float(options.get("beta", 1.2))
    return np.array([rouge_l_f(rouge_tokens(r), rouge_tokens(c), beta) for r, c in zip(refs, cands)])


def _spec_errors_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    import cxreval
    from cxreval.io import ReportPair

    pairs = [ReportPair(pair_id=f"p{i}", reference=r, candidate=c) for i, (r, c) in enumerate(zip(refs, cands))]
    result = cxreval.evaluate(pairs, progress=False, **options)
    return result.errors["errors"].reindex([p.pair_id for p in pairs]).to_numpy(dtype=float)


_EVALUATORS: dict[str, Any] = {}


def _evaluator(**options: Any) -> Any:
    """One ``cxreval.Evaluator`` per distinct options (building one reads the ontology and rules):
    the per-pair references call it once per pair."""
    from cxreval import Evaluator

    key = repr(sorted(options.items()))
    if key not in _EVALUATORS:
        _EVALUATORS[key] = Evaluator(**options)
    return _EVALUATORS[key]


def _evaluate_pairs(refs: Sequence[str], cands: Sequence[str], **options: Any) -> Any:
    """``cxreval.evaluate(pairs, **options)``, through an Evaluator built once per options."""
    from cxreval.io import ReportPair

    pairs = [ReportPair(pair_id=f"p{i}", reference=r, candidate=c) for i, (r, c) in enumerate(zip(refs, cands))]
    return _evaluator(**options).evaluate(pairs, progress=False)


def _presence_f1(average: str) -> tuple[Reference, Callable[[Options, Sequence[str], Sequence[str]], float]]:
    """Per-pair and corpus references: ``evaluate()``'s presence F1 on each pair, and on all."""

    def value(result: Any) -> float:
        v = result.averages.macro_f1 if average == "macro" else result.averages.micro.f1
        return np.nan if v is None else float(v)

    def per_pair(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
        return np.array([value(_evaluate_pairs([r], [c], **options)) for r, c in zip(refs, cands)])

    def corpus(options: Options, refs: Sequence[str], cands: Sequence[str]) -> float:
        return value(_evaluate_pairs(refs, cands, **options))

    return per_pair, corpus


def _labels_f1(labelset: str) -> tuple[Reference, Callable[[Options, Sequence[str], Sequence[str]], float]]:
    """Per-pair and corpus references: :func:`cxreval.scores.label_metrics` on the engine's labels."""

    def value(options: Options, refs: Sequence[str], cands: Sequence[str]) -> float:
        from cxreval.io import ReportPair
        from cxreval.scores import label_metrics, project_pairs

        opts = dict(options)
        label_uncertain = opts.pop("label_uncertain", "negative")
        undefined = opts.pop("undefined", "skip")
        certainty = opts.pop("certainty", "negative")
        ev = _evaluator(**opts)
        pairs = [ReportPair(pair_id=f"p{i}", reference=r, candidate=c) for i, (r, c) in enumerate(zip(refs, cands))]
        ref, cand = project_pairs(ev, pairs, ev.ontology, labelset, certainty=certainty)
        v = label_metrics(ref, cand, labelset=labelset, uncertain=label_uncertain, undefined=undefined).macro_f1
        return np.nan if v is None else float(v)

    def per_pair(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
        return np.array([value(options, [r], [c]) for r, c in zip(refs, cands)])

    return per_pair, value


def _bertscore_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    from cxreval.metrics.bertscore import default_encoder_path
    from cxreval.testing.reference import bertscore_f1_unbatched

    path = options.get("model_path") or default_encoder_path()
    return np.array(bertscore_f1_unbatched(str(path), refs, cands, int(options.get("max_length", 256))))


def _tiny_ontology() -> Any:
    from cxreval.ontology import parse_ontology
    from tests.conftest import TINY

    return parse_ontology(TINY, "tiny")


def _llm_pairwise() -> Options:
    from cxreval.llm import LLMConfig

    # Built for its signature only: nothing listens on port 9 and no call is made.
    return {"engine": "llm-pairwise",
            "llm": LLMConfig(base_url="http://127.0.0.1:9/v1", model="tester", local_only=True)}


def _bleu2_functional(metric: ReportMetric, ref: str, cand: str) -> float:
    from cxreval.metrics.lexical import bleu2_rexrank

    return bleu2_rexrank(ref, cand)


def _rouge_l_functional(metric: ReportMetric, ref: str, cand: str) -> float:
    from cxreval.metrics.lexical import rouge_l

    return rouge_l(ref, cand, beta=metric.beta)  # type: ignore[attr-defined]


CASES: dict[str, MetricCase] = {c.name: c for c in [
    MetricCase(
        "bleu2", "bleu2", bounds=(0, 1), perfect=1.0,
        reference_elsewhere=("test_bleu2_equals_rexrank_values_for_moerad_on_all_590_studies",
                             "test_bleu2_matches_fast_bleu_when_installed", "test_bleu2_conventions_by_hand"),
        functional=_bleu2_functional,
    ),
    MetricCase(
        "rouge-l", "rouge-l", bounds=(0, 1), perfect=1.0,
        variants=(Variant(lambda: {"beta": 1.0}, ("beta:1",)),),
        reference=_rouge_l_reference, functional=_rouge_l_functional,
    ),
    MetricCase(
        "bleu4-corpus", "bleu4-corpus", bounds=(0, 1), perfect=1.0,
        variants=(Variant(lambda: {"lowercase": False}, ("case:mixed",)),
                  Variant(lambda: {"tokenize": "intl"}, ("tok:intl",))),
        reference=_bleu4_sentences, corpus_reference=_bleu4_corpus,
        # identical segments: sacreBLEU itself gives 100.00000000000004 (exp of the mean log of
        # 100), so 1 + 4.4e-16 here; kept equal to sacreBLEU rather than clipped
        slack=1e-15,
    ),
    MetricCase(
        "spec-errors", "spec-report-errors-mean", bounds=(0, np.inf), perfect=0.0, integer=True,
        variants=(Variant(lambda: {"uncertain": "negative"}, ("uncertain:negative",)),
                  Variant(lambda: {"ontology": _tiny_ontology()}, ("ontology:tiny@0.1",)),
                  Variant(_llm_pairwise, ("engine:llm-pairwise@", "model:openai:tester"), scored=False)),
        unsigned={"retry_failed": "only retries failed LLM calls", "cache": "where LLM answers are stored"},
        nan="a pair whose LLM answer stayed unusable (LLM engines only)",
        reference=_spec_errors_reference,
    ),
    *[MetricCase(
        f"spec-presence-{avg}-f1", f"spec-presence-{avg}-f1", bounds=(0, 1), perfect=1.0,
        variants=(Variant(lambda: {"uncertain": "negative"}, ("uncertain:negative",)),
                  Variant(lambda: {"ontology": _tiny_ontology()}, ("ontology:tiny@0.1",))),
        nan="no entity is present in either report (no TP, FP or FN): F1 is undefined",
        reference=_presence_f1(avg)[0], corpus_reference=_presence_f1(avg)[1],
    ) for avg in ("macro", "micro")],
    *[MetricCase(
        name, name, bounds=(0, 1), perfect=1.0,
        variants=(Variant(lambda: {"label_uncertain": "positive"}, ("uncertain:positive",)),
                  Variant(lambda: {"undefined": "zero"}, ("undefined:zero",)),
                  Variant(lambda: {"certainty": "probable-alternative"}, ("certainty:probable-alternative",))),
        unsigned={"uncertain": "the label policy (label_uncertain) replaces the judge's uncertain policy",
                  "ontology": "in the signature's ontology field; the test ontology has no label sets"},
        nan="no label is positive in either report: every label's F1 is undefined",
        reference=_labels_f1(labelset)[0], corpus_reference=_labels_f1(labelset)[1],
    ) for name, labelset in (("ran-score", "ran21"), ("labels-chexpert14", "chexpert14"),
                             ("labels-chestxray14", "chestxray14"))],
    MetricCase(
        "bertscore", "bertscore-f1", bounds=(-1, 1), perfect=1.0, atol=1e-5,
        variants=(Variant(lambda: {"max_length": 16}, ("max_length:16",)),),
        unsigned={"batch_size": "batching does not change the values (padding is masked)",
                  "model_path": "shown as the encoder's folder name in model:"},
        # unbatched and unpadded; bert_score 0.3.12 (idf off, same encoder) differs by up to 1.2e-3
        # because it lets a token match the other report's [CLS]/[SEP], which cxreval leaves out
        reference=_bertscore_reference,
        extra="pip install 'cxreval[bertscore]'",
    ),
    # Weight-based metrics (issue 16): unavailable without a local checkpoint folder
    # (model_path or $CXREVAL_WEIGHTS); tests/test_weight_metrics.py runs these checks on tiny
    # random checkpoints of the same architectures and checks the values by hand there
    # (test_bertscore_distilroberta_equals_bert_score_by_hand, test_sembscore_values,
    # test_radcliq_formula_by_hand): reference_elsewhere names tests of test_lexical only.
    MetricCase(
        "bertscore-distilroberta", "bertscore-f1",
        # rescaled F = (F - b) / (1 - b) with F in [-1, 1] and b = 0.8473319 (layer-5 baseline)
        bounds=(-(1 + 0.8473319) / (1 - 0.8473319), 1), perfect=1.0, atol=1e-5,
        variants=(Variant(lambda: {"idf": True}, ("idf:refs",)), Variant(lambda: {"max_length": 16}, ("max_length:16",))),
        unsigned={"batch_size": "batching does not change the values (padding is masked)",
                  "model_path": "shown as the folder's name and its weights' hash in model:"},
        cased="distilroberta-base is cased and ReXrank does not lowercase: case-only differences cost",
        extra="a local distilroberta-base folder: model_path=... or $CXREVAL_WEIGHTS/distilroberta-base "
              "(pip install 'cxreval[weights]')",
    ),
    MetricCase(
        "sembscore", "sembscore", bounds=(-1, 1), perfect=1.0, atol=1e-5,
        unsigned={"batch_size": "batching does not change the values (padding is masked)",
                  "model_path": "shown as the folder's name and its weights' hash in model:"},
        extra="a local CheXbert folder (chexbert.pth + vocab.txt): model_path=... or $CXREVAL_WEIGHTS/chexbert "
              "(pip install 'cxreval[weights]')",
    ),
    MetricCase(
        # lower is better; identical reports give every input its best value (RadCliQ's practical minimum)
        "radcliq-v1", "radcliq-v1", bounds=(-1.4406903118732053, np.inf), perfect=-1.4406903118732053,
        atol=1e-5, slack=1e-10,
        unsigned={"bertscore_path": "its component's model: field", "chexbert_path": "its component's model: field",
                  "radgraph_path": "its component's model: field"},
        extra="the radgraph-f1, bertscore-distilroberta and sembscore checkpoints (radgraph_path, bertscore_path, "
              "chexbert_path or $CXREVAL_WEIGHTS)",
    ),
    MetricCase(
        # CXR-Report-Metric's radgraph_combined; tests/test_weight_metrics_radgraph.py checks the F1
        # functions by hand and the model's scorers by hand on a tiny checkpoint
        "radgraph-f1", "radgraph-f1", bounds=(0, 1), perfect=1.0,
        unsigned={"model_path": "shown as the folder's name and its weights' hash in model:"},
        cased="entity tokens are compared as written (CXR-Report-Metric): case-only differences cost",
        extra="a local RadGraph folder (config.json, weights.th, vocabulary/, encoder/): model_path=... or "
              "$CXREVAL_WEIGHTS/radgraph (pip install 'cxreval[weights]')",
    ),
    MetricCase(
        # the reference does not clip: a weighted mean of cosines, so negative cosines can leave [0, 1]
        # from below; identical reports with at least one entity score 1, with none 0.5
        "ratescore", "ratescore", bounds=(-np.inf, 1), perfect=1.0, atol=1e-6, slack=1e-6,
        variants=(Variant(lambda: {"affinity": "short"}, ("affinity:short",), scored=False),),
        unsigned={"model_path": "shown as the folder's name and its weights' hash in model:",
                  "embedding_path": "shown as the folder's name and its weights' hash in model:"},
        cased="the NER tokenizer may be cased (RaTE-NER-Deberta is): case-only differences can change entities",
        extra="local RaTE-NER-Deberta and BioLORD-2023-C folders: model_path=..., embedding_path=... or "
              "$CXREVAL_WEIGHTS (pip install 'cxreval[weights]')",
    ),
    # LLM error metrics (issue 16): they need an endpoint, so the default build is unavailable
    # here; tests/test_green.py runs them against the loopback server with hand-computed values.
    *[MetricCase(
        name, name, bounds=bounds, perfect=perfect,
        nan="a pair whose LLM answer stayed unusable after the re-ask",
        reference_elsewhere=("test_hand_computed_scores_and_rates_per_stratum",),
        extra="an LLM endpoint: metric_options {llm: {model: ..., base_url: ...}}",
    ) for name, bounds, perfect in (("green", (0, 1), 1.0), ("green-no-significant-error-rate", (0, 1), 1.0),
                                    ("fineradscore", (0, np.inf), 0.0),
                                    ("fineradscore-no-actionable-error-rate", (0, 1), 1.0),
                                    ("fineradscore-no-significant-error-rate", (0, 1), 1.0))],
]}


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------


def _shows(signature: str, part: str) -> bool:
    """``part`` is a whole ``key:value`` field of the signature (``key:prefix@`` matches a versioned value)."""
    fields = signature.split("|")
    return part in fields or (part.endswith("@") and any(f.startswith(part) for f in fields))


_WHOLE: dict[int, tuple[ReportMetric, np.ndarray]] = {}  # the metric is kept so that its id stays its own


class MetricTester:
    """Runs every check on one metric; each ``check_*`` method asserts one promise."""

    def __init__(self, case: MetricCase, build: Callable[..., ReportMetric]) -> None:
        self.case = case
        self.build = build  # options -> metric (cached by the caller)
        self.refs, self.cands = report_pairs()

    @property
    def metric(self) -> ReportMetric:
        return self.build()

    def scores(self, metric: ReportMetric | None = None, refs: Sequence[str] | None = None,
               cands: Sequence[str] | None = None) -> np.ndarray:
        m = metric if metric is not None else self.metric
        return m.score_pairs(self.refs if refs is None else refs, self.cands if cands is None else cands)

    def whole(self) -> np.ndarray:
        """The default metric's values on all the pairs, computed once per metric object."""
        m = self.metric
        if id(m) not in _WHOLE:
            _WHOLE[id(m)] = (m, self.scores(m))
        return _WHOLE[id(m)][1]

    def close(self, a: np.ndarray, b: np.ndarray, atol: float | None = None) -> bool:
        tol = self.case.atol if atol is None else atol
        return bool(np.allclose(a, b, rtol=0, atol=tol, equal_nan=True))

    # (a) values: one finite float per pair, in input order --------------------------------
    def check_values(self) -> None:
        c, v = self.case, self.scores()  # a fresh call: its type is checked
        assert isinstance(v, np.ndarray) and v.dtype.kind == "f", f"{c.name}: {type(v)} {getattr(v, 'dtype', '')}"
        assert v.shape == (len(self.refs),), f"{c.name}: shape {v.shape} for {len(self.refs)} pairs"
        nan = np.isnan(v)
        assert c.nan is not None or not nan.any(), (
            f"{c.name}: NaN for pairs {np.flatnonzero(nan).tolist()}, which it never documents")
        assert not np.isinf(v).any(), f"{c.name}: infinite values at {np.flatnonzero(np.isinf(v)).tolist()}"
        lo, hi = c.bounds[0] - c.slack, c.bounds[1] + c.slack
        ok = v[~nan]
        assert ((ok >= lo) & (ok <= hi)).all(), f"{c.name}: values outside [{lo}, {hi}]: {ok[(ok < lo) | (ok > hi)]}"
        if c.integer:
            assert np.array_equal(ok, np.round(ok)), f"{c.name}: non-integer counts {ok}"
        identical = [(r, x) for r, x in IDENTICAL if not (c.cased and r != x)]
        same = self.scores(refs=[r for r, _ in identical], cands=[x for _, x in identical])
        if c.nan is not None:  # undefined for identical reports that state nothing it counts
            same = np.where(np.isnan(same), c.perfect, same)
        assert self.close(same, np.full(len(identical), c.perfect), atol=max(c.atol, 1e-12)), (
            f"{c.name}: identical reports score {same}, not {c.perfect}")
        empty = self.metric.score_pairs([], [])
        assert isinstance(empty, np.ndarray) and empty.shape == (0,)

    def check_order(self) -> None:
        v = self.whole()
        perm = np.random.default_rng(12).permutation(len(self.refs))
        shuffled = self.scores(refs=tuple(self.refs[i] for i in perm), cands=tuple(self.cands[i] for i in perm))
        assert self.close(shuffled, v[perm]), f"{self.case.name}: shuffling the pairs does not permute the values"
        assert self.close(self.scores(), v), f"{self.case.name}: a second call gives other values"

    def check_lengths_refused(self) -> None:
        try:
            self.metric.score_pairs(self.refs[:3], self.cands[:2])
        except ValueError as exc:
            assert "3" in str(exc) and "2" in str(exc), exc
        else:
            raise AssertionError(f"{self.case.name}: 3 references and 2 candidates were accepted")

    # (b) a reference implementation -----------------------------------------------------
    def check_reference(self, options: Options) -> None:
        c = self.case
        assert c.reference is not None
        ours = self.build(**options).score_pairs(self.refs, self.cands) if options else self.whole()
        theirs = np.asarray(c.reference(options, self.refs, self.cands), dtype=float)
        bad = ~np.isclose(ours, theirs, rtol=0, atol=max(c.atol, 1e-12), equal_nan=True)
        assert not bad.any(), (f"{c.name} {options}: differs from the reference at pairs "
                               f"{np.flatnonzero(bad).tolist()}: {ours[bad]} vs {theirs[bad]}")

    # (c) sufficient statistics and pair independence --------------------------------------
    def check_halves(self) -> None:
        m, n = self.metric, len(self.refs) // 2
        whole = self.whole()
        parts = np.concatenate([self.scores(refs=self.refs[:n], cands=self.cands[:n]),
                                self.scores(refs=self.refs[n:], cands=self.cands[n:])])
        assert self.close(parts, whole), f"{self.case.name}: a pair's value depends on the other pairs in the call"
        stats = np.asarray(m.pair_stats(self.refs, self.cands), dtype=float)
        assert stats.ndim == 2 and len(stats) == len(self.refs) and np.isfinite(stats).all()
        first = np.asarray(m.pair_stats(self.refs[:n], self.cands[:n]))
        second = np.asarray(m.pair_stats(self.refs[n:], self.cands[n:]))
        assert np.array_equal(np.concatenate([first, second]), stats)
        summed = stats.sum(axis=0)  # in the order corpus_score sums them
        halves = first.sum(axis=0) + second.sum(axis=0)  # float values: equal up to summation order
        assert np.allclose(halves, summed, rtol=1e-12, atol=0), f"{self.case.name}: statistics do not add up over halves"
        corpus = m.compute
        whole_corpus = float(np.asarray(corpus(summed[None, :])).reshape(-1)[0])
        score = m.corpus_score(self.refs, self.cands)
        assert score.value == whole_corpus or (np.isnan(score.value) and np.isnan(whole_corpus))
        assert score.low is None and str(score.signature) == str(m.signature)
        boot = m.corpus_score(self.refs, self.cands, n_bootstrap=50, seed=3)
        assert boot.low is not None and boot.low <= boot.high, f"{self.case.name}: interval {boot}"
        assert all(_shows(str(boot.signature), f) for f in ("resamples:50", "seed:3", "ci:percentile"))
        # several rows at once (the bootstrap's replicates), as JSON floats (the bench cache)
        rows = np.stack([first.sum(axis=0), second.sum(axis=0), summed])  # JSON keeps floats exactly
        rows = np.asarray(json.loads(json.dumps(rows.tolist())))
        assert np.array_equal(np.asarray(corpus(rows)), [corpus(r.reshape(1, -1))[0] for r in rows],
                              equal_nan=True), f"{self.case.name}: rows interact"
        assert self.close(np.asarray(corpus(rows))[2:], np.array([whole_corpus]), atol=0)
        # per-pair rows give the per-pair values (bench correlates those)
        assert self.close(np.asarray(corpus(stats), dtype=float), whole, atol=0)
        if self.case.corpus_reference is not None:
            want = self.case.corpus_reference({}, self.refs, self.cands)
            assert abs(whole_corpus - want) <= 1e-12, f"{self.case.name}: corpus {whole_corpus} vs reference {want}"
            half = self.case.corpus_reference({}, self.refs[:n], self.cands[:n])
            assert abs(float(np.asarray(corpus(first.sum(axis=0)[None, :])).reshape(-1)[0]) - half) <= 1e-12

    # (d) direction and signature ----------------------------------------------------------
    def check_signature(self) -> None:
        from cxreval.scores.signature import Signature

        c, m = self.case, self.metric
        assert isinstance(m, ReportMetric)
        assert type(m.higher_is_better) is bool, f"{c.name}: higher_is_better is {m.higher_is_better!r}"
        assert c.perfect == (c.bounds[1] if m.higher_is_better else c.bounds[0])
        sig = m.signature
        assert sig.metric == c.signature_metric, f"{c.name}: signature names metric {sig.metric!r}"
        assert f"metric:{c.signature_metric}" in str(sig)
        assert Signature.parse(str(sig)) == sig, f"{c.name}: signature does not read back: {sig}"
        assert str(self.build().signature) == str(sig), f"{c.name}: two default builds differ in signature"

    def check_options(self) -> None:
        """Every option of the factory is shown in the signature, or listed as not changing values."""
        c, default = self.case, str(self.metric.signature)
        given: set[str] = set()
        for variant in c.variants:
            options = variant.options()
            given |= options.keys()
            sig = str(self.build(**options).signature)
            for part in variant.shows:
                assert _shows(sig, part), f"{c.name} {sorted(options)}: {part!r} not in {sig}"
                assert not _shows(default, part), f"{c.name}: {part!r} is already in the default signature {default}"
        params = inspect.signature(type(self.metric).__init__).parameters
        named = {p for p, v in params.items()
                 if p != "self" and v.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)}
        missing = named - given - c.unsigned.keys()
        assert not missing, f"{c.name}: options {sorted(missing)} have no Variant (signature) nor an unsigned reason"
        try:
            self.build(no_such_option=1)
        except TypeError:
            pass
        else:
            raise AssertionError(f"{c.name}: an unknown option is accepted and ignored")

    # (e) pickling -------------------------------------------------------------------------
    def check_pickle(self) -> None:
        m = self.metric
        back = pickle.loads(pickle.dumps(m))
        assert str(back.signature) == str(m.signature) and back.higher_is_better is m.higher_is_better
        assert self.close(self.scores(back), self.whole()), f"{self.case.name}: values change after pickling"
        assert np.array_equal(back.pair_stats(self.refs, self.cands), m.pair_stats(self.refs, self.cands))

    # (f) class and functional form --------------------------------------------------------
    def check_functional(self) -> None:
        c, m = self.case, self.metric
        assert c.functional is not None
        want = np.array([c.functional(m, r, x) for r, x in zip(self.refs, self.cands)])
        got = self.whole()
        bad = ~np.isclose(got, want, rtol=0, atol=max(c.atol, 1e-15), equal_nan=True)
        assert not bad.any(), f"{c.name}: class and function differ at pairs {np.flatnonzero(bad).tolist()}"


def build_metric(name: str, cache: dict[tuple[str, str], ReportMetric]) -> Callable[..., ReportMetric]:
    """``options -> get_metric(name, **options)``, built once per distinct options."""

    def build(**options: Any) -> ReportMetric:
        key = (name, repr(sorted(options.items())))
        if key not in cache:
            cache[key] = get_metric(name, **options)
        return cache[key]

    return build
