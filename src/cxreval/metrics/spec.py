"""cxreval's label metrics (Ran Score, CheXpert-14, ChestX-ray14 macro F1), and the SPEC-CXR
table metrics they sit beside (:mod:`cxreval.metrics.table`, registered on import of this module).

Labels are projected from the engine's own extractions (:meth:`cxreval.engines.EngineRunner.extract_all`;
blank = negative; hedged grades per ``certainty``), and scored by the functions ``cxreval agree``
uses (:func:`cxreval.scores.labels.label_confusion`), so a metric's value equals the number the
label tables print under the same signature.

- ``ran-score``: macro F1 over the Ran-21 labels; ``labels-chexpert14`` and
  ``labels-chestxray14``: the same over those label sets (uncertain per ``label_uncertain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cxreval.metrics.base import Metric, check_lengths, register_metric
from cxreval.metrics.table import (
    PresenceMacroF1 as SpecPresenceF1,
)
from cxreval.metrics.table import (
    PresenceMicroF1 as SpecPresenceMicroF1,
)
from cxreval.metrics.table import (
    SpecErrors,
    TableMetric,
    rebuild_metric,
)
from cxreval.scores.signature import Signature

if TYPE_CHECKING:
    from cxreval.engines import EngineRunner
    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.config import LLMConfig
    from cxreval.ontology import Ontology

__all__ = [
    "CheXpert14F1",
    "ChestXray14F1",
    "LabelF1",
    "SpecErrors",
    "SpecPresenceF1",
    "SpecPresenceMicroF1",
    "TableMetric",
]


def _pairs(references: Sequence[str], candidates: Sequence[str]) -> list[Any]:
    from cxreval.io import ReportPair

    check_lengths(references, candidates)
    return [ReportPair(pair_id=str(i), reference=r, candidate=c) for i, (r, c) in enumerate(zip(references, candidates))]


class LabelF1(Metric):
    """Macro F1 over a label set's labels, projected from the engine's extractions."""

    higher_is_better = True
    level = "corpus"
    labelset = "ran21"

    def __init__(
        self,
        ontology: Ontology | str | Path | None = None,
        uncertain: str = "positive",
        label_uncertain: str = "negative",
        undefined: str = "skip",
        certainty: str = "negative",
        *,
        engine: str = "rules",
        llm: LLMConfig | None = None,
        spec_compat: bool = False,
        retry_failed: bool = False,
        cache: AnswerCache | None = None,
        rules: str | Path | None = None,
        workers: int | None = None,
        hierarchy: bool = True,
    ) -> None:
        from cxreval.engines import EngineRunner
        from cxreval.extract.models import CERTAINTY_POLICIES
        from cxreval.ontology import Ontology, load_ontology

        if certainty not in CERTAINTY_POLICIES:
            raise ValueError(f"certainty must be one of {', '.join(CERTAINTY_POLICIES)}, got {certainty!r}")
        onto = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
        engine_options: dict[str, Any] = {
            "uncertain": uncertain,
            "engine": engine,
            "llm": llm,
            "spec_compat": spec_compat,
            "retry_failed": retry_failed,
            "cache": cache,
            "rules": rules,
            "workers": workers,
            "hierarchy": hierarchy,
        }
        self._options: dict[str, Any] = {
            "ontology": ontology,
            **engine_options,
            "label_uncertain": label_uncertain,
            "undefined": undefined,
            "certainty": certainty,
        }
        self._runner: EngineRunner = EngineRunner.build(onto, **engine_options)
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
        base = self._runner.engine.signature.model_copy(update={"options": {}})
        return label_signature(
            self.labelset,
            self.label_uncertain,  # type: ignore[arg-type]
            self.undefined,  # type: ignore[arg-type]
            base,
            certainty=self.certainty,
            rules=labelset_rules(self._runner.engine.ontology, self.labelset),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuild_metric, (type(self), self._options))

    def pair_stats(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        from cxreval.scores.labels import binarize, label_confusion, project_pairs

        pairs = _pairs(references, candidates)
        ref, cand = project_pairs(self._runner, pairs, self._runner.engine.ontology, self.labelset, certainty=self.certainty)
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
for _name, _cls in (("ran-score", LabelF1), ("labels-chexpert14", CheXpert14F1), ("labels-chestxray14", ChestXray14F1)):
    register_metric(_name, level=_cls.level, higher_is_better=_cls.higher_is_better)(_cls)
