"""SPEC-CXR's pairwise LLM judge: one call per (reference, candidate) pair -> judgement rows.

The answer is normalised to the spine's rules so that the table means the same whichever engine
wrote it: attributes only on TP rows and only where the ontology says they apply (otherwise
not-available / other). Sparse answers list the entities either report mentions (TN rows
included); dense answers name every entity, so their TN rows cannot be told from unmentioned
entities and are left implicit, which changes no score (scores count TN as the remainder).

The prompt is SPEC-CXR's task written out (docs/llm.md shows it rendered): the instructions, the
entity list with each entity's meaning and is-a parents, the attribute definitions and the worked
pairs come first and are the same for every call (a server's prefix cache keeps them: Anthropic's
through ``cache_control``, OpenAI-compatible servers by the prefix), the pair last.

Both reports stand in fences the texts cannot close (:func:`cxreval.llm.prompts.fence_code`). An
answer that judges no entity (sparse: no item; dense: every entity TN) scores the pair as
perfect by omission, so it is invalid when the rule engine reads a finding in either report
(:class:`cxreval.extract.llm_mentions.EmptyAnswerCheck`): re-asked once, then a failure, never a score.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from cxreval.extract.hedges import uncertain_rule
from cxreval.extract.llm_mentions import EmptyAnswerCheck
from cxreval.io import ReportPair
from cxreval.judge.compare import UncertainPolicy
from cxreval.judge.llm_verdicts import pairwise_format, pairwise_schema, parse_pairwise
from cxreval.judge.models import EntityJudgement
from cxreval.llm.cache import cache_key
from cxreval.llm.config import LLMConfig
from cxreval.llm.prompts import (
    attribute_rules,
    entity_list,
    load_prompt,
    ontology_fingerprint,
    report_blocks,
    worked_examples,
)
from cxreval.llm.runner import Task
from cxreval.llm.schemas import ParsedAnswer, schema_name
from cxreval.ontology import Ontology

# 2: fenced reports, empty answers for pairs with findings refused
# 3: chat-template tokens in report text neutralised before sending (what the model reads changed)
# 4: prompt 3 (meanings, hierarchy, attribute definitions, worked pairs); sparse answers quote the
#    reports, say how specific the candidate is and list no true negatives
ENGINE_VERSION = "4"


class LLMPairwiseJudge:
    """Builds the pairwise call for a pair and turns a validated answer into judgement rows."""

    name = "llm-pairwise"

    def __init__(
        self, ontology: Ontology, config: LLMConfig, uncertain: UncertainPolicy = "positive", hierarchy: bool = True
    ) -> None:
        self.ontology = ontology
        self.config = config
        self.uncertain: UncertainPolicy = uncertain
        #: The finding hierarchy's rule (one finding once, with its specificity): sparse answers
        #: only; a dense answer has SPEC-CXR's layout and rule, entity by entity.
        self.hierarchy = hierarchy and config.schema_style == "sparse"
        self.prompt = load_prompt("pairwise")
        style, evidence = config.schema_style, config.max_evidence_chars
        self.schema = pairwise_schema(
            style, ontology, max_items=config.max_items, max_evidence=evidence, specificity=self.hierarchy
        )
        self.schema_name = schema_name("pairwise", style)
        self._system = self.prompt.render(
            "system",
            entities=entity_list(ontology, "pairwise"),
            attribute_rules=attribute_rules(ontology),
            uncertain_rule=uncertain_rule(uncertain, ontology),
            presence_rules=PRESENCE_RULES[(style, self.hierarchy)],
            quote_rule=QUOTE_RULE if style == "sparse" and evidence > 0 else "",
            format=pairwise_format(style, config.max_items, evidence, specificity=self.hierarchy),
        )
        #: The worked pairs as earlier turns (sparse answers only: a dense example repeats every
        #: entity, some 6,000 tokens each).
        self._examples = self._worked(style, evidence)
        self._fingerprint = ontology_fingerprint(ontology)
        self._order = {eid: i for i, eid in enumerate(ontology.entity_ids)}
        self._empty = EmptyAnswerCheck(ontology)
        #: The rendered prefix (system message and worked pairs): every rule, word list and example
        #: rendered into it is part of each cache key through this hash.
        self._prefix_sha = hashlib.sha256(json.dumps([self._system, self._examples]).encode("utf-8")).hexdigest()[:16]

    def _worked(self, style: str, evidence: int) -> list[dict[str, str]]:
        if style != "sparse":
            return []
        turns: list[dict[str, str]] = []
        for ex in worked_examples("pairwise", self.ontology):
            if not self.hierarchy and any(item["specificity"] != "exact" for item in ex["entities"]):
                continue  # taught by the hierarchy's rule, which this judge does not apply
            items = [self._shown(item, evidence) for item in ex["entities"]]
            user = self.prompt.render("user", **report_blocks(reference=ex["reference"], candidate=ex["candidate"]))
            turns += [{"role": "user", "content": user}, {"role": "assistant", "content": json.dumps({"entities": items})}]
        return turns

    def _shown(self, item: dict[str, Any], evidence: int) -> dict[str, Any]:
        """A worked answer's item as this configuration asks for it (quotes cut or left out)."""
        if evidence > 0:
            return {
                **item,
                "reference_quote": item["reference_quote"][:evidence],
                "candidate_quote": item["candidate_quote"][:evidence],
            }
        return {k: v for k, v in item.items() if k not in ("reference_quote", "candidate_quote")}

    @property
    def signature(self) -> str:
        return f"{self.name}@{ENGINE_VERSION}"

    def messages(self, reference: str, candidate: str) -> list[dict[str, str]]:
        """The system message, the worked pairs, then this pair: the same prefix for every call."""
        user = self.prompt.render("user", **report_blocks(reference=reference, candidate=candidate))
        return [{"role": "system", "content": self._system}, *self._examples, {"role": "user", "content": user}]

    def key(self, reference: str, candidate: str, run: int = 0) -> str:
        def sha(t):
            return hashlib.sha256(t.encode("utf-8")).hexdigest()

        return cache_key(
            {
                "engine": self.signature,
                "prompt": self.prompt.signature,
                "prompt_sha": self.prompt.sha256,
                "prefix_sha": self._prefix_sha,
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
        parsed = parse_pairwise(
            raw, style, self.ontology, max_items=self.config.max_items, max_evidence=self.config.max_evidence_chars
        )
        reports = {"the reference report": reference, "the candidate report": candidate}
        return self._empty.check(parsed, "pairwise", style, reports, policy=self.uncertain)

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
        """Judgement rows from a validated (possibly cached) answer, in ontology order: attributes
        and specificity on TP rows only, the quotes as each side's evidence."""
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
                    specificity=item.get("specificity", "exact") if tp and self.hierarchy else "exact",
                    reference=item.get("reference_quote", ""),
                    candidate=item.get("candidate_quote", ""),
                )
            )
        return rows


#: How presence is judged, by answer layout and rule: a sparse answer lists only what a report
#: states and, under the finding hierarchy, says how specific the candidate is; a dense one judges
#: every entity, each on its own (SPEC-CXR's rule).
_FLAT = """- Judge each entity on its own, by what each report states of it: "pneumothorax" against
  "tension pneumothorax" is FN for tension_pneumothorax and FP for pneumothorax (SPEC-CXR's
  rule)."""
PRESENCE_RULES = {
    ("sparse", True): """- List each entity that either report states as present, once. An entity both reports deny
  or leave out (a true negative) changes no score: do not list it.
- One finding, one row, at the most specific entity a report supports. When the two reports
  name one finding at different levels (an entity and one of its "is a" parents), give one TP
  row at the reference's entity with specificity less-specific (the candidate names a parent:
  "pneumothorax" for "tension pneumothorax") or more-specific (the candidate names a child);
  synonym when both name it with words of one meaning ("airspace disease" and "consolidation"
  at one place); exact otherwise. A parent both reports state is its own row.""",
    ("sparse", False): """- List each entity that either report states as present, once, with specificity exact. An
  entity both reports deny or leave out (a true negative) changes no score: do not list it.
"""
    + _FLAT,
    ("dense", False): """- Give every entity of the list a verdict, in list order: TN with not-available and other
  for an entity neither report states as present.
"""
    + _FLAT,
}
#: The quoting rule of a sparse answer with quotes.
QUOTE_RULE = """Quote before you judge: for each listed entity, first copy the words of each report that state
it (reference_quote, candidate_quote; empty for a report that does not state it), then give
the verdicts.

"""
