"""The main job: score candidate reports against references, entity by entity.

``Evaluator`` ties the flow together: extraction (cached per distinct text, so a reference
shared by many candidates is read once) -> judgement rows -> entity, group and report-level
scores, each carrying a signature.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cxreval._version import __version__
from cxreval.extract.models import Extraction
from cxreval.extract.rules import RuleExtractor
from cxreval.io import ReportPair
from cxreval.judge import EntityJudgement, UncertainPolicy, compare_extractions
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores import (
    Averages,
    EntityScore,
    ErrorDistribution,
    GroupScore,
    Signature,
    averages,
    entity_scores,
    error_distribution,
    group_scores,
    judgement_frame,
    pair_errors,
)

PROGRESS_MIN_PAIRS = 200


@dataclass
class EvaluationResult:
    """Everything one evaluation produced; ``save`` writes it to a directory."""

    signature: Signature
    pair_ids: list[str]
    judgements: list[EntityJudgement]
    entities: list[EntityScore]
    groups: list[GroupScore]
    averages: Averages
    errors: pd.DataFrame
    error_summary: ErrorDistribution
    ontology: Ontology

    @property
    def n_pairs(self) -> int:
        return len(self.pair_ids)

    def metrics(self) -> list[dict[str, Any]]:
        """The headline numbers, each with its direction and signature."""
        sig = self.signature
        a = self.averages
        rows = [
            ("presence_macro_f1", a.macro_f1, True, "spec-presence-macro-f1"),
            ("presence_micro_f1", a.micro.f1, True, "spec-presence-micro-f1"),
            ("presence_micro_precision", a.micro.precision, True, "spec-presence-micro-precision"),
            ("presence_micro_recall", a.micro.recall, True, "spec-presence-micro-recall"),
            ("location_accuracy", a.location.accuracy, True, "spec-location-accuracy"),
            ("severity_accuracy", a.severity.accuracy, True, "spec-severity-accuracy"),
            ("comparison_accuracy", a.comparison.accuracy, True, "spec-comparison-accuracy"),
            ("errors_per_report_mean", self.error_summary.mean, False, "spec-report-errors-mean"),
            ("error_free_rate", self.error_summary.error_free, True, "spec-report-error-free-rate"),
        ]
        return [
            {"name": n, "value": v, "higher_is_better": h, "signature": str(sig.with_metric(m))}
            for n, v, h, m in rows
        ]

    def to_dict(self) -> dict[str, Any]:
        """The content of ``scores.json``."""
        return {
            "cxreval_version": __version__,
            "signature": str(self.signature),
            "ontology": {"id": self.ontology.id, "version": self.ontology.version},
            "n_pairs": self.n_pairs,
            "metrics": self.metrics(),
            "averages": self.averages.model_dump(),
            "report_level": {
                "higher_is_better": False,
                "signature": str(self.signature.with_metric("spec-report-errors")),
                **self.error_summary.model_dump(),
            },
            "groups": [g.model_dump() for g in self.groups],
            "entities": [e.model_dump() for e in self.entities],
        }

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``judgements.jsonl``, ``errors.csv`` and ``scores.json`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "judgements": out / "judgements.jsonl",
            "errors": out / "errors.csv",
            "scores": out / "scores.json",
        }
        with paths["judgements"].open("w", encoding="utf-8") as fh:
            for row in self.judgements:
                fh.write(row.model_dump_json() + "\n")
        self.errors.to_csv(paths["errors"])
        paths["scores"].write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return paths


class Evaluator:
    """Scores (reference, candidate) pairs with the offline rule engine.

    >>> from cxreval import Evaluator, ReportPair
    >>> ev = Evaluator()
    >>> res = ev.evaluate([ReportPair(pair_id="1", reference="Small left pleural effusion.",
    ...                               candidate="No pleural effusion.")])
    >>> res.errors.loc["1", "errors"]
    1
    """

    def __init__(
        self,
        ontology: Ontology | str | Path | None = None,
        *,
        uncertain: UncertainPolicy = "positive",
    ) -> None:
        self.ontology = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
        self.uncertain: UncertainPolicy = uncertain
        self.extractor = RuleExtractor(self.ontology)
        self._cache: dict[str, Extraction] = {}

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="spec-cxr",
            ontology=self.ontology.signature,
            engine=self.extractor.signature,
            options={"uncertain": self.uncertain},
        )

    def extract(self, text: str) -> Extraction:
        """Extraction of one report, cached by the text's hash for the life of the evaluator."""
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self.extractor.extract(text)
        return hit

    def judge(self, pair: ReportPair) -> list[EntityJudgement]:
        return compare_extractions(
            pair.pair_id,
            self.extract(pair.reference),
            self.extract(pair.candidate),
            self.ontology,
            self.uncertain,
        )

    def evaluate(self, pairs: Iterable[ReportPair], *, progress: bool | None = None) -> EvaluationResult:
        """Judge every pair and compute all scores."""
        pairs = list(pairs)
        if progress is None:
            progress = len(pairs) >= PROGRESS_MIN_PAIRS and sys.stderr.isatty()
        rows: list[EntityJudgement] = []
        for pair in _progress(pairs, progress):
            rows.extend(self.judge(pair))
        return self.score(rows, [p.pair_id for p in pairs])

    def score(self, rows: Sequence[EntityJudgement], pair_ids: Sequence[str]) -> EvaluationResult:
        """Scores from an existing judgement table (any engine's)."""
        frame = judgement_frame(rows)
        ents = entity_scores(frame, self.ontology, len(pair_ids))
        errors = pair_errors(frame, pair_ids)
        return EvaluationResult(
            signature=self.signature,
            pair_ids=list(pair_ids),
            judgements=list(rows),
            entities=ents,
            groups=group_scores(ents, self.ontology),
            averages=averages(ents),
            errors=errors,
            error_summary=error_distribution(errors),
            ontology=self.ontology,
        )


def _progress(pairs: list[ReportPair], show: bool) -> Iterable[ReportPair]:
    if not show:
        yield from pairs
        return
    columns = (
        TextColumn("[bold]judging pairs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("judge", total=len(pairs))
        for pair in pairs:
            yield pair
            bar.advance(task)


def evaluate(
    pairs: Iterable[ReportPair],
    *,
    ontology: Ontology | str | Path | None = None,
    uncertain: UncertainPolicy = "positive",
    progress: bool | None = None,
) -> EvaluationResult:
    """Functional form of :class:`Evaluator`: ``cxreval.evaluate(pairs)``."""
    return Evaluator(ontology, uncertain=uncertain).evaluate(pairs, progress=progress)
