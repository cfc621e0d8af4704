"""One-pass vs two-pass LLM judging (ReEvalMed): judge, then verify the judgement.

Pass 1 is cxreval's SPEC-CXR pairwise call (``llm-pairwise``). Pass 2 continues the same
conversation: the model sees its own table and is asked to check every row against the two
reports and return the corrected full table in the same schema. The verified table replaces the
first; both are cached (the verification key includes the first answer), so reruns make no call.

Both are exposed as entity-level metrics (:class:`LLMJudgeMetric`, ``passes=1`` or ``2``), which
:func:`cxreval.meta.robustness.score_suite` compares like any other metric. A pair whose first
or second answer stayed invalid scores NaN (left out of the shares and counted in ``n_nan``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from cxreval.judge.compare import UncertainPolicy
from cxreval.judge.models import EntityJudgement
from cxreval.llm.config import LLMConfig
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores.signature import Signature

VERIFY_VERSION = "1"
VERIFY_PROMPT = """Here is a first judgement of the CANDIDATE against the REFERENCE:

<first-judgement>
{first}
</first-judgement>

Verify it. For every row, re-read both reports: is the entity really stated (present, absent,
uncertain) as the row says, and are the side, severity and change from a prior study really the
same or different? A rewording, a synonym, a different sentence order or layout is not an error.
Correct every wrong row, add an entity the first judgement missed, and answer with the complete
corrected table in the same JSON format as before."""


class LLMJudgeMetric:
    """SPEC-CXR report errors from the pairwise LLM judge, one pass or judge-then-verify.

    ``run`` (0-based) gives repeated runs their own cache keys (stochastic judges: mean +- sd).
    """

    higher_is_better = False

    def __init__(self, llm: LLMConfig, *, passes: int = 1, ontology: Ontology | None = None,
                 uncertain: UncertainPolicy = "positive", run: int = 0) -> None:
        from cxreval.judge.llm_pairwise import LLMPairwiseJudge

        if passes not in (1, 2):
            raise ValueError("passes must be 1 or 2")
        llm.check_endpoint()
        llm.api_key()
        self.llm = llm
        self.passes = passes
        self.run = run
        self.ontology = ontology or load_ontology()
        self.uncertain: UncertainPolicy = uncertain
        self.judge = LLMPairwiseJudge(self.ontology, llm, uncertain)
        self.name = "llm-pairwise" if passes == 1 else "llm-pairwise-2pass"

    @property
    def signature(self) -> Signature:
        prompt = self.judge.prompt.signature + ("" if self.passes == 1 else f"+verify@{VERIFY_VERSION}")
        return Signature(
            metric="spec-report-errors", ontology=self.ontology.signature, engine=self.judge.signature,
            model=f"{self.llm.provider}:{self.llm.model}", prompt=prompt,
            options={"uncertain": self.uncertain, "schema": self.llm.schema_style, "passes": str(self.passes),
                     "temperature": f"{self.llm.temperature:g}"},
        )

    # -- pass 2 -----------------------------------------------------------------------------
    def _first_table(self, rows: list[EntityJudgement]) -> str:
        items = [{"entity": r.entity, "presence": r.presence, "location": r.location, "severity": r.severity,
                  "comparison": r.comparison} for r in rows]
        return json.dumps({"entities": items}, indent=1)

    def verify_task(self, reference: str, candidate: str, rows: list[EntityJudgement], run: int = 0) -> Any:
        """The verification call for one pair (the first answer is part of its cache key)."""
        from cxreval.llm.cache import cache_key
        from cxreval.llm.runner import Task

        first = self._first_table(rows)
        messages = self.judge.messages(reference, candidate) + [
            {"role": "assistant", "content": first},
            {"role": "user", "content": VERIFY_PROMPT.format(first=first)},
        ]
        key = cache_key({
            "verify": VERIFY_VERSION, "pass1": self.judge.key(reference, candidate, run),
            "first_sha": hashlib.sha256(first.encode("utf-8")).hexdigest(),
            "prompt_sha": hashlib.sha256(VERIFY_PROMPT.encode("utf-8")).hexdigest(),
        })
        return Task(key=key, kind="verify", engine=self.judge.signature, messages=messages,
                    schema=self.judge.schema, schema_name=self.judge.schema_name,
                    parse=self.judge.parser(reference, candidate))

    async def _verify(self, refs: Sequence[str], cands: Sequence[str], firsts: list[list[EntityJudgement] | None],
                      run: int) -> list[list[EntityJudgement] | None]:
        from cxreval.llm.cache import AnswerCache
        from cxreval.llm.runner import LLMRunner

        cache = AnswerCache(self.llm.resolved_cache_path())
        runner = LLMRunner(self.llm, cache=cache)
        try:
            tasks = {i: self.verify_task(refs[i], cands[i], rows, run) for i, rows in enumerate(firsts)
                     if rows is not None}
            outcomes, _ = await runner.run(list(tasks.values()), label="verification calls")
        finally:
            await runner.aclose()
            cache.close()
        out: list[list[EntityJudgement] | None] = []
        for i in range(len(refs)):
            task = tasks.get(i)
            o = outcomes.get(task.key) if task is not None else None
            out.append(self.judge.rows(str(i), o.value) if o is not None and o.ok and o.value is not None else None)
        return out

    # -- metric interface -------------------------------------------------------------------
    def score_and_judge(self, references: Sequence[str], candidates: Sequence[str]
                        ) -> tuple[np.ndarray, list[list[EntityJudgement]]]:
        from cxreval.evaluate import Evaluator
        from cxreval.io import ReportPair

        if len(references) != len(candidates):
            raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
        ev = Evaluator(self.ontology, uncertain=self.uncertain, engine="llm-pairwise", llm=self.llm)
        pairs = [ReportPair(pair_id=str(i), reference=r, candidate=c)
                 for i, (r, c) in enumerate(zip(references, candidates))]
        result = ev.evaluate_runs(pairs, runs=self.run + 1, progress=False)[self.run]
        by_pair: dict[str, list[EntityJudgement]] = {p.pair_id: [] for p in pairs}
        for row in result.judgements:
            by_pair[row.pair_id].append(row)
        scored = set(result.pair_ids)
        firsts: list[list[EntityJudgement] | None] = [by_pair[p.pair_id] if p.pair_id in scored else None
                                                      for p in pairs]
        finals = firsts if self.passes == 1 else asyncio.run(self._verify(references, candidates, firsts, self.run))
        scores = np.array([float(sum(r.error_count for r in rows)) if rows is not None else np.nan for rows in finals])
        return scores, [rows or [] for rows in finals]

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        return self.score_and_judge(references, candidates)[0]

    def score_pairs_run(self, references: Sequence[str], candidates: Sequence[str], run: int = 0) -> np.ndarray:
        """Scores of run ``run`` (own cache keys), for mean +- sd over repeated runs."""
        return LLMJudgeMetric(self.llm, passes=self.passes, ontology=self.ontology, uncertain=self.uncertain,
                              run=run).score_pairs(references, candidates)
