"""Generic parts of LLM answers: JSON loading, errors for the model, per-entity answer shapes.

An LLM engine's answer is one JSON object. Two shapes of per-entity answers are built here from
the ontology and a verdict schema the engine gives (the engines' own answers live next to them:
:mod:`cxreval.extract.llm_mentions` for mentions, :mod:`cxreval.judge.llm_verdicts` for pairwise
verdicts):

- ``dense``: SPEC-CXR's layout, one required field per ontology entity. Self-describing but
  every answer spells out all entities (thousands of output tokens).
- ``sparse``: ``{"entities": [...]}``, only the entities the report(s) mention, entity ids as an
  enum. A fraction of the output tokens.

Answers are parsed leniently where nothing is lost (code fences, missing optional attributes,
entity ids written with spaces or capitals) and strictly where a guess would be needed (unknown
ids, values outside an enum, wrong types): those raise :class:`AnswerError`, whose message is
shown to the model in the one re-ask. Nothing here knows what a verdict means.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cxreval.literals import SchemaStyle as Style
from cxreval.ontology import Ontology

Mode = Literal["pairwise", "extract"]
MAX_LISTED_PROBLEMS = 8
#: The deepest nesting an answer may have (every schema here needs at most 4 levels); deeper
#: answers are rejected before anything walks them (recursion in validation or storage).
MAX_DEPTH = 16


class AnswerError(ValueError):
    """An answer that does not fit the schema or names unknown entities; the message is for the model."""


# -- schemas ---------------------------------------------------------------------------------
def enum_schema(values: tuple[str, ...] | list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def object_schema(props: dict[str, Any]) -> dict[str, Any]:
    """An object whose every property is required and nothing else is allowed."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def entity_answer_schema(
    style: Style, ontology: Ontology, dense_verdict: dict[str, Any], sparse_verdict: dict[str, Any], *, max_items: int
) -> dict[str, Any]:
    """The answer object: ``dense``, one ``dense_verdict`` object per entity id; ``sparse``, a
    bounded list of ``{"entity": <id>, **sparse_verdict}``."""
    if style == "dense":
        verdict = object_schema(dense_verdict)
        return object_schema({eid: verdict for eid in ontology.entity_ids})
    item = object_schema({"entity": enum_schema(ontology.entity_ids), **sparse_verdict})
    return object_schema({"entities": {"type": "array", "items": item, "maxItems": max_items}})


def schema_name(mode: Mode, style: str) -> str:
    return f"cxreval_{mode}_{style}"


# -- validation ------------------------------------------------------------------------------
class Lenient(BaseModel):
    """Base of answer models: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


class SparseAnswer(Lenient):
    entities: list[dict[str, Any]]


def problems_of(exc: ValidationError, prefix: str) -> list[str]:
    """Readable problems of a validation error, each naming the field (``prefix.field``)."""
    out = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        value = e.get("input")
        shown = json.dumps(value)[:60] if isinstance(value, (str, int, float, bool)) or value is None else ""
        out.append(f"{loc}: {e['msg']}" + (f" (got {shown})" if shown else ""))
    return out


def raise_problems(problems: list[str]) -> None:
    """An :class:`AnswerError` listing the first problems, when there are any."""
    if problems:
        listed = problems[:MAX_LISTED_PROBLEMS]
        more = len(problems) - len(listed)
        raise AnswerError("; ".join(listed) + (f"; and {more} more" if more > 0 else ""))


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def load_json(raw: str) -> tuple[Any, list[tuple[str, Any]]]:
    """Parse an answer; also return duplicated keys of the top-level object (dense answers)."""
    text = raw.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    if not text:
        raise AnswerError("the answer is empty; answer with one JSON object")
    dup_keys: list[tuple[str, Any]] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                dup_keys.append((k, v))
            else:
                out[k] = v
        return out

    try:
        value = json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise AnswerError(
            f"the answer is not valid JSON ({exc.msg} at character {exc.pos} of {len(text)}); "
            "it may have been cut off: answer with one complete JSON object, shorter if needed"
        ) from None
    except RecursionError:
        raise AnswerError(f"the answer is nested too deeply to read; {_SHALLOW}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (4,300)
        raise AnswerError(
            f"the answer holds a value that cannot be read ({str(exc)[:120]}); "
            "answer with one JSON object of the schema's fields only"
        ) from None
    if not isinstance(value, dict):
        raise AnswerError(f"the answer must be a JSON object, got {type(value).__name__}")
    if _depth_over(value, MAX_DEPTH):
        raise AnswerError(f"the answer is nested more than {MAX_DEPTH} levels deep; {_SHALLOW}")
    return value, dup_keys


_SHALLOW = "answer with one JSON object shaped like the schema (a list of flat objects)"


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels deep (iterative: any depth)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


class EntityResolver:
    """Maps the ids a model writes to ontology ids; unknown ones become a readable error."""

    def __init__(self, ontology: Ontology) -> None:
        self.ids = ontology.entity_ids
        self._known = set(self.ids)

    def resolve(self, name: str) -> str | None:
        if name in self._known:
            return name
        folded = re.sub(r"[\s\-/]+", "_", name.strip().lower())
        return folded if folded in self._known else None

    def unknown_message(self, names: list[str]) -> str:
        parts = []
        for name in dict.fromkeys(names):
            close = difflib.get_close_matches(name.lower(), self.ids, n=1, cutoff=0.75)
            parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return "unknown entity ids: " + ", ".join(parts) + "; use only ids from the entity list"


#: Turns one validated verdict (model instance, resolved entity id, where it stood in the answer)
#: into a stored item; it may add problems (values the model cannot express, e.g. an unknown zone).
Convert = Callable[[Any, str, str, list[str]], dict[str, Any]]


def entity_items(
    raw: str,
    style: Style,
    ontology: Ontology,
    verdict_model: type[BaseModel],
    item_model: type[BaseModel],
    convert: Convert,
    *,
    max_items: int,
) -> list[tuple[str, dict[str, Any]]]:
    """The (entity id, item) pairs of a per-entity answer, in answer order, repeats included.

    ``dense``: one ``verdict_model`` per entity key (a repeated key is listed again);
    ``sparse``: ``{"entities": [item_model, ...]}`` with at most ``max_items`` items. Every
    problem found (unknown ids first) is raised together as one :class:`AnswerError`.
    """
    value, dup_keys = load_json(raw)
    resolver = EntityResolver(ontology)
    problems: list[str] = []
    unknown: list[str] = []
    collected: list[tuple[str, dict[str, Any]]] = []
    if style == "dense":
        for key, verdict in list(value.items()) + dup_keys:
            entity = resolver.resolve(str(key))
            if entity is None:
                unknown.append(str(key))
                continue
            try:
                v = verdict_model.model_validate(verdict)
            except ValidationError as exc:
                problems.extend(problems_of(exc, entity))
                continue
            collected.append((entity, convert(v, entity, entity, problems)))
    else:
        try:
            sparse = SparseAnswer.model_validate(value)
        except ValidationError as exc:
            raise_problems(problems_of(exc, ""))
            raise  # unreachable
        if len(sparse.entities) > max_items:
            problems.append(f"entities: {len(sparse.entities)} items, at most {max_items} allowed")
        for i, obj in enumerate(sparse.entities):
            try:
                it = item_model.model_validate(obj)
            except ValidationError as exc:
                problems.extend(problems_of(exc, f"entities.{i}"))
                continue
            entity = resolver.resolve(it.entity)  # type: ignore[attr-defined]
            if entity is None:
                unknown.append(it.entity)  # type: ignore[attr-defined]
                continue
            collected.append((entity, convert(it, entity, f"entities.{i}", problems)))
    if unknown:
        problems.insert(0, resolver.unknown_message(unknown))
    raise_problems(problems)
    return collected


# -- parsing ---------------------------------------------------------------------------------
class ParsedAnswer(BaseModel):
    """A validated answer: normalised items (JSON-ready, stored in the cache) and notes."""

    model_config = ConfigDict(frozen=True)

    items: list[dict[str, Any]]
    notes: list[str] = Field(default_factory=list)


def vote(items: list[tuple[str, dict[str, Any]]], key_fields: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """One item per entity: the verdict given most often; a tie keeps the first given (SPEC-CXR)."""
    by_entity: dict[str, list[dict[str, Any]]] = {}
    for entity, item in items:
        by_entity.setdefault(entity, []).append(item)
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for entity, group in by_entity.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        keys = [tuple(json.dumps(g.get(f), sort_keys=True) for f in key_fields) for g in group]
        counts = Counter(keys)
        best = max(counts.values())
        winner = next(i for i, k in enumerate(keys) if counts[k] == best)
        out.append(group[winner])
        notes.append(f"{entity}: {len(group)} answers, kept answer {winner + 1} ({best} vote{'s' if best > 1 else ''})")
    return out, notes


#: Characters per token when sizing an answer: JSON of ids and enum words runs 3-4 characters a
#: token in current tokenizers; 3 errs towards room.
CHARS_PER_ANSWER_TOKEN = 3
#: An array with no ``maxItems`` is sized as if it held this many items.
UNBOUNDED_ITEMS = 50
#: The least and the most ``answer_token_bound`` asks for: never less than the 4,096 every call
#: had before sizing, never more than 16,384 (GPT-4o's output limit; a server that allows fewer
#: says so with a 400, and the backend steps down to 4,096: ``backends.TOKEN_STEP_DOWN``).
MIN_ANSWER_TOKENS, MAX_ANSWER_TOKENS = 4096, 16_384
#: Bounds already computed, by schema object (kept alive here): the runner asks several times a call.
_BOUNDS: dict[int, tuple[dict[str, Any], int]] = {}


def _json_chars(schema: Any) -> int:
    """The most characters a JSON value valid under ``schema`` needs (compact, with quotes)."""
    if not isinstance(schema, dict):
        return 20
    if "enum" in schema:
        return max((len(json.dumps(v)) for v in schema["enum"]), default=4)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return max(_json_chars(o) for o in options)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return 2 + sum(len(json.dumps(k)) + 1 + _json_chars(v) + 1 for k, v in props.items())
    if kind == "array":
        return 2 + int(schema.get("maxItems", UNBOUNDED_ITEMS)) * (_json_chars(schema.get("items")) + 1)
    if kind == "string":
        return 2 + int(schema.get("maxLength", 200))
    return {"integer": 12, "number": 24, "boolean": 5, "null": 4}.get(str(kind), 20)


def answer_token_bound(schema: dict[str, Any]) -> int:
    """Output tokens that hold the longest answer ``schema`` allows, twice over for the indentation
    and line breaks a model may add: a dense SPEC-CXR answer (one field per entity, about 6.4k
    tokens) fits, where a fixed 4,096 cut every dense answer off."""
    hit = _BOUNDS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    tokens = -(-_json_chars(schema) * 2 // CHARS_PER_ANSWER_TOKEN)
    bound = max(MIN_ANSWER_TOKENS, min(MAX_ANSWER_TOKENS, tokens))
    if len(_BOUNDS) < 256:
        _BOUNDS[id(schema)] = (schema, bound)
    return bound
