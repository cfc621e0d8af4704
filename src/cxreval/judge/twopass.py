"""Two-pass LLM judging (ReEvalMed): judge, then verify the judgement.

Pass 1 is cxreval's SPEC-CXR pairwise call (:class:`~cxreval.judge.llm_pairwise.LLMPairwiseJudge`).
Pass 2 continues the same conversation: the model sees its own table and is asked to check every
row against the two reports and return the corrected full table in the same schema. The verified
table replaces the first; both are cached (the verification key includes the first answer), so
reruns make no call. The engine that runs both passes is ``llm-pairwise-2pass``
(:mod:`cxreval.engines`); :class:`cxreval.meta.judge_passes.LLMJudgeMetric` scores with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from cxreval.judge.llm_pairwise import LLMPairwiseJudge
from cxreval.judge.models import EntityJudgement
from cxreval.llm.cache import cache_key
from cxreval.llm.runner import Task

# 2: the first judgement is shown as the pairwise judge answers (quotes and specificity on sparse answers)
VERIFY_VERSION = "2"
VERIFY_PROMPT = """Here is a first judgement of the CANDIDATE against the REFERENCE:

<first-judgement>
{first}
</first-judgement>

Verify it. For every row, re-read both reports: is the entity really stated (present, absent,
uncertain) as the row says, and are the side, severity and change from a prior study really the
same or different? A rewording, a synonym, a different sentence order or layout is not an error.
Correct every wrong row, add an entity the first judgement missed, and answer with the complete
corrected table in the same JSON format as before."""


class TwoPassJudge:
    """Builds the verification call that follows a pairwise judgement; its answer is read by
    the pairwise judge (same schema, same rows)."""

    def __init__(self, judge: LLMPairwiseJudge) -> None:
        self.judge = judge

    @property
    def prompt_signature(self) -> str:
        return f"{self.judge.prompt.signature}+verify@{VERIFY_VERSION}"

    def first_table(self, rows: Sequence[EntityJudgement]) -> str:
        """The first judgement as the model is shown it (and as it would have answered it: a sparse
        answer's items carry the quotes and the specificity)."""
        quoted = self.judge.config.schema_style == "sparse"
        evidence = self.judge.config.max_evidence_chars
        items = []
        for r in rows:
            item: dict[str, str] = {"entity": r.entity}
            if quoted and evidence > 0:
                item.update(reference_quote=r.reference[:evidence], candidate_quote=r.candidate[:evidence])
            item["presence"] = r.presence
            if quoted:
                item["specificity"] = r.specificity
            item.update(location=r.location, severity=r.severity, comparison=r.comparison)
            items.append(item)
        return json.dumps({"entities": items}, indent=1)

    def verify_task(self, reference: str, candidate: str, rows: Sequence[EntityJudgement], run: int = 0) -> Task:
        """The verification call for one pair (the first answer is part of its cache key)."""
        first = self.first_table(rows)
        messages = self.judge.messages(reference, candidate) + [
            {"role": "assistant", "content": first},
            {"role": "user", "content": VERIFY_PROMPT.format(first=first)},
        ]
        key = cache_key(
            {
                "verify": VERIFY_VERSION,
                "pass1": self.judge.key(reference, candidate, run),
                "first_sha": hashlib.sha256(first.encode("utf-8")).hexdigest(),
                "prompt_sha": hashlib.sha256(VERIFY_PROMPT.encode("utf-8")).hexdigest(),
            }
        )
        return Task(
            key=key,
            kind="verify",
            engine=self.judge.signature,
            messages=messages,
            schema=self.judge.schema,
            schema_name=self.judge.schema_name,
            parse=self.judge.parser(reference, candidate),
        )
