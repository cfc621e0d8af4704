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
from typing import Any

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
    """One line per entity, generated from the ontology: id, name, kind, the attributes judged,
    its is-a parents, other words for it, and its description (what it means, so that a model can
    choose between overlapping entities as the ontology does)."""
    lines = []
    for e in ontology.entities:
        attrs = ", ".join(e.attributes) if e.attributes else "presence only"
        parents = f"; is a: {', '.join(p.id for p in e.parents)}" if e.parents else ""
        syn = [s for s in e.terms if s != e.name.lower()][:MAX_SYNONYMS_SHOWN]
        also = f"; also: {', '.join(syn)}" if syn else ""
        meaning = f": {e.description}" if e.description else ""
        lines.append(f"- {e.id}: {e.name} ({e.kind}; {attrs}{parents}{also}){meaning}")
    return "\n".join(lines)


def _buckets(mapping: dict[str, str], order: list[str], shown: int = 8) -> str:
    """``bucket: word, word, ...`` per bucket, in ``order``, at most ``shown`` words each."""
    words: dict[str, list[str]] = {b: [] for b in order}
    for phrase, bucket in mapping.items():
        if bucket in words and phrase != bucket:
            words[bucket].append(phrase)
    return "; ".join(f"{b} ({', '.join(sorted(words[b], key=len)[:shown])})" if words[b] else b for b in order)


def attribute_rules(ontology: Ontology) -> str:
    """Operational definitions of the attributes, generated from the attribute vocabulary and the
    ontology's device positions: the words of each severity and change grade, and for each device
    where its tip belongs and where it is malpositioned."""
    from cxreval.ontology.attributes import attribute_vocabulary

    vocab = attribute_vocabulary()
    lines = [
        f"Severity grades and words for them: {_buckets(vocab.severity, vocab.buckets['severity'])}.",
        f"Changes from a prior study and words for them: {_buckets(vocab.comparison, vocab.buckets['comparison'])}.",
    ]
    devices = [p for p in ontology.device_positions if p.device in ontology.entity_ids]
    if devices:
        lines.append("Device tips (a device's location is where its tip lies):")
        for p in devices:
            wrong = f"; malpositioned at: {', '.join(p.malpositioned)}" if p.malpositioned else ""
            lines.append(f"- {p.device}: belongs at {', '.join(p.expected)}{wrong}")
    return "\n".join(lines)


def ontology_fingerprint(ontology: Ontology) -> str:
    """Hash of the entity set as the prompts and schemas see it: the entity list (ids, names, kinds,
    attributes, parents, terms, descriptions) and the attribute definitions."""
    parts = [entity_list(ontology, "pairwise"), attribute_rules(ontology)]
    return hashlib.sha256(json.dumps([ontology.signature, parts]).encode("utf-8")).hexdigest()[:16]


def worked_examples(name: str, ontology: Ontology) -> list[dict[str, Any]]:
    """The worked pairs of ``exemplars/<name>.yaml`` this ontology can state: an example naming an
    entity the ontology lacks is left out whole; attributes the ontology does not judge for an
    entity are left at not-available / other, as the judge's rows would have them."""
    data = yaml.safe_load((resources.files("cxreval.llm") / "exemplars" / f"{name}.yaml").read_text(encoding="utf-8"))
    kept = []
    for ex in data["examples"]:
        if not all(item["entity"] in ontology.entity_ids for item in ex["entities"]):
            continue
        items = []
        for item in ex["entities"]:
            attrs = ontology.entity(item["entity"]).attributes
            unjudged = {k: "other" if k == "comparison" else "not-available" for k in _ATTRS if k not in attrs}
            items.append({**item, **unjudged})
        kept.append({**ex, "entities": items})
    return kept


_ATTRS = ("location", "severity", "comparison")


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
