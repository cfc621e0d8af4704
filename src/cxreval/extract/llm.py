"""LLM extraction: one call per report text, returning the same :class:`Extraction` as the rule engine.

The deterministic comparison of the spine then judges each pair, so a reference shared by many
candidate models is read once (and, through the answer cache, once ever).

The report stands in a fence the text cannot close (:func:`cxreval.llm.prompts.fence_code`). An
answer with no mention for a report in which the rule engine reads a finding is invalid
(:class:`cxreval.extract.llm_mentions.EmptyAnswerCheck`): re-asked once, then a failure, never a score.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any

from cxreval.extract.hedges import HEDGE_WORDS
from cxreval.extract.llm_mentions import (
    EmptyAnswerCheck,
    mention_format,
    mention_schema,
    parse_mentions,
)
from cxreval.extract.models import Extraction, Mention
from cxreval.llm.cache import cache_key
from cxreval.llm.config import LLMConfig
from cxreval.llm.prompts import (
    attribute_rules,
    entity_list,
    load_prompt,
    ontology_fingerprint,
    report_blocks,
)
from cxreval.llm.runner import Task
from cxreval.llm.schemas import ParsedAnswer, schema_name
from cxreval.ontology import Ontology

# 2: fenced report, empty answers for reports with findings refused
# 3: chat-template tokens in report text neutralised before sending (what the model reads changed)
# 4: prompt 3: the instructions and entity list (with meanings and parents) in the system message,
#    the same for every call (a prefix cache keeps them), the report alone in the user message
ENGINE_VERSION = "4"


class LLMExtractor:
    """Builds the extraction call for a report and turns a validated answer into mentions."""

    name = "llm-extract"

    def __init__(self, ontology: Ontology, config: LLMConfig) -> None:
        self.ontology = ontology
        self.config = config
        self.prompt = load_prompt("extract")
        self.schema = mention_schema(
            config.schema_style, ontology, max_items=config.max_items, max_evidence=config.max_evidence_chars
        )
        self.schema_name = schema_name("extract", config.schema_style)
        self._system = self.prompt.render(
            "system",
            hedge_words=", ".join(HEDGE_WORDS),
            attribute_rules=attribute_rules(ontology),
            entities=entity_list(ontology, "extract"),
            format=mention_format(config.schema_style, config.max_items, config.max_evidence_chars),
        )
        #: Every value rendered into the system message is part of each cache key through this hash.
        self._system_sha = hashlib.sha256(self._system.encode("utf-8")).hexdigest()[:16]
        self._fingerprint = ontology_fingerprint(ontology)
        self._empty = EmptyAnswerCheck(ontology)

    @property
    def signature(self) -> str:
        return f"{self.name}@{ENGINE_VERSION}"

    def messages(self, text: str) -> list[dict[str, str]]:
        """The system message (the same for every call), then the fenced report."""
        user = self.prompt.render("user", **report_blocks(report=text))
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    def key(self, text: str, run: int = 0) -> str:
        return cache_key(
            {
                "engine": self.signature,
                "prompt": self.prompt.signature,
                "prompt_sha": self.prompt.sha256,
                "system_sha": self._system_sha,
                "ontology": self._fingerprint,
                "params": self.config.answer_params(),
                "run": run,
                "text_sha": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            }
        )

    def parse(self, raw: str, text: str | None = None) -> ParsedAnswer:
        """A validated answer; given the report ``text``, an empty one for a report with findings is refused."""
        c = self.config
        parsed = parse_mentions(raw, c.schema_style, self.ontology, max_items=c.max_items, max_evidence=c.max_evidence_chars)
        return self._empty.check(parsed, "extract", c.schema_style, {"the report": text})

    def task(self, text: str, run: int = 0) -> Task:
        return Task(
            key=self.key(text, run),
            kind="extract",
            engine=self.signature,
            messages=self.messages(text),
            schema=self.schema,
            schema_name=self.schema_name,
            parse=partial(self.parse, text=text),
        )

    def extraction(self, value: dict[str, Any]) -> Extraction:
        """Mentions from a validated (possibly cached) answer."""
        mentions = tuple(
            Mention(
                entity=i["entity"],
                status=i["status"],
                side=i.get("side"),
                zones=tuple(i.get("zones") or ()),
                severity=i.get("severity"),
                comparison=i.get("comparison"),
                sentence=i.get("evidence") or "",
            )
            for i in value["items"]
        )
        return Extraction(engine=self.signature, mentions=mentions)
