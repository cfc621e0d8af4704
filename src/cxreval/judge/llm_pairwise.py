"""SPEC-CXR's pairwise LLM judge: one call per (reference, candidate) pair -> judgement rows.

The answer is normalised to the spine's rules so that the table means the same whichever engine
wrote it: attributes only on TP rows and only where the ontology says they apply (otherwise
not-available / other). Sparse answers list the entities either report mentions (TN rows
included); dense answers name every entity, so their TN rows cannot be told from unmentioned
entities and are left implicit, which changes no score (scores count TN as the remainder).

Both reports stand in fences the texts cannot close (:func:`cxreval.llm.prompts.fence_code`). An
answer that judges no entity (sparse: no item; dense: every entity TN) scores the pair as
perfect by omission, so it is invalid when the rule engine reads a finding in either report
(:class:`cxreval.extract.llm_mentions.EmptyAnswerCheck`): re-asked once, then a failure, never a score.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from typing import Any

from cxreval.extract.llm_mentions import EmptyAnswerCheck
from cxreval.io import ReportPair
from cxreval.judge.compare import UncertainPolicy
from cxreval.judge.llm_verdicts import pairwise_format, pairwise_schema, parse_pairwise
from cxreval.judge.models import EntityJudgement
from cxreval.llm.cache import cache_key
from cxreval.llm.config import LLMConfig
from cxreval.llm.prompts import (
    entity_list,
    load_prompt,
    ontology_fingerprint,
    report_blocks,
    uncertain_rule,
)
from cxreval.llm.runner import Task
from cxreval.llm.schemas import ParsedAnswer, schema_name
from cxreval.ontology import Ontology

# 2: fenced reports, empty answers for pairs with findings refused
# 3: chat-template tokens in report text neutralised before sending (what the model reads changed)
ENGINE_VERSION = "3"


class LLMPairwiseJudge:
    """Builds the pairwise call for a pair and turns a validated answer into judgement rows."""

    name = "llm-pairwise"

    def __init__(self, ontology: Ontology, config: LLMConfig, uncertain: UncertainPolicy = "positive") -> None:
        self.ontology = ontology
        self.config = config
        self.uncertain: UncertainPolicy = uncertain
        self.prompt = load_prompt("pairwise")
        self.schema = pairwise_schema(config.schema_style, ontology, max_items=config.max_items)
        self.schema_name = schema_name("pairwise", config.schema_style)
        self._system = self.prompt.render("system")
        self._entities = entity_list(ontology, "pairwise")
        self._format = pairwise_format(config.schema_style, config.max_items)
        self._fingerprint = ontology_fingerprint(ontology)
        self._order = {eid: i for i, eid in enumerate(ontology.entity_ids)}
        self._empty = EmptyAnswerCheck(ontology)

    @property
    def signature(self) -> str:
        return f"{self.name}@{ENGINE_VERSION}"

    def messages(self, reference: str, candidate: str) -> list[dict[str, str]]:
        user = self.prompt.render(
            "user",
            entities=self._entities,
            format=self._format,
            uncertain_rule=uncertain_rule(self.uncertain),
            **report_blocks(reference=reference, candidate=candidate),
        )
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    def key(self, reference: str, candidate: str, run: int = 0) -> str:
        def sha(t):
            return hashlib.sha256(t.encode("utf-8")).hexdigest()

        return cache_key(
            {
                "engine": self.signature,
                "prompt": self.prompt.signature,
                "prompt_sha": self.prompt.sha256,
                "ontology": self._fingerprint,
                "params": self.config.answer_params(),
                "run": run,
                "uncertain": self.uncertain,
                "reference_sha": sha(reference),
                "candidate_sha": sha(candidate),
            }
        )

    def parse(self, raw: str, reference: str | None = None, candidate: str | None = None) -> ParsedAnswer:
        """A validated answer; given the reports, an empty one for a pair with findings is refused."""
        style = self.config.schema_style
        parsed = parse_pairwise(raw, style, self.ontology, max_items=self.config.max_items)
        reports = {"the reference report": reference, "the candidate report": candidate}
        return self._empty.check(parsed, "pairwise", style, reports)

    def parser(self, reference: str, candidate: str) -> Callable[[str], ParsedAnswer]:
        """:meth:`parse` for one pair, as a task's ``parse``."""
        return partial(self.parse, reference=reference, candidate=candidate)

    def task(self, pair: ReportPair, run: int = 0) -> Task:
        return Task(
            key=self.key(pair.reference, pair.candidate, run),
            kind="pairwise",
            engine=self.signature,
            messages=self.messages(pair.reference, pair.candidate),
            schema=self.schema,
            schema_name=self.schema_name,
            parse=self.parser(pair.reference, pair.candidate),
        )

    def rows(self, pair_id: str, value: dict[str, Any]) -> list[EntityJudgement]:
        """Judgement rows from a validated (possibly cached) answer, in ontology order."""
        rows: list[EntityJudgement] = []
        for item in sorted(value["items"], key=lambda i: self._order[i["entity"]]):
            presence = item["presence"]
            if presence == "TN" and self.config.schema_style == "dense":
                continue
            attrs = self.ontology.entity(item["entity"]).attributes
            tp = presence == "TP"
            rows.append(
                EntityJudgement(
                    pair_id=pair_id,
                    entity=item["entity"],
                    presence=presence,
                    location=item["location"] if tp and "location" in attrs else "not-available",
                    severity=item["severity"] if tp and "severity" in attrs else "not-available",
                    comparison=item["comparison"] if tp and "comparison" in attrs else "other",
                )
            )
        return rows
