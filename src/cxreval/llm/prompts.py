"""Versioned prompt files (``prompts/*.md``) and their rendering.

Each file has a front matter with ``id`` and ``version`` and one section per chat role. The
version names the prompt in signatures (``pairwise@2``); the hash of the file's text goes into
every cache key, so an edited prompt never reuses stale answers even if its version was not bumped.

Report text is data, never instructions: it stands verbatim between fence tags whose names carry
a code (``<candidate-3f9a0c…>`` … ``</candidate-3f9a0c…>``, see :func:`fence_code`) that occurs
nowhere in the text, so no report can close its block or open a fake one, and the system prompts
say that any instruction inside a block is report text to ignore. The code is derived from the
texts, so the same input always renders the same prompt (cache keys and resume hold).
:func:`read_fenced` is the exact inverse, for the loopback server. Before it is fenced, a report's
chat-template tokens (``<|im_start|>``, ``[INST]``) are neutralised
(:func:`cxreval.llm.injection.neutralise`): :func:`report_blocks` does both, for every engine.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

import yaml

from cxreval.ontology import Ontology

from .injection import neutralise
from .schemas import Mode

MAX_SYNONYMS_SHOWN = 4
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)
FENCE_SIZE = 16  # hex characters: 64 bits, no text can be made to contain its own code
FENCE_NAMES: tuple[str, ...] = ("reference", "candidate", "report")  # in the order the code hashes them
MAX_FENCE_TRIES = 1000
FENCE_OPEN = re.compile(rf"<({'|'.join(FENCE_NAMES)})-([0-9a-f]{{{FENCE_SIZE}}})>")


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


@cache
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


def uncertain_rule(policy: str) -> str:
    if policy == "positive":
        return "A hedged mention (possible, may represent, cannot be excluded) counts as present."
    return "A hedged mention (possible, may represent, cannot be excluded) counts as absent."


def ontology_fingerprint(ontology: Ontology) -> str:
    """Hash of the entity set as the prompt and schema see it (ids, names, kinds, attributes, terms)."""
    parts = [(e.id, e.name, e.kind, list(e.attributes), e.terms[: MAX_SYNONYMS_SHOWN + 1]) for e in ontology.entities]
    return hashlib.sha256(json.dumps([ontology.signature, parts]).encode("utf-8")).hexdigest()[:16]


# -- fences around report text ---------------------------------------------------------------
def fence_code(*texts: str, size: int = FENCE_SIZE) -> str:
    """The code in the fence tags of one prompt: derived from its report texts, found in none of them.

    ``sha256(i, texts)`` for i = 0, 1, ...: the first one that occurs in no text (compared in
    lower case, as a model might read ``</CANDIDATE-…>``) wins. Deterministic, so a prompt is the
    same on every run; absent from the texts, so no text can write a tag of its prompt's fences.
    """
    lowered = [t.lower() for t in texts]
    payload = json.dumps(texts)
    for i in range(MAX_FENCE_TRIES):
        code = hashlib.sha256(f"{i}:{payload}".encode()).hexdigest()[:size]
        if not any(code in t for t in lowered):
            return code
    raise ValueError(f"no fence code of {size} characters is free in these texts")


def report_blocks(**texts: str) -> dict[str, str]:
    """Template values for fenced report blocks: each text as it is sent (chat-template tokens
    neutralised, :func:`~cxreval.llm.injection.neutralise`) and the ``fence`` code of them all."""
    sent = {name: neutralise(text) for name, text in texts.items()}
    return {**sent, "fence": fence_code(*sent.values())}


def read_fenced(prompt: str) -> dict[str, str] | None:
    """The report texts of a prompt cxreval rendered, by fence name; ``None`` if it has no fence.

    The first fence tag of the prompt gives the code (report text only stands after it); each
    block ends at the one closing tag with that code. Raises :class:`ValueError` when the code is
    not the one :func:`fence_code` derives from the texts read, i.e. when they were not read whole.
    """
    first = FENCE_OPEN.search(prompt)
    if first is None:
        return None
    code = first.group(2)
    texts: dict[str, str] = {}
    for name in FENCE_NAMES:
        block = re.search(rf"<{name}-{code}>\n(.*?)\n</{name}-{code}>", prompt, re.DOTALL)
        if block is not None:
            texts[name] = block.group(1)
    if fence_code(*texts.values()) != code:
        raise ValueError(f"the report blocks fenced with {code} were not read whole")
    return texts
