"""One-pass vs two-pass LLM judging (ReEvalMed) as metrics of the meta-evaluation.

The judges are engines of the registry (:mod:`cxreval.engines`): ``llm-pairwise`` (cxreval's
SPEC-CXR pairwise call) and ``llm-pairwise-2pass`` (the same call, then a verification call whose
corrected table replaces the first: :mod:`cxreval.judge.twopass`, whose ``VERIFY_PROMPT`` and
``VERIFY_VERSION`` are re-exported here).

Both are exposed as entity-level metrics (:class:`LLMJudgeMetric`, ``passes=1`` or ``2``), which
:func:`cxreval.meta.robustness.score_suite` compares like any other metric. A pair whose first
or second answer stayed invalid scores NaN (left out of the shares and counted in ``n_nan``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from cxreval.engines import get_engine
from cxreval.io import ReportPair
from cxreval.judge.compare import UncertainPolicy
from cxreval.judge.models import EntityJudgement
from cxreval.judge.twopass import VERIFY_PROMPT, VERIFY_VERSION
from cxreval.llm.config import LLMConfig
from cxreval.metrics.table import table_metric
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores.signature import Signature
from cxreval.scores.statistics import TableStatistics

__all__ = ["VERIFY_PROMPT", "VERIFY_VERSION", "LLMJudgeMetric"]


class LLMJudgeMetric:
    """SPEC-CXR report errors from the pairwise LLM judge, one pass or judge-then-verify.

    ``run`` (0-based) gives repeated runs their own cache keys (stochastic judges: mean +- sd).
    """

    higher_is_better = False

    def __init__(
        self,
        llm: LLMConfig,
        *,
        passes: int = 1,
        ontology: Ontology | None = None,
        uncertain: UncertainPolicy = "positive",
        run: int = 0,
    ) -> None:
        if passes not in (1, 2):
            raise ValueError("passes must be 1 or 2")
        self.llm = llm
        self.passes = passes
        self.run = run
        self.ontology = ontology or load_ontology()
        self.uncertain: UncertainPolicy = uncertain
        self.name = "llm-pairwise" if passes == 1 else "llm-pairwise-2pass"
        self.engine = get_engine(self.name, self.ontology, uncertain, llm=llm)

    @property
    def signature(self) -> Signature:
        engine = self.engine.signature
        return Signature(
            metric="spec-report-errors-mean",
            ontology=engine.ontology,
            engine=engine.engine,
            model=engine.model,
            prompt=engine.prompt,
            options={
                "uncertain": self.uncertain,
                "schema": self.llm.schema_style,
                "passes": str(self.passes),
                "temperature": f"{self.llm.temperature:g}",
            },
        )

    # -- metric interface -------------------------------------------------------------------
    def score_and_judge(
        self, references: Sequence[str], candidates: Sequence[str]
    ) -> tuple[np.ndarray, list[list[EntityJudgement]]]:
        if len(references) != len(candidates):
            raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
        pairs = [ReportPair(pair_id=str(i), reference=r, candidate=c) for i, (r, c) in enumerate(zip(references, candidates))]
        out = asyncio.run(self.engine.judge(pairs, self.run))
        by_pair: dict[str, list[EntityJudgement]] = {p.pair_id: [] for p in pairs}
        for row in out.table.rows():
            by_pair[row.pair_id].append(row)
        metric = table_metric("spec-errors", self.ontology)  # the registered metric's own arithmetic
        scores = metric.compute(metric.table_stats(TableStatistics(out.table, self.ontology, [p.pair_id for p in pairs])))
        return np.asarray(scores, dtype=float), [by_pair[p.pair_id] for p in pairs]

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return self.score_and_judge(references, candidates)[0]

    def score_pairs_run(self, references: Sequence[str], candidates: Sequence[str], run: int = 0) -> np.ndarray:
        """Scores of run ``run`` (own cache keys), for mean +- sd over repeated runs."""
        return LLMJudgeMetric(
            self.llm, passes=self.passes, ontology=self.ontology, uncertain=self.uncertain, run=run
        ).score_pairs(references, candidates)
