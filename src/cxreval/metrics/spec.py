"""cxreval's own numbers as registered metrics: SPEC-CXR errors and presence F1, label F1.

Each runs an :class:`~cxreval.evaluate.Evaluator` (rule engine by default, any engine by
option) and takes its statistics from the same functions ``cxreval evaluate`` uses
(:func:`cxreval.scores.spec.spec_scores`, :func:`cxreval.scores.bootstrap.entity_counts`,
:func:`cxreval.scores.labels.label_confusion`), so a metric's value equals the number evaluate
prints under the same signature.

- ``spec-errors``: SPEC-CXR errors per report (FP + FN + not-aligned + comparison errors);
  the system value is the mean (``spec-report-errors-mean``).
- ``spec-presence-macro-f1`` / ``spec-presence-micro-f1``: entity presence F1 from summed
  per-pair TP / FP / FN per entity (macro: mean over entities with a defined F1).
- ``ran-score``: macro F1 over the Ran-21 labels; ``labels-chexpert14`` and
  ``labels-chestxray14``: the same over those label sets (labels projected from the engine's
  own extractions; blank = negative; uncertain per ``label_uncertain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.metrics.base import Metric, PairMeanMetric, check_lengths, register_metric
from cxreval.scores.signature import Signature


def _pairs(references: Sequence[str], candidates: Sequence[str]) -> list[Any]:
    from cxreval.io import ReportPair

    check_lengths(references, candidates)
    return [ReportPair(pair_id=str(i), reference=r, candidate=c) for i, (r, c) in enumerate(zip(references, candidates))]


class _EvaluatorMetric:
    """Holds an Evaluator built from the metric's options (and rebuilds it when unpickled)."""

    def __init__(self, ontology: str | Path | None = None, uncertain: str = "positive", **engine: object) -> None:
        from cxreval.evaluate import Evaluator

        self._options: dict[str, Any] = {"ontology": ontology, "uncertain": uncertain, **engine}
        self._evaluator = Evaluator(ontology, uncertain=uncertain, **engine)  # type: ignore[arg-type]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self._options))

    def _evaluate(self, references: Sequence[str], candidates: Sequence[str]) -> Any:
        return self._evaluator.evaluate(_pairs(references, candidates), progress=False)


def _rebuild(cls: type, options: dict[str, Any]) -> Any:
    return cls(**options)


class SpecErrors(_EvaluatorMetric, PairMeanMetric):
    """SPEC-CXR report-level error count per pair (FP + FN + not-aligned + comparison errors)."""

    name = "spec-errors"
    label = "Errors / report"
    higher_is_better = False

    @property
    def signature(self) -> Signature:
        return self._evaluator.signature.with_metric("spec-report-errors-mean")

    @classmethod
    def from_evaluator(cls, evaluator: Any) -> "SpecErrors":
        """The metric of an existing :class:`~cxreval.evaluate.Evaluator` (any engine, its cache)."""
        metric = cls.__new__(cls)
        metric._evaluator = evaluator
        metric._options = {"ontology": evaluator.ontology, "uncertain": evaluator.uncertain,
                           "engine": evaluator.engine, "llm": evaluator.llm, "spec_compat": evaluator.spec_compat,
                           "retry_failed": evaluator.retry_failed, "rules": evaluator.rules}
        return metric

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return self.score_and_judge(references, candidates)[0]

    def score_and_judge(self, references: Sequence[str], candidates: Sequence[str]) -> tuple[np.ndarray, list[list[Any]]]:
        """Errors per pair (NaN where an LLM engine could not judge the pair) and each pair's
        judgement rows, in input order (meta's robustness tests need the rows)."""
        ids = [str(i) for i in range(len(references))]
        result = self._evaluate(references, candidates)
        rows: dict[str, list[Any]] = {i: [] for i in ids}
        for row in result.judgements:
            rows[row.pair_id].append(row)
        errors = result.errors["errors"].reindex(ids).to_numpy(dtype=float)  # NaN: an LLM pair not scored
        return errors, [rows[i] for i in ids]


class SpecPresenceF1(_EvaluatorMetric, Metric):
    """SPEC-CXR entity presence F1 of a system (macro or micro over the ontology's entities)."""

    higher_is_better = True
    level = "corpus"
    average = "macro"

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"spec-presence-{self.average}-f1"

    @property
    def label(self) -> str:  # type: ignore[override]
        return f"Presence {self.average}-F1"

    @property
    def signature(self) -> Signature:
        return self._evaluator.signature.with_metric(self.name)

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        from cxreval.scores.bootstrap import entity_counts
        from cxreval.scores.entity import judgement_frame

        result = self._evaluate(references, candidates)
        ids = [str(i) for i in range(len(references))]
        counts = entity_counts(judgement_frame(result.judgements), result.ontology, ids)
        return counts.reshape(counts.shape[0], counts.shape[1] * 3).astype(float)

    def compute(self, sums: np.ndarray) -> np.ndarray:
        from cxreval.scores.ratios import presence_f1

        return presence_f1(sums, self.average)


class SpecPresenceMicroF1(SpecPresenceF1):
    """SPEC-CXR entity presence F1 over pooled TP / FP / FN."""

    average = "micro"


class LabelF1(_EvaluatorMetric, Metric):
    """Macro F1 over a label set's labels, projected from the engine's extractions."""

    higher_is_better = True
    level = "corpus"
    labelset = "ran21"

    def __init__(self, ontology: str | Path | None = None, uncertain: str = "positive",
                 label_uncertain: str = "negative", undefined: str = "skip", certainty: str = "negative",
                 **engine: object) -> None:
        from cxreval.extract.models import CERTAINTY_POLICIES

        if certainty not in CERTAINTY_POLICIES:
            raise ValueError(f"certainty must be one of {', '.join(CERTAINTY_POLICIES)}, got {certainty!r}")
        super().__init__(ontology, uncertain, **engine)
        self._options.update(label_uncertain=label_uncertain, undefined=undefined, certainty=certainty)
        self.label_uncertain, self.undefined = label_uncertain, undefined
        self.certainty = certainty
        """Which hedged grades project to a positive label (the ``--uncertain`` policy names);
        default ``negative``, the labelers' own convention (docs/labels.md)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        return "ran-score" if self.labelset == "ran21" else f"labels-{self.labelset}"

    @property
    def label(self) -> str:  # type: ignore[override]
        return "Ran Score" if self.labelset == "ran21" else f"{self.labelset} macro-F1"

    @property
    def signature(self) -> Signature:
        from cxreval.scores.labels import label_signature, labelset_rules

        # labels come from the extraction: the judge's options (uncertain, comparison) do not apply
        base = self._evaluator.signature.model_copy(update={"options": {}})
        return label_signature(self.labelset, self.label_uncertain, self.undefined, base,  # type: ignore[arg-type]
                               certainty=self.certainty,
                               rules=labelset_rules(self._evaluator.ontology, self.labelset))

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        from cxreval.scores.labels import binarize, label_confusion, project_pairs

        pairs = _pairs(references, candidates)
        ref, cand = project_pairs(self._evaluator, pairs, self._evaluator.ontology, self.labelset,
                                  certainty=self.certainty)  # type: ignore[arg-type]
        conf = label_confusion(binarize(ref, self.label_uncertain), binarize(cand, self.label_uncertain))  # type: ignore[arg-type]
        return conf.reshape(conf.shape[0], conf.shape[1] * conf.shape[2]).astype(float)

    def compute(self, sums: np.ndarray) -> np.ndarray:
        from cxreval.scores.labels import label_scores_of_counts

        s = np.atleast_2d(np.asarray(sums, dtype=float))
        _, macro, _ = label_scores_of_counts(s.reshape(len(s), -1, 4), self.undefined)  # type: ignore[arg-type]
        return macro[:, 2]  # precision, recall, f1, accuracy


class CheXpert14F1(LabelF1):
    """Macro F1 over the CheXpert-14 labels, projected from the engine's extractions."""

    labelset = "chexpert14"


class ChestXray14F1(LabelF1):
    """Macro F1 over the ChestX-ray14 labels, projected from the engine's extractions."""

    labelset = "chestxray14"


# The factories are the classes themselves (an unknown option is a TypeError, never ignored).
for _name, _cls in (("spec-errors", SpecErrors), ("spec-presence-macro-f1", SpecPresenceF1),
                    ("spec-presence-micro-f1", SpecPresenceMicroF1), ("ran-score", LabelF1),
                    ("labels-chexpert14", CheXpert14F1), ("labels-chestxray14", ChestXray14F1)):
    register_metric(_name, level=_cls.level, higher_is_better=_cls.higher_is_better)(_cls)
