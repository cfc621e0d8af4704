"""Versioned prompt files (``prompts/*.md``) and their rendering.

Each file has a front matter with ``id`` and ``version`` and one section per chat role. The
version names the prompt in signatures (``pairwise@1``); the hash of the file's text goes into
every cache key, so an edited prompt never reuses stale answers even if its version was not bumped.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Literal

import yaml

from cxreval.ontology import Ontology

from .schemas import MAX_ZONES, Mode, zone_values

MAX_SYNONYMS_SHOWN = 4
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt file: id, version, per-role templates and the hash of its text."""

    id: str
    version: str
    sections: dict[str, str]
    sha256: str

    @property
    def signature(self) -> str:
        return f"{self.id}@{self.version}"

    def render(self, role: str, **values: str) -> str:
        return Template(self.sections[role]).substitute(values).strip()


@lru_cache(maxsize=None)
def load_prompt(name: str) -> PromptTemplate:
    """Read ``prompts/<name>.md`` from the package."""
    text = (resources.files("cxreval.llm") / "prompts" / f"{name}.md").read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    parts = _SECTION.split(body)
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    return PromptTemplate(
        id=str(meta["id"]),
        version=str(meta["version"]),
        sections=sections,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def entity_list(ontology: Ontology, mode: Mode) -> str:
    """One line per entity: the part of the prompt generated from the ontology."""
    lines = []
    for e in ontology.entities:
        attrs = ", ".join(e.attributes) if e.attributes else "presence only"
        syn = [s for s in e.terms if s != e.name.lower()][:MAX_SYNONYMS_SHOWN]
        also = f"; also: {', '.join(syn)}" if syn else ""
        lines.append(f"- {e.id}: {e.name} ({e.kind}; {attrs}{also})")
    return "\n".join(lines)


def format_instructions(mode: Mode, style: Literal["dense", "sparse"], max_items: int, max_evidence: int) -> str:
    """The answer shape in words and an example, for servers that do not enforce the schema."""
    if mode == "pairwise":
        verdict = {"presence": "TP", "location": "aligned", "severity": "not-available", "comparison": "other"}
        if style == "sparse":
            ex = json.dumps({"entities": [{"entity": "<entity id>", **verdict}]})
            return (
                f"Answer with JSON only, in this shape: {ex}. List every entity that either report "
                f"mentions (TN when both deny it), each once, at most {max_items} items; leave out "
                "entities that neither report mentions."
            )
        return (
            f"Answer with JSON only: one key per entity id of the list, in list order, each like "
            f"{json.dumps(verdict)}. Entities that neither report mentions are TN with "
            "not-available and other."
        )
    zones = ", ".join(zone_values())
    verdict = {"status": "present", "side": "left", "zones": ["lower"], "severity": "mild", "comparison": "none"}
    if style == "sparse":
        item = {"entity": "<entity id>", **verdict}
        if max_evidence:
            item["evidence"] = "<the words of the report, short>"
        return (
            f"Answer with JSON only, in this shape: {json.dumps({'entities': [item]})}. One item per "
            f"mention, at most {max_items} items; zones from: {zones} (at most {MAX_ZONES})"
            + (f"; evidence at most {max_evidence} characters." if max_evidence else ".")
        )
    return (
        f"Answer with JSON only: one key per entity id of the list, in list order, each like "
        f"{json.dumps(verdict)}; status not-mentioned (side none, zones [], severity none, "
        f"comparison none) for entities the report does not mention; zones from: {zones}."
    )


def uncertain_rule(policy: str) -> str:
    if policy == "positive":
        return "A hedged mention (possible, may represent, cannot be excluded) counts as present."
    return "A hedged mention (possible, may represent, cannot be excluded) counts as absent."


def ontology_fingerprint(ontology: Ontology) -> str:
    """Hash of the entity set as the prompt and schema see it (ids, names, kinds, attributes, terms)."""
    parts = [(e.id, e.name, e.kind, list(e.attributes), e.terms[: MAX_SYNONYMS_SHOWN + 1]) for e in ontology.entities]
    return hashlib.sha256(json.dumps([ontology.signature, parts]).encode("utf-8")).hexdigest()[:16]
