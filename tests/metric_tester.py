"""cxreval's own :class:`~cxreval.testing.metric_tester.MetricCase` for every registered metric.

The tester itself (``MetricTester``, ``MetricCase``, the report pairs) is
:mod:`cxreval.testing.metric_tester`, shipped for plug-in authors; this module holds what each
built-in metric promises and the independent reference it is checked against, and doubles as
worked examples of every kind of case. ``tests/test_metric_tester.py`` runs the tester over
:func:`cxreval.metrics.available_metrics` with nothing skipped: a newly registered metric fails
there until it has a case here.

References, per family:

- lexical: sacreBLEU (BLEU-4), pycocoevalcap's ROUGE-L (:mod:`cxreval.testing.reference`), and
  ReXrank's own BLEU-2 values (in ``tests/test_lexical.py``);
- SPEC-CXR's numbers (:data:`SPEC_NAMES`): judgement tables written out and worked by hand on the
  tiny ontology of ``tests/conftest.py`` (:data:`HAND_TABLES`); on the 47 report pairs, the rule
  engine's judgement rows (the judge, not the metric) scored by the plain-Python arithmetic of
  :func:`spec_by_hand`, itself checked against the hand tables;
- label metrics: :func:`cxreval.scores.label_metrics` on the engine's labels;
- weight-based metrics, on tiny random checkpoints (``tests/tiny_checkpoints.py``): BERTScore
  unbatched and written out, SembScore from the checkpoint's raw state dict, RadGraph-F1's and
  RadCliQ-v1's formulas (each checked by hand in ``tests/test_weight_metrics*.py``);
- LLM metrics, against the loopback server answering with :func:`green_answer` /
  :func:`finerad_answer` (a scripted judge): the values written out from the scripted answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.metrics import Metric
from cxreval.testing.metric_tester import HandTable, MetricCase, Options, Variant

# --------------------------------------------------------------------------------------------
# Lexical metrics
# --------------------------------------------------------------------------------------------


def _sacrebleu(options: Options) -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(
        lowercase=options.get("lowercase", True),
        tokenize=options.get("tokenize", "13a"),
        smooth_method="exp",
        effective_order=False,
    )


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


def _bleu2_functional(metric: Metric, ref: str, cand: str) -> float:
    from cxreval.metrics.lexical import bleu2_rexrank

    return bleu2_rexrank(ref, cand)


def _rouge_l_functional(metric: Metric, ref: str, cand: str) -> float:
    from cxreval.metrics.lexical import rouge_l

    return rouge_l(ref, cand, beta=metric.beta)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# SPEC-CXR's numbers: hand-computed judgement tables, and the same arithmetic in plain Python
# --------------------------------------------------------------------------------------------

PRESENCE_NAMES = tuple(f"spec-presence-{avg}-{what}" for avg in ("macro", "micro") for what in ("precision", "recall", "f1"))
ATTRIBUTE_NAMES = ("spec-location-accuracy", "spec-severity-accuracy", "spec-comparison-accuracy")
PAIR_MEAN_NAMES = (
    "spec-errors",
    "spec-report-error-free-rate",
    "spec-report-critical-error-free-rate",
    "spec-specificity-errors",
)
#: Every SPEC-CXR number the registry holds.
SPEC_NAMES = PRESENCE_NAMES + ATTRIBUTE_NAMES + PAIR_MEAN_NAMES
NAN = float("nan")


def _tiny_ontology() -> Any:
    from cxreval.ontology import parse_ontology
    from tests.conftest import TINY

    return parse_ontology(TINY, "tiny")


Row = tuple[str, ...]  # pair_id, entity, presence, location, severity, comparison[, specificity]


def _ratio(num: float, den: float) -> float:
    return num / den if den else NAN


def _mean_defined(values: list[float]) -> float:
    kept = [v for v in values if not np.isnan(v)]
    return sum(kept) / len(kept) if kept else NAN


def _row_errors(row: Row) -> int:
    """SPEC-CXR's errors of one row, written out: a false or missed finding, a location or
    severity that does not match, and a comparison added, missed or contradicted."""
    presence, location, severity, comparison = row[2:6]
    specificity = row[6] if len(row) > 6 else "exact"
    return (
        (presence in ("FP", "FN"))
        + (location == "not-aligned")
        + (severity == "not-aligned")
        + (comparison in ("adding-unmentioned-comparison", "missing-mentioned-comparison", "conflicting-comparison"))
        + (specificity in ("less-specific", "more-specific"))
    )


def spec_by_hand(name: str, rows: Sequence[Row], pair_ids: Sequence[str], ontology: Any) -> tuple[list[float], float]:
    """A SPEC number of judgement rows in plain Python: (each pair's value, the value of all).

    Presence: P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2 TP / (2 TP + FP + FN) per entity of
    the ontology (undefined at 0 / 0); macro = mean over the entities where defined, micro = of
    the pooled counts. Attribute accuracy: correct / judged over the TP rows of entities the
    attribute applies to (location, severity: aligned / aligned or not-aligned, not-available
    rows aside; comparison: ``other`` / all). Errors, error-free, critical-error-free: a per-pair
    count or indicator (:func:`_row_errors`), averaged over the pairs.
    """
    entities = {e.id: e for e in ontology.entities}
    by_pair: dict[str, list[Row]] = {p: [] for p in pair_ids}
    for row in rows:
        by_pair[row[0]].append(row)

    def presence(some: Sequence[Row]) -> float:
        what = name.rsplit("-", 1)[1]
        counts = {e: {"TP": 0, "FP": 0, "FN": 0} for e in entities}
        for _, entity, value, *_ in some:
            if entity in counts and value in ("TP", "FP", "FN"):
                counts[entity][value] += 1

        def score(tp: int, fp: int, fn: int) -> float:
            return {"precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn), "f1": _ratio(2 * tp, 2 * tp + fp + fn)}[what]

        if "-macro-" in name:
            return _mean_defined([score(c["TP"], c["FP"], c["FN"]) for c in counts.values()])
        return score(*(sum(c[k] for c in counts.values()) for k in ("TP", "FP", "FN")))

    def attribute(some: Sequence[Row]) -> float:
        attr = name.split("-")[1]
        field = ("location", "severity", "comparison").index(attr) + 3
        correct = judged = 0
        for row in some:
            if row[2] != "TP" or row[1] not in entities or attr not in entities[row[1]].attributes:
                continue
            if attr == "comparison":
                correct, judged = correct + (row[field] == "other"), judged + 1
            elif row[field] in ("aligned", "not-aligned"):
                correct, judged = correct + (row[field] == "aligned"), judged + 1
        return _ratio(correct, judged)

    def pair_value(some: Sequence[Row]) -> float:
        if name == "spec-specificity-errors":
            return float(sum(len(r) > 6 and r[6] in ("less-specific", "more-specific") for r in some))
        if name == "spec-errors":
            return float(sum(_row_errors(r) for r in some))
        if name == "spec-report-error-free-rate":
            return float(sum(_row_errors(r) for r in some) == 0)
        critical = [r for r in some if r[1] in entities and entities[r[1]].critical]
        return float(sum(_row_errors(r) for r in critical) == 0)

    if name in PAIR_MEAN_NAMES:
        values = [pair_value(by_pair[p]) for p in pair_ids]
        return values, _ratio(sum(values), len(values))
    one = presence if name in PRESENCE_NAMES else attribute
    return [one(by_pair[p]) for p in pair_ids], one(list(rows))


# -- the hand tables --------------------------------------------------------------------------
# The tiny ontology (tests/conftest.py TINY): effusion (location, severity, comparison),
# pneumothorax (location, severity, comparison; critical), consolidation (location, comparison),
# pneumonia (no attribute). "n/a" stands for not-available.

_A, _N, _NA = "aligned", "not-aligned", "not-available"
HAND_ROWS: list[Row] = [
    ("p1", "effusion", "TP", _A, _N, "other"),  # r1: severity wrong
    ("p1", "pneumothorax", "FN", _NA, _NA, "other"),  # r2: missed (critical)
    ("p1", "consolidation", "FP", _NA, _NA, "other"),  # r3: invented
    ("p2", "effusion", "TP", _N, _A, "adding-unmentioned-comparison"),  # r4: side wrong, comparison added
    ("p2", "pneumonia", "TP", _NA, _NA, "other"),  # r5: no attribute applies
    ("p2", "consolidation", "TN", _NA, _NA, "other"),  # r6: TN, counts nowhere
    ("p3", "pneumothorax", "TP", _A, _NA, "missing-mentioned-comparison"),  # r7: severity n/a, comparison missed
    ("p3", "consolidation", "TP", _A, _NA, "other"),  # r8
    ("p3", "effusion", "FN", _NA, _NA, "other"),  # r9
    # p4: no row (neither report states a finding)
    ("p5", "pneumothorax", "FP", _NA, _NA, "other"),  # r10: invented (critical)
    ("p5", "effusion", "TP", _A, _A, "conflicting-comparison"),  # r11: directions disagree
    ("p5", "pneumonia", "FN", _NA, _NA, "other"),  # r12
]
HAND_PAIRS = ("p1", "p2", "p3", "p4", "p5")

# Counts per entity over the table: effusion TP 3 (r1 r4 r11), FP 0, FN 1 (r9); pneumothorax TP 1
# (r7), FP 1 (r10), FN 1 (r2); consolidation TP 1 (r8), FP 1 (r3), FN 0; pneumonia TP 1 (r5), FP 0,
# FN 1 (r12). Pooled: TP 6, FP 2, FN 3.
#   effusion       P 3/3 = 1    R 3/4   F1 6/(6+0+1) = 6/7
#   pneumothorax   P 1/2        R 1/2   F1 2/(2+1+1) = 1/2
#   consolidation  P 1/2        R 1/1   F1 2/(2+1+0) = 2/3
#   pneumonia      P 1/1        R 1/2   F1 2/(2+0+1) = 2/3
#   macro P (1 + 1/2 + 1/2 + 1)/4 = 3/4; macro R (3/4 + 1/2 + 1 + 1/2)/4 = 11/16;
#   macro F1 (6/7 + 1/2 + 2/3 + 2/3)/4 = (113/42)/4 = 113/168
#   micro P 6/8 = 3/4; micro R 6/9 = 2/3; micro F1 12/(12+2+3) = 12/17
# Per pair (entities with nothing to count are undefined and left out of the macro mean):
#   p1: effusion TP -> P R F1 1; pneumothorax FN -> P 0/0, R 0, F1 0; consolidation FP -> P 0,
#       R 0/0, F1 0. macro P (1+0)/2 = 1/2, R (1+0)/2 = 1/2, F1 (1+0+0)/3 = 1/3; micro TP 1 FP 1 FN 1:
#       P 1/2, R 1/2, F1 2/4 = 1/2
#   p2: effusion TP, pneumonia TP (TN r6 counts nowhere): every score 1
#   p3: pneumothorax TP, consolidation TP -> 1; effusion FN -> P 0/0, R 0, F1 0. macro P 1,
#       R (1+1+0)/3 = 2/3, F1 2/3; micro TP 2 FN 1: P 1, R 2/3, F1 4/5
#   p4: nothing: every presence score undefined
#   p5: pneumothorax FP -> P 0, R 0/0, F1 0; effusion TP -> 1; pneumonia FN -> P 0/0, R 0, F1 0.
#       macro P (0+1)/2 = 1/2, R (1+0)/2 = 1/2, F1 (0+1+0)/3 = 1/3; micro TP 1 FP 1 FN 1: all 1/2
# Attributes, TP rows of entities they apply to (r5 pneumonia: none applies):
#   location (effusion, pneumothorax, consolidation): r1 A, r4 N, r7 A, r8 A, r11 A -> 4/5;
#       per pair p1 1/1, p2 0/1, p3 2/2, p4 0/0, p5 1/1
#   severity (effusion, pneumothorax): r1 N, r4 A, r7 n/a (aside), r11 A -> 2/3;
#       per pair p1 0/1, p2 1/1, p3 0/0, p4 0/0, p5 1/1
#   comparison (effusion, pneumothorax, consolidation): "other" r1, r8 of r1 r4 r7 r8 r11 -> 2/5;
#       per pair p1 1/1, p2 0/1 (added), p3 1/2 (r7 missed), p4 0/0, p5 0/1 (conflicting)
# Errors per pair: p1 r1 severity + r2 FN + r3 FP = 3; p2 r4 location + comparison = 2;
#   p3 r7 comparison + r9 FN = 2; p4 0; p5 r10 FP + r11 comparison + r12 FN = 3. Mean 10/5 = 2.
#   Error-free: p4 only -> 1/5. Critical (pneumothorax) errors: p1 r2, p3 r7, p5 r10 -> free: p2, p4 -> 2/5.
HAND_VALUES: dict[str, tuple[tuple[float, ...], float]] = {
    "spec-presence-macro-precision": ((1 / 2, 1, 1, NAN, 1 / 2), 3 / 4),
    "spec-presence-macro-recall": ((1 / 2, 1, 2 / 3, NAN, 1 / 2), 11 / 16),
    "spec-presence-macro-f1": ((1 / 3, 1, 2 / 3, NAN, 1 / 3), 113 / 168),
    "spec-presence-micro-precision": ((1 / 2, 1, 1, NAN, 1 / 2), 3 / 4),
    "spec-presence-micro-recall": ((1 / 2, 1, 2 / 3, NAN, 1 / 2), 2 / 3),
    "spec-presence-micro-f1": ((1 / 2, 1, 4 / 5, NAN, 1 / 2), 12 / 17),
    "spec-location-accuracy": ((1, 0, 1, NAN, 1), 4 / 5),
    "spec-severity-accuracy": ((0, 1, NAN, NAN, 1), 2 / 3),
    "spec-comparison-accuracy": ((1, 0, 1 / 2, NAN, 0), 2 / 5),
    "spec-errors": ((3, 2, 2, 0, 3), 2.0),
    "spec-report-error-free-rate": ((0, 0, 0, 1, 0), 1 / 5),
    "spec-report-critical-error-free-rate": ((0, 1, 0, 1, 0), 2 / 5),
    "spec-specificity-errors": ((0, 0, 0, 0, 0), 0.0),  # the flat hand table names every finding exactly
}

# A second table: every finding found with its attributes right (q1), and a pair with only a TN
# (q2, nothing to count). q1: effusion and pneumothorax TP, location and severity aligned,
# comparison "other" -> every presence score 1 (q2 undefined), every accuracy 2/2 = 1 (q2 0/0),
# errors 0 and 0, both error-free and critical-error-free: each metric at its best value.
PERFECT_ROWS: list[Row] = [
    ("q1", "effusion", "TP", _A, _A, "other"),
    ("q1", "pneumothorax", "TP", _A, _A, "other"),
    ("q2", "consolidation", "TN", _NA, _NA, "other"),
]
PERFECT_PAIRS = ("q1", "q2")


def _perfect_values(name: str) -> tuple[tuple[float, ...], float]:
    if name in ("spec-errors", "spec-specificity-errors"):
        return (0, 0), 0.0
    if name in PAIR_MEAN_NAMES:
        return (1, 1), 1.0
    return (1, NAN), 1.0


def judgement_table(rows: Sequence[Row], pair_ids: Sequence[str]) -> Any:
    """A :class:`~cxreval.judge.table.JudgementTable` of rows written out as tuples."""
    from cxreval.judge.models import EntityJudgement
    from cxreval.judge.table import JudgementTable

    fields = ("pair_id", "entity", "presence", "location", "severity", "comparison")
    return JudgementTable.from_rows([EntityJudgement(**dict(zip(fields, r))) for r in rows], list(pair_ids))


def _hand_tables(name: str) -> tuple[HandTable, ...]:
    per_pair, corpus = HAND_VALUES[name]
    perfect_pairs, perfect = _perfect_values(name)
    tiny = lambda: {"ontology": _tiny_ontology()}
    return (
        HandTable(lambda: judgement_table(HAND_ROWS, HAND_PAIRS), per_pair, corpus, tiny, "HAND_ROWS"),
        HandTable(lambda: judgement_table(PERFECT_ROWS, PERFECT_PAIRS), perfect_pairs, perfect, tiny, "PERFECT_ROWS"),
    )


# -- the 47 report pairs: the judge's rows, scored by spec_by_hand -------------------------------

LOCAL_RULES = Path(__file__).resolve().parent / "rules" / "local.yaml"


@cache
def _judge(
    ontology_key: str, uncertain: str, spec_compat: bool, rules: str, hierarchy: bool = True
) -> Callable[[str, str, str], list[Row]]:
    """The rule engine's judge (extractor + :func:`cxreval.judge.compare.compare_extractions`),
    one per distinct options: the input of the SPEC metrics, not their arithmetic."""
    from cxreval.extract.rules import RuleExtractor, load_rules
    from cxreval.judge.compare import compare_extractions
    from cxreval.ontology import load_ontology

    ontology = _tiny_ontology() if ontology_key == "tiny" else load_ontology()
    extractor = RuleExtractor(ontology, load_rules(ontology, rules) if rules else None)
    read = cache(extractor.extract)

    def judge(pair_id: str, reference: str, candidate: str) -> list[Row]:
        out = compare_extractions(
            pair_id,
            read(reference),
            read(candidate),
            ontology,
            uncertain,  # type: ignore[arg-type]
            spec_compat,
            hierarchy,
        )
        return [(r.pair_id, r.entity, r.presence, r.location, r.severity, r.comparison, r.specificity) for r in out]

    return judge


def _rows(options: Options, refs: Sequence[str], cands: Sequence[str]) -> tuple[list[Row], list[str], Any]:
    from cxreval.ontology import load_ontology

    onto = options.get("ontology")
    key = "default" if onto is None else str(onto.id)
    assert key in ("default", "tiny"), f"no reference judge for ontology {key!r}"
    judge = _judge(
        key,
        options.get("uncertain", "positive"),
        bool(options.get("spec_compat", False)),
        str(options.get("rules") or ""),
        bool(options.get("hierarchy", True)),
    )
    ids = [f"p{i}" for i in range(len(refs))]
    rows = [row for i, r, c in zip(ids, refs, cands) for row in judge(i, r, c)]
    return rows, ids, onto if onto is not None else load_ontology()


def _spec_reference(
    name: str,
) -> tuple[
    Callable[[Options, Sequence[str], Sequence[str]], np.ndarray], Callable[[Options, Sequence[str], Sequence[str]], float]
]:
    def per_pair(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
        return np.array(spec_by_hand(name, *_rows(options, refs, cands))[0], dtype=float)

    def corpus(options: Options, refs: Sequence[str], cands: Sequence[str]) -> float:
        return spec_by_hand(name, *_rows(options, refs, cands))[1]

    return per_pair, corpus


def _llm_pairwise() -> Options:
    from cxreval.llm import LLMConfig

    # Built for its signature only: nothing listens on port 9 and no call is made.
    return {"engine": "llm-pairwise", "llm": LLMConfig(base_url="http://127.0.0.1:9/v1", model="tester", local_only=True)}


def _llm_extract() -> Options:
    return {**_llm_pairwise(), "engine": "llm-extract"}  # signature only, as _llm_pairwise


def _local_rules_field() -> str:
    """The engine field a user rule file adds: ``.u`` and the first 12 hex digits of its SHA-256."""
    import hashlib

    return f"engine:rules@*.u{hashlib.sha256(LOCAL_RULES.read_bytes()).hexdigest()[:12]}"


def _spec_case(
    name: str, signature_metric: str, bounds: tuple[float, float], perfect: float, nan: str, integer: bool = False
) -> MetricCase:
    per_pair, corpus = _spec_reference(name)
    return MetricCase(
        name,
        signature_metric,
        bounds=bounds,
        perfect=perfect,
        integer=integer,
        variants=(
            Variant(lambda: {"uncertain": "negative"}, ("uncertain:negative",)),
            Variant(lambda: {"ontology": _tiny_ontology()}, ("ontology:tiny@0.1",)),
            Variant(lambda: {"spec_compat": True}, ("comparison:spec",)),
            Variant(lambda: {"rules": LOCAL_RULES}, (_local_rules_field(),)),
            Variant(lambda: {"hierarchy": False}, ("hierarchy:flat",)),
            Variant(_llm_pairwise, ("engine:llm-pairwise@*", "model:openai:tester"), scored=False),
        ),
        unsigned={
            "retry_failed": "only retries failed LLM calls",
            "cache": "where LLM answers are stored",
            "workers": "processes of the rule engine: the judgements are identical",
        },
        nan=nan,
        reference=per_pair,
        corpus_reference=corpus,
        tables=_hand_tables(name),
    )


_PRESENCE_NAN = "no entity is present in either report (no TP, FP or FN): the score is undefined"
_ATTRIBUTE_NAN = "no TP row of an entity the attribute applies to (with a judged value): accuracy is undefined"
_PAIR_NAN = "a pair whose LLM answer stayed unusable (LLM engines only)"
SPEC_CASES = [
    _spec_case("spec-errors", "spec-report-errors-mean", (0, np.inf), 0.0, _PAIR_NAN, integer=True),
    _spec_case("spec-report-error-free-rate", "spec-report-error-free-rate", (0, 1), 1.0, _PAIR_NAN, integer=True),
    _spec_case(
        "spec-report-critical-error-free-rate", "spec-report-critical-error-free-rate", (0, 1), 1.0, _PAIR_NAN, integer=True
    ),
    _spec_case("spec-specificity-errors", "spec-report-specificity-errors-mean", (0, np.inf), 0.0, _PAIR_NAN, integer=True),
    *[_spec_case(n, n, (0, 1), 1.0, _PRESENCE_NAN) for n in PRESENCE_NAMES],
    *[_spec_case(n, n, (0, 1), 1.0, _ATTRIBUTE_NAN) for n in ATTRIBUTE_NAMES],
]


# --------------------------------------------------------------------------------------------
# Label metrics
# --------------------------------------------------------------------------------------------

_EVALUATORS: dict[str, Any] = {}


def _evaluator(**options: Any) -> Any:
    """One ``cxreval.Evaluator`` per distinct options (building one reads the ontology and rules)."""
    from cxreval import Evaluator

    key = repr(sorted(options.items()))
    if key not in _EVALUATORS:
        _EVALUATORS[key] = Evaluator(**options)
    return _EVALUATORS[key]


def _labels_f1(
    labelset: str,
) -> tuple[
    Callable[[Options, Sequence[str], Sequence[str]], np.ndarray], Callable[[Options, Sequence[str], Sequence[str]], float]
]:
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


# --------------------------------------------------------------------------------------------
# Weight-based metrics (tiny checkpoints: the options carry their folders)
# --------------------------------------------------------------------------------------------


def _bertscore_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    from cxreval.metrics.bertscore import default_encoder_path
    from cxreval.testing.reference import bertscore_f1_unbatched

    path = options.get("model_path") or default_encoder_path()
    return np.array(bertscore_f1_unbatched(str(path), refs, cands, int(options.get("max_length", 256))))


def _bertscore_distilroberta_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    from tests.test_weight_metrics import _bert_score_by_hand

    return _bert_score_by_hand(
        Path(options["model_path"]),
        list(refs),
        list(cands),
        bool(options.get("idf", False)),
        max_length=int(options.get("max_length", 512)),
    )


def _sembscore_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    """Cosine of the [CLS] states of CheXbert's BERT, loaded by hand from ``chexbert.pth``
    (``module.bert.*`` keys) and run one report at a time; CheXbert's whitespace clean-up."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = Path(options["model_path"])
    state = torch.load(str(folder / "chexbert.pth"), map_location="cpu", weights_only=True)["model_state_dict"]
    bert = BertModel(BertConfig.from_json_file(str(folder / "config.json")))
    bert.load_state_dict({k[len("module.bert.") :]: v for k, v in state.items() if k.startswith("module.bert.")})
    bert.eval()
    # the tokenizer is part of the metric's definition (bert-base-uncased's WordPiece): the folder's vocab.txt
    tok = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True, do_lower_case=True)

    @cache
    def cls(text: str) -> np.ndarray:
        enc = tok([" ".join(text.split())], truncation=True, max_length=512, return_tensors="pt")
        with torch.no_grad():
            return bert(**enc).last_hidden_state[0, 0].numpy().astype(float)

    out = []
    for r, c in zip(refs, cands):
        a, b = cls(r), cls(c)
        norm = float(np.linalg.norm(a) * np.linalg.norm(b))
        out.append(0.0 if norm == 0 else float(np.clip(a @ b / norm, -1, 1)))
    return np.array(out)


def _radgraph_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    """RadGraph-F1's formula (:func:`radgraph_combined`, checked by hand in
    tests/test_weight_metrics_radgraph.py) on a fresh model's annotation of each report alone."""
    from cxreval.metrics.radgraph import RadGraphModel, radgraph_combined

    model = RadGraphModel(Path(options["model_path"]))
    graph = cache(model.annotate)
    return np.array([radgraph_combined(graph(r), graph(c)) for r, c in zip(refs, cands)])


def _radcliq_reference(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    """RadCliQ-v1's formula (checked by hand in tests/test_weight_metrics.py) on its four
    components, each built on its own from the same folders."""
    from cxreval.metrics import get_metric
    from cxreval.metrics.radcliq import radcliq_v1

    parts = [
        get_metric("radgraph-f1", model_path=options["radgraph_path"]),
        get_metric("bertscore-distilroberta", model_path=options["bertscore_path"]),
        get_metric("sembscore", model_path=options["chexbert_path"]),
        get_metric("bleu2"),
    ]
    return radcliq_v1(np.column_stack([p.score_pairs(refs, cands) for p in parts]))


# --------------------------------------------------------------------------------------------
# LLM metrics: a scripted judge behind the loopback server
# --------------------------------------------------------------------------------------------

_GREEN_CATEGORIES = ("false_finding", "missing_finding", "location", "severity", "false_comparison", "missing_comparison")


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _sentences(text: str) -> set[str]:
    """Distinct sentences (split after . ! ? and at line breaks), whitespace-normalised, lower-cased."""
    return {s for s in (_norm(p) for p in re.split(r"(?<=[.!?])|\n", text)) if s.strip(".!? ")}


#: A sentence that states no finding (a normal statement): its errors are not significant.
_NORMAL = re.compile(r"\b(no|normal|clear|unremarkable|stable)\b")


def green_answer(reference: str, candidate: str) -> dict[str, Any]:
    """The scripted GREEN answer: sentences in both reports are matched findings; a reference
    sentence the candidate lacks is a missed finding, a candidate sentence the reference lacks a
    false finding, significant unless the sentence is a normal statement (:data:`_NORMAL`); a
    prior study the candidate drops is an insignificant missed comparison."""
    ref, cand = _sentences(reference), _sentences(candidate)
    zero: dict[str, list[str]] = {c: [] for c in _GREEN_CATEGORIES}

    def listed(sentences: set[str], significant: bool) -> list[str]:
        return sorted(s for s in sentences if bool(_NORMAL.search(s)) != significant)[:12]

    dropped = ["the prior study"] if "prior" in reference.lower() and "prior" not in candidate.lower() else []
    return {
        "explanation": "Sentences compared one by one.",
        "significant": {**zero, "false_finding": listed(cand - ref, True), "missing_finding": listed(ref - cand, True)},
        "insignificant": {
            **zero,
            "false_finding": listed(cand - ref, False),
            "missing_finding": listed(ref - cand, False),
            "missing_comparison": dropped,
        },
        "matched_findings": sorted(ref & cand)[:12],
    }


def _grade(line: str) -> int:
    """A correction's grade: 1 (not actionable) for a normal statement, else 2, 3 or 4 by length."""
    return 1 if _NORMAL.search(line) else 2 + len(line) % 3


def finerad_answer(reference: str, lines: Sequence[str]) -> dict[str, Any]:
    """The scripted FineRadScore answer on the candidate's numbered lines: delete each line the
    reference does not hold, insert each reference line the candidate lacks, graded by :func:`_grade`."""
    from cxreval.metrics.fineradscore import candidate_lines

    ref = [_norm(x) for x in candidate_lines(reference)]
    cand = [_norm(x) for x in lines]
    out = [{"type": "delete", "line": k, "text": "", "severity": _grade(t)} for k, t in enumerate(cand, start=1) if t not in ref]
    out += [{"type": "insert", "line": 0, "text": t[:400], "severity": _grade(t)} for t in sorted(set(ref) - set(cand))]
    return {"corrections": out[:30]}


def loopback_script(reports: dict[str, str], instructions: str) -> dict[str, Any] | None:
    """The loopback server's answer to a GREEN or FineRadScore prompt (None: any other prompt)."""
    if "ERROR COUNT TASK" in instructions:
        return green_answer(reports["reference"], reports["candidate"])
    if "CORRECTION TASK" in instructions:  # the candidate comes as numbered lines: "1. text"
        lines = [re.sub(r"^\d+\. ", "", x, count=1) for x in reports["candidate"].split("\n") if x]
        return finerad_answer(reports["reference"], lines)
    return None


def _green_value(name: str, reference: str, candidate: str) -> float:
    answer = green_answer(reference, candidate)
    matched, significant = len(answer["matched_findings"]), sum(map(len, answer["significant"].values()))
    if name == "green":  # matched / (matched + significant), 0 when nothing matched
        return 0.0 if matched == 0 else matched / (matched + significant)
    return float(significant == 0)


def _finerad_value(name: str, reference: str, candidate: str) -> float:
    from cxreval.metrics.fineradscore import candidate_lines

    grades = [c["severity"] for c in finerad_answer(reference, candidate_lines(candidate))["corrections"]]
    if name == "fineradscore":  # the sum of the grades
        return float(sum(grades))
    limit = 2 if name == "fineradscore-no-actionable-error-rate" else 3  # actionable: 2+, significant: 3+
    return float(all(g < limit for g in grades))


def _llm_reference(name: str) -> Callable[[Options, Sequence[str], Sequence[str]], np.ndarray]:
    value = _green_value if name.startswith("green") else _finerad_value

    def per_pair(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
        return np.array([value(name, r, c) for r, c in zip(refs, cands)])

    return per_pair


def _other_model() -> Options:
    from cxreval.llm import LLMConfig

    # Built for its signature only: nothing listens on port 9 and no call is made.
    return {"llm": LLMConfig(base_url="http://127.0.0.1:9/v1", model="tester-2", local_only=True)}


# --------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------

CASES: dict[str, MetricCase] = {
    c.name: c
    for c in [
        MetricCase(
            "bleu2",
            "bleu2",
            bounds=(0, 1),
            perfect=1.0,
            reference_elsewhere=(
                "tests.test_lexical::test_bleu2_equals_rexrank_values_for_moerad_on_all_590_studies",
                "tests.test_lexical::test_bleu2_matches_fast_bleu_when_installed",
                "tests.test_lexical::test_bleu2_conventions_by_hand",
            ),
            functional=_bleu2_functional,
        ),
        MetricCase(
            "rouge-l",
            "rouge-l",
            bounds=(0, 1),
            perfect=1.0,
            variants=(Variant(lambda: {"beta": 1.0}, ("beta:1",)),),
            reference=_rouge_l_reference,
            functional=_rouge_l_functional,
        ),
        MetricCase(
            "bleu4-corpus",
            "bleu4-corpus",
            bounds=(0, 1),
            perfect=1.0,
            variants=(
                Variant(lambda: {"lowercase": False}, ("case:mixed",)),
                Variant(lambda: {"tokenize": "intl"}, ("tok:intl",)),
            ),
            reference=_bleu4_sentences,
            corpus_reference=_bleu4_corpus,
            # identical segments: sacreBLEU itself gives 100.00000000000004 (exp of the mean log of
            # 100), so 1 + 4.4e-16 here; kept equal to sacreBLEU rather than clipped
            slack=1e-15,
        ),
        *SPEC_CASES,
        *[
            MetricCase(
                name,
                name,
                bounds=(0, 1),
                perfect=1.0,
                variants=(
                    Variant(lambda: {"label_uncertain": "positive"}, ("uncertain:positive",)),
                    Variant(lambda: {"undefined": "zero"}, ("undefined:zero",)),
                    Variant(lambda: {"certainty": "probable-alternative"}, ("certainty:probable-alternative",)),
                    Variant(lambda: {"rules": LOCAL_RULES}, (_local_rules_field(),)),
                    Variant(_llm_extract, ("engine:llm-extract@", "model:openai:tester"), scored=False),
                ),
                unsigned={
                    "uncertain": "the label policy (label_uncertain) replaces the judge's uncertain policy",
                    "hierarchy": "how pairs are judged: labels come from the extraction, before any judgement",
                    "workers": "processes of the rule engine: the extractions are identical",
                    "ontology": "in the signature's ontology field; the test ontology has no label sets",
                    "spec_compat": "how comparisons are judged: labels come from the extraction, before any judgement",
                    "retry_failed": "only retries failed LLM calls",
                    "cache": "where LLM answers are stored",
                },
                nan="no label is positive in either report: every label's F1 is undefined",
                reference=_labels_f1(labelset)[0],
                corpus_reference=_labels_f1(labelset)[1],
            )
            for name, labelset in (
                ("ran-score", "ran21"),
                ("labels-chexpert14", "chexpert14"),
                ("labels-chestxray14", "chestxray14"),
            )
        ],
        # Weight-based metrics (issue 16): tests/test_metric_tester.py gives each the folders of the
        # tiny random checkpoints of tests/tiny_checkpoints.py (model_path=...); here the options of
        # the reference carry them too.
        MetricCase(
            # on the tiny BERT here (the MiniLM of the bertscore extra when installed and no folder is given)
            "bertscore",
            "bertscore-f1",
            bounds=(-1, 1),
            perfect=1.0,
            atol=1e-5,
            variants=(Variant(lambda: {"max_length": 16}, ("max_length:16",)),),
            unsigned={
                "batch_size": "batching does not change the values (padding is masked)",
                "model_path": "shown as the encoder's folder name in model:",
            },
            # unbatched and unpadded; bert_score 0.3.12 (idf off, same encoder) differs by up to 1.2e-3
            # because it lets a token match the other report's [CLS]/[SEP], which cxreval leaves out
            reference=_bertscore_reference,
            extra="pip install 'cxreval[bertscore]'",
        ),
        MetricCase(
            "bertscore-distilroberta",
            "bertscore-f1",
            # rescaled F = (F - b) / (1 - b) with F in [-1, 1] and b = 0.8473319 (layer-5 baseline)
            bounds=(-(1 + 0.8473319) / (1 - 0.8473319), 1),
            perfect=1.0,
            atol=1e-5,
            variants=(Variant(lambda: {"idf": True}, ("idf:refs",)), Variant(lambda: {"max_length": 16}, ("max_length:16",))),
            unsigned={
                "batch_size": "batching does not change the values (padding is masked)",
                "model_path": "shown as the folder's name and its weights' hash in model:",
            },
            cased="distilroberta-base is cased and ReXrank does not lowercase: case-only differences cost",
            # bert-score 0.3.13's greedy_cos_idf written out, one pair at a time (tests/test_weight_metrics.py)
            reference=_bertscore_distilroberta_reference,
            extra="a local distilroberta-base folder: model_path=... or $CXREVAL_WEIGHTS/distilroberta-base "
            "(pip install 'cxreval[weights]')",
        ),
        MetricCase(
            "sembscore",
            "sembscore",
            bounds=(-1, 1),
            perfect=1.0,
            atol=1e-5,
            unsigned={
                "batch_size": "batching does not change the values (padding is masked)",
                "model_path": "shown as the folder's name and its weights' hash in model:",
            },
            reference=_sembscore_reference,
            extra="a local CheXbert folder (chexbert.pth + vocab.txt): model_path=... or $CXREVAL_WEIGHTS/chexbert "
            "(pip install 'cxreval[weights]')",
        ),
        MetricCase(
            # lower is better; identical reports give every input its best value (RadCliQ's practical minimum)
            "radcliq-v1",
            "radcliq-v1",
            bounds=(-1.4406903118732053, np.inf),
            perfect=-1.4406903118732053,
            atol=1e-5,
            slack=1e-10,
            cased="its radgraph-f1 and bertscore-distilroberta inputs compare text as written: case-only differences cost",
            unsigned={
                "bertscore_path": "its component's model: field",
                "chexbert_path": "its component's model: field",
                "radgraph_path": "its component's model: field",
            },
            reference=_radcliq_reference,
            reference_elsewhere=(
                "tests.test_weight_metrics::test_radcliq_formula_by_hand",
                "tests.test_weight_metrics_radgraph::test_radcliq_on_tiny_checkpoints",
            ),
            extra="the radgraph-f1, bertscore-distilroberta and sembscore checkpoints (radgraph_path, bertscore_path, "
            "chexbert_path or $CXREVAL_WEIGHTS)",
        ),
        MetricCase(
            # CXR-Report-Metric's radgraph_combined
            "radgraph-f1",
            "radgraph-f1",
            bounds=(0, 1),
            perfect=1.0,
            unsigned={"model_path": "shown as the folder's name and its weights' hash in model:"},
            cased="entity tokens are compared as written (CXR-Report-Metric): case-only differences cost",
            reference=_radgraph_reference,
            reference_elsewhere=(
                "tests.test_weight_metrics_radgraph::test_radgraph_combined_by_hand",
                "tests.test_weight_metrics_radgraph::test_radgraph_ner_label_by_hand",
                "tests.test_weight_metrics_radgraph::test_radgraph_word_vectors_are_bert_piece_means",
            ),
            extra="a local RadGraph folder (config.json, weights.th, vocabulary/, encoder/): model_path=... or "
            "$CXREVAL_WEIGHTS/radgraph (pip install 'cxreval[weights]')",
        ),
        MetricCase(
            # the reference does not clip: a weighted mean of cosines, so negative cosines can leave [0, 1]
            # from below; identical reports with at least one entity score 1 (when each entity text has
            # one type: tests/test_metric_tester.py runs it on a NER that tags one type), with none 0.5
            "ratescore",
            "ratescore",
            bounds=(-np.inf, 1),
            perfect=1.0,
            atol=1e-6,
            slack=1e-6,
            variants=(Variant(lambda: {"affinity": "short"}, ("affinity:short",), scored=False),),
            unsigned={
                "model_path": "shown as the folder's name and its weights' hash in model:",
                "embedding_path": "shown as the folder's name and its weights' hash in model:",
            },
            cased="the NER tokenizer may be cased (RaTE-NER-Deberta is): case-only differences can change entities",
            reference_elsewhere=(
                "tests.test_weight_metrics_radgraph::test_rate_score_by_hand",
                "tests.test_weight_metrics_radgraph::test_bio_entities_follow_post_process",
                "tests.test_weight_metrics_radgraph::test_ratescore_values",
            ),
            extra="local RaTE-NER-Deberta and BioLORD-2023-C folders: model_path=..., embedding_path=... or "
            "$CXREVAL_WEIGHTS (pip install 'cxreval[weights]')",
        ),
        # LLM error metrics (issue 16): tests/test_metric_tester.py gives them the loopback server
        # answering with loopback_script; tests/test_green.py checks faults and strata by hand.
        *[
            MetricCase(
                name,
                name,
                bounds=bounds,
                perfect=perfect,
                integer=integer,
                variants=(Variant(_other_model, ("model:tester-2",), scored=False),),
                nan="a pair whose LLM answer stayed unusable after the re-ask",
                reference=_llm_reference(name),
                reference_elsewhere=("tests.test_green::test_hand_computed_scores_and_rates_per_stratum",),
                extra="an LLM endpoint: metric_options {llm: {model: ..., base_url: ...}}",
            )
            for name, bounds, perfect, integer in (
                ("green", (0, 1), 1.0, False),
                ("green-no-significant-error-rate", (0, 1), 1.0, True),
                ("fineradscore", (0, np.inf), 0.0, True),
                ("fineradscore-no-actionable-error-rate", (0, 1), 1.0, True),
                ("fineradscore-no-significant-error-rate", (0, 1), 1.0, True),
            )
        ],
    ]
}
