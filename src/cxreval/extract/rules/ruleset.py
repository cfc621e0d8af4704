"""The rule records (``data/*.yaml``) and a user's rule file, loaded into one :class:`RuleSet`.

Every decision the engine makes is a named record: a cue list (``cues.yaml``), a finding-name
rule or site rule (``names.yaml``), a status step or attribute window (``steps.yaml``), a normal
statement (``normal_statements.yaml``); the word lists are ``lexicon.yaml``. Each record has an
``id``, a one-line ``doc`` and an ``example`` that ``tests/test_rule_records.py`` reads.

A user rule file (``--rules FILE``) adds records (``kind: name | cue | site | normal``) or
overrides a packaged one by its id (any field; ``add_phrases`` / ``remove_phrases`` edit a phrase
list; a step may be moved with ``order`` or turned off with ``enabled: false``), and edits word
lists (``lexicon: {name: {add: [...], remove: [...]}}``). Its SHA-256 enters the signature.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxreval.extract.models import HEDGE_GRADES
from cxreval.extract.rules.lexicon import Lexicon, LexiconError, lexicon_from_data
from cxreval.extract.rules.regex_shape import within_full_stops
from cxreval.extract.rules.scanning import PhraseTrie
from cxreval.extract.text import term_tokens
from cxreval.literals import HedgeGrade
from cxreval.ontology import Ontology
from cxreval.ontology.attributes import attribute_vocabulary
from cxreval.yaml_files import YAMLError, parse, safe_load

#: Cue categories: what the engine does with a phrase (docs/engine.md, "Rule kinds").
CueCategory = Literal[
    "negation_pre",
    "negation_post",
    "pseudo_negation",
    "uncertain_pre",
    "uncertain_post",
    "historical_pre",
    "terminators",
    "alternatives",
    "hypothetical_pre",
    "removal_post",
    "not_cues",
    "negation_adjacent",
    "negation_prefix",
]
CUE_CATEGORIES: tuple[str, ...] = CueCategory.__args__  # type: ignore[attr-defined]
#: Attribute vocabularies (``ontology/attributes.yaml``), scanned with the cues.
VOCAB_KINDS = ("sides", "zones", "severity", "comparison", "landmarks", "units")
#: Cue categories whose phrases carry a certainty grade.
GRADED = ("uncertain_pre", "uncertain_post")
#: The status steps the interpreter knows, by id (their order is data: ``steps.yaml``).
STEP_IDS = (
    "negation.removal",
    "negation.prefix",
    "negation.copula",
    "negation.adjacent",
    "scope.backward",
    "label.value",
    "scope.forward",
    "alternative.versus",
    "alternative.or",
    "finding.stated",
)
#: The rule ids that name a reading without a record of their own kind.
NAME_SCAN, PREFIX_REST = "finding.name", "finding.prefix_rest"


class RulesError(ValueError):
    """A rule file that cannot be used: the message names the file and line."""


class Example(BaseModel):
    """A sentence and what the engine reads from it (every field but ``text`` optional)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    entity: str | None = None
    #: None (given as ``null``): the sentence makes no mention of ``entity``.
    status: str | None = None
    grade: str | None = None
    side: str | None = None
    zones: list[str] | None = None
    severity: str | None = None
    change: str | None = None
    historical: bool | None = None
    #: The landmark a device's tip is read at, and its distance above it (mm).
    tip: str | None = None
    tip_mm: float | None = None
    size_mm: float | None = None


class Record(BaseModel):
    """What every rule record has."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+(\.[a-z0-9_-]+)*$")
    doc: str = Field(min_length=1)
    example: Example | None = None
    #: False: the rule is not applied (a user file turns a packaged rule off by its id).
    enabled: bool = True


class CueRecord(Record):
    """Cue phrases of one category (what the engine does with them) and, for a hedge, its grade."""

    kind: Literal["cue"] = "cue"
    category: CueCategory
    grade: HedgeGrade | None = None
    phrases: list[str]


class NameRecord(Record):
    """Words (an abbreviation, a user's term) that name an ontology entity. With ``near``, they name
    it only where a ``near`` word stands in the mention's clause or sentence (``reach``) and no
    ``unless`` word does; elsewhere they name no finding ("lucency" is the lung's only beside a lung
    place: a lucency in a rib or under the diaphragm is another finding's sign)."""

    kind: Literal["name"] = "name"
    entity: str
    phrases: list[str]
    near: list[str] = []
    unless: list[str] = []
    reach: Literal["clause", "sentence"] = "clause"

    @model_validator(mode="after")
    def _unless_needs_near(self) -> NameRecord:
        if self.unless and not self.near:
            raise ValueError("`unless` words need `near` words: a name without `near` names its entity everywhere")
        return self


class NameScanRecord(Record):
    """How finding names are found: ``max_skipped`` modifier words may stand inside one."""

    kind: Literal["name_scan"] = "name_scan"
    max_skipped: int = Field(ge=0, le=6)


class NameRestRecord(Record):
    """After a negating prefix, the rest of a name names the finding ("non-tension pneumothorax")."""

    kind: Literal["name_rest"] = "name_rest"


class PhraseListRecord(Record):
    """Words that may stand inside a name (``modifiers``), or phrases that name no finding."""

    kind: Literal["modifiers", "not_findings"]
    phrases: list[str]


class SpellingRecord(Record):
    """How a slip in a long finding-name word is read (:mod:`cxreval.extract.rules.spelling`):
    words of ``min_length`` letters or more; ``phrases``: real words that are no slip."""

    kind: Literal["spelling"] = "spelling"
    min_length: int = Field(ge=6, le=20)
    phrases: list[str] = []


class SiteRecord(Record):
    """A site or character near a finding that makes it another entity (:class:`SiteRule`)."""

    kind: Literal["site"] = "site"
    entity: str
    to: str
    words: list[str] = Field(min_length=1)
    unless: list[str] = []
    reach: Literal["clause", "sentence"] = "clause"


class NormalRecord(Record):
    """A sentence pattern that implies the absence of ``entities`` ("no acute cardiopulmonary process")."""

    kind: Literal["normal"] = "normal"
    name: str = ""
    pattern: str
    entities: list[str] = []
    requires: list[str] = []


class StepRecord(Record):
    """A status step: its place in the order, and the reach of the two scope steps."""

    kind: Literal["step"] = "step"
    order: int
    max_tokens: int | None = Field(None, ge=1, le=64)
    max_entity_hops: int | None = Field(None, ge=0, le=64)
    predicate_tokens: int | None = Field(None, ge=1, le=64)


class WindowRecord(Record):
    """An attribute rule, and the windows (tokens back and forward) some of them read in."""

    kind: Literal["window"] = "window"
    back: int | None = Field(None, ge=0, le=64)
    forward: int | None = Field(None, ge=0, le=64)


class DerivedRecord(Record):
    """A reading one entity's attributes imply of another (``to``): a device whose tip lies at a
    landmark its ontology position calls malpositioned is a malpositioned device."""

    kind: Literal["derived"] = "derived"
    to: str


RECORD_KINDS: dict[str, type[Record]] = {
    "cue": CueRecord,
    "name": NameRecord,
    "name_scan": NameScanRecord,
    "name_rest": NameRestRecord,
    "modifiers": PhraseListRecord,
    "not_findings": PhraseListRecord,
    "site": SiteRecord,
    "normal": NormalRecord,
    "step": StepRecord,
    "window": WindowRecord,
    "spelling": SpellingRecord,
    "derived": DerivedRecord,
}
#: The numbers each step or window reads (any other record of those kinds takes none): a number
#: given where nothing reads it is an error, not a silent no-op.
NUMBERS: dict[str, frozenset[str]] = {
    "scope.backward": frozenset({"max_tokens", "max_entity_hops"}),
    "scope.forward": frozenset({"max_tokens", "predicate_tokens"}),
    "attribute.window": frozenset({"back", "forward"}),
    "attribute.change": frozenset({"back", "forward"}),
    "attribute.site_window": frozenset({"back", "forward"}),
    "attribute.tip": frozenset({"back", "forward"}),
    "attribute.size": frozenset({"forward"}),
}
#: The step that is what no step deciding means: it has no place to move to and cannot be off.
STATED = "finding.stated"
#: Records a user file may turn off (``enabled: false``); windows and name rules only change numbers.
_SWITCHABLE = (CueRecord, NameRecord, PhraseListRecord, SiteRecord, NormalRecord, StepRecord, SpellingRecord, DerivedRecord)
#: Kinds a user file may add (the others need code: only packaged ones can be changed).
USER_KINDS = ("name", "cue", "site", "normal")


@dataclass(frozen=True)
class NormalStatement:
    """A sentence pattern that implies the absence of a list of entities."""

    pattern: re.Pattern[str]
    entities: tuple[str, ...]
    #: Words one of which every match contains (lower case); a section holding none of them is
    #: not searched (a fast substring test instead of a regex scan). Empty: always searched.
    requires: tuple[str, ...] = ()
    #: No match can hold a full stop or look past one (:func:`within_full_stops`): with
    #: ``requires``, only the pieces of a section between full stops that hold a word are searched.
    local: bool = False
    id: str = ""


@dataclass(frozen=True)
class SiteRule:
    """A finding whose site (or character), named in its clause, makes it another entity.

    The ontology splits some findings by site: bare "degenerative changes" is the spine's by
    convention, but "degenerative changes of the right shoulder" is degenerative joint disease.
    ``words`` name the other site; ``unless`` words in the same window keep the entity.
    """

    to: str
    #: Each a token or two tokens joined by a space: "T12" is read as the tokens "t" "12", so it is
    #: kept as "t 12" and looked for as adjacent tokens (never as a bare "12" or "t").
    words: frozenset[str]
    unless: frozenset[str] = frozenset()
    #: The mention's clause (a few words either side, stopping at another finding) or its sentence.
    reach: str = "clause"
    id: str = ""

    @cached_property
    def pairs(self) -> bool:
        """Whether a word of the rule is two tokens (then adjacent pairs of tokens are read too)."""
        return any(" " in w for w in self.words | self.unless)


@dataclass
class RuleSet:
    """Every rule record, ready for the engine: one phrase trie for cues and attribute words, the
    name rules, the normal statements, the word lists and the ordered status steps."""

    version: str
    cues: PhraseTrie[dict[str, Any]]
    lexicon: Lexicon
    normal_statements: list[NormalStatement] = field(default_factory=list)
    modifiers: frozenset[str] = frozenset()
    #: Entity -> the site rules that may move its mentions to another entity.
    sites: dict[str, tuple[SiteRule, ...]] = field(default_factory=dict)
    #: Names holding a finding's word that name no finding ("thoracic cavity").
    not_findings: tuple[tuple[str, ...], ...] = ()
    #: A user's finding names: tokens -> (entity, rule id).
    names: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)
    #: Name rule id -> where its words name the entity (a name record with ``near`` words): the
    #: rule's ``to`` is the entity, ``words`` the ``near`` words.
    name_conditions: dict[str, SiteRule] = field(default_factory=dict)
    #: (cue category, phrase) -> the id of the record that holds it.
    cue_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The enabled status steps, in order.
    steps: tuple[str, ...] = STEP_IDS
    #: Every record by id (the packaged ones, then the user's), those turned off included (``enabled``).
    records: dict[str, Record] = field(default_factory=dict)
    #: Slips in long finding-name words (``finding.spelling``): (min length, words that are no
    #: slip), or None when the rule is off.
    spelling: tuple[int, frozenset[str]] | None = None

    def param(self, rule_id: str, name: str) -> int:
        """A number of a step or window record (``scope.backward``'s ``max_tokens``)."""
        value = getattr(self.records[rule_id], name)
        if value is None:
            raise RulesError(f"rule {rule_id} has no {name}")
        return int(value)

    def digest(self) -> str:
        """A hash of everything in the rules that can change a reading (every record but its doc
        and example, and the word lists): the test that pins it per version catches an edit to the
        packaged data that forgot to bump the version in the signature."""
        records = {rid: r.model_dump(mode="json", exclude={"doc", "example"}) for rid, r in sorted(self.records.items())}
        words = {name: sorted(getattr(self.lexicon, name)) for name in Lexicon.names()}
        text = json.dumps({"records": records, "words": words}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def doc(self, rule_id: str) -> str:
        """The one-line doc of a rule (empty for an unknown id)."""
        record = self.records.get(rule_id)
        return record.doc if record else ""


# -- the files -----------------------------------------------------------------------------------


@dataclass
class _Source:
    """Records as read from one file: raw mappings, each with the line it starts on."""

    name: str
    records: list[tuple[dict[str, Any], int]]


def _packaged_text(name: str) -> str:
    return (resources.files("cxreval.extract.rules") / "data" / name).read_text(encoding="utf-8")


def _lines_of(root: yaml.Node | None, key: str) -> list[int]:
    """The line (1-based) on which each item of the top-level sequence (or mapping) ``key`` starts."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for k, v in root.value:
        if k.value == key and isinstance(v, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in v.value]
        if k.value == key and isinstance(v, yaml.MappingNode):
            return [name.start_mark.line + 1 for name, _ in v.value]
    return []


def _unique_keys(root: yaml.Node | None, source: str) -> None:
    """A key given twice at the top level (YAML keeps the last silently) is an error."""
    seen: dict[str, int] = {}
    for k, _ in root.value if isinstance(root, yaml.MappingNode) else ():
        line = k.start_mark.line + 1
        if k.value in seen:
            raise RulesError(
                f"{source}:{line}: `{k.value}` is given twice (first on line {seen[k.value]}); YAML would keep only the last"
            )
        seen[k.value] = line


def _items(
    data: dict[str, Any], root: yaml.Node | None, key: str, source: str, kind: str | None
) -> list[tuple[dict[str, Any], int]]:
    """The records of the top-level list ``key``, each with its line (``kind`` given where unset)."""
    items = data.get(key) or []
    if not isinstance(items, list):
        raise RulesError(f"{source}: `{key}` must be a list of records")
    lines = _lines_of(root, key)
    out = []
    for i, item in enumerate(items):
        line = lines[i] if i < len(lines) else 0
        if not isinstance(item, dict):
            raise RulesError(f"{source}:{line}: a record must be a mapping with an id")
        if kind is not None:
            item = {"kind": kind, **item} if "kind" not in item else item
        out.append((item, line))
    return out


def _packaged() -> tuple[list[_Source], dict[str, Any], dict[str, str]]:
    """The packaged records, word lists and data versions."""
    (cues, cues_node), (names, names_node) = parse(_packaged_text("cues.yaml")), parse(_packaged_text("names.yaml"))
    (steps, steps_node), (normals, normals_node) = (
        parse(_packaged_text("steps.yaml")),
        parse(_packaged_text("normal_statements.yaml")),
    )
    sources = [
        _Source("cxreval:cues.yaml", _items(cues, cues_node, "cues", "cxreval:cues.yaml", "cue")),
        _Source(
            "cxreval:names.yaml",
            _items(names, names_node, "names", "cxreval:names.yaml", None)
            + _items(names, names_node, "sites", "cxreval:names.yaml", "site"),
        ),
        _Source(
            "cxreval:steps.yaml",
            _items(steps, steps_node, "steps", "cxreval:steps.yaml", "step")
            + _items(steps, steps_node, "attributes", "cxreval:steps.yaml", "window"),
        ),
        _Source(
            "cxreval:normal_statements.yaml",
            _items(normals, normals_node, "statements", "cxreval:normal_statements.yaml", "normal"),
        ),
    ]
    lexicon_data = safe_load(_packaged_text("lexicon.yaml"))
    # One version for the rule data (the signature's `c`): every file but the normal statements
    # (`n`) carries it, so an edit to any of them is a new `cN` (tests/test_rule_records.py pins it).
    data_versions = {
        name: str(d.get("version"))
        for name, d in (("cues.yaml", cues), ("names.yaml", names), ("steps.yaml", steps), ("lexicon.yaml", lexicon_data))
    }
    if len(set(data_versions.values())) != 1:
        raise RulesError(f"cxreval's rule data disagree on their version: {data_versions}")
    versions = {
        "c": data_versions["cues.yaml"],
        "n": str(normals.get("version", "0")),
        "ontology": str(normals.get("ontology") or ""),
    }
    return sources, lexicon_data["words"], versions


def _validate(raw: dict[str, Any], where: str) -> Record:
    """A raw record as the model of its kind; a problem names ``where`` (file and line)."""
    kind = raw.get("kind")
    model = RECORD_KINDS.get(str(kind))
    if model is None:
        raise RulesError(
            f"{where}: record {raw.get('id')!r} has kind {kind!r}; a new record needs one of {', '.join(USER_KINDS)}"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}"
            + (
                " (quote it in YAML: a bare no, yes, on or off is read as true or false)"
                if isinstance(e.get("input"), bool)
                else ""
            )
            for e in exc.errors()
        )
        raise RulesError(f"{where}: record {raw.get('id')!r}: {problems}") from exc


def _check_switch_and_numbers(record: Record, where: str) -> None:
    """A record turned off must be one that can be, and a number must be one the record reads."""
    if not record.enabled and (not isinstance(record, _SWITCHABLE) or record.id == STATED):
        raise RulesError(
            f"{where}: rule {record.id!r} cannot be turned off" + ("" if record.id == STATED else "; change its numbers instead")
        )
    if isinstance(record, (StepRecord, WindowRecord)):
        given = {
            name
            for name in ("max_tokens", "max_entity_hops", "predicate_tokens", "back", "forward")
            if getattr(record, name, None) is not None
        }
        unread = sorted(given - NUMBERS.get(record.id, frozenset()))
        if unread:
            takes = ", ".join(sorted(NUMBERS.get(record.id, ()))) or "no numbers"
            raise RulesError(f"{where}: rule {record.id!r} reads no {', '.join(unread)} (it takes {takes})")


def _merge_user(records: dict[str, tuple[dict[str, Any], str]], user: _Source) -> None:
    """Apply a user's records to ``records`` (id -> (raw record, where it was read)): a record with
    a new id adds a rule, one with a packaged id and no ``kind`` changes that rule."""
    seen: dict[str, str] = {}
    for raw, line in user.records:
        where = f"{user.name}:{line}"
        rid = raw.get("id")
        if not isinstance(rid, str):
            raise RulesError(f"{where}: a record needs an id")
        if rid in seen:
            raise RulesError(f"{where}: rule id {rid!r} is given twice in this file (first at {seen[rid]})")
        seen[rid] = where
        if rid in records and "kind" in raw:
            raise RulesError(
                f"{where}: {rid!r} is a packaged rule: to change it leave out `kind` (e.g. "
                f"`add_phrases: [...]`); to add a rule of your own give it a new id"
            )
        if rid in records:
            records[rid] = (_override(records[rid][0], raw, where), where)
            continue
        if raw.get("kind") not in USER_KINDS:
            raise RulesError(
                f"{where}: unknown rule id {rid!r}; to add a rule give `kind:` "
                f"({', '.join(USER_KINDS)}); to change one, use an id from `cxreval rules list`"
            )
        records[rid] = (raw, where)


def _override(base: dict[str, Any], change: dict[str, Any], where: str) -> dict[str, Any]:
    """A packaged record with a user's fields; ``add_phrases`` / ``remove_phrases`` edit its list."""
    merged = {**base, **{k: v for k, v in change.items() if k not in ("add_phrases", "remove_phrases")}}
    if change.get("kind", base.get("kind")) != base.get("kind"):
        raise RulesError(f"{where}: rule {base['id']!r} is a {base.get('kind')} rule; its kind cannot change")
    for key, add in (("add_phrases", True), ("remove_phrases", False)):
        if key not in change:
            continue
        if "phrases" not in base:
            raise RulesError(f"{where}: rule {base['id']!r} has no phrases to edit")
        words = change[key]
        if not isinstance(words, list):
            raise RulesError(f"{where}: {key} must be a list of phrases")
        wanted = {_phrase(w, base["id"], where) for w in words}  # as the engine reads them: case, spacing
        if add:
            merged["phrases"] = [*merged["phrases"], *words]
            continue
        have = {_phrase(p, base["id"], where) for p in merged["phrases"]}
        missing = [w for w in words if _phrase(w, base["id"], where) not in have]
        if missing:
            raise RulesError(f"{where}: rule {base['id']!r} has no phrases {missing} to remove")
        merged["phrases"] = [p for p in merged["phrases"] if _phrase(p, base["id"], where) not in wanted]
    return merged


def _user_source(path: Path) -> tuple[_Source, dict[str, tuple[Any, str]], str]:
    """A user's rule file: its records, its word-list edits and its hash."""
    try:
        raw = path.read_bytes()
        data, root = parse(raw.decode("utf-8"))
        data = data or {}
    except OSError as exc:
        raise RulesError(f"{path}: cannot read the rule file: {exc}") from exc
    except (UnicodeDecodeError, YAMLError) as exc:
        raise RulesError(f"{path}: not a YAML rule file: {exc}") from exc
    if not isinstance(data, dict):
        raise RulesError(f"{path}: a rule file is a mapping with `rules:` and/or `lexicon:`")
    _unique_keys(root, str(path))
    old = sorted(set(data) & {*CUE_CATEGORIES, "site_entities", "modifiers", "not_findings"})
    if old:
        raise RulesError(
            f"{path}: this is a cue file of cxreval < 0.3 (top-level {', '.join(old)}); since 0.3 a "
            "rule file lists records under `rules:` (docs/engine.md, 'Adding a rule')"
        )
    unknown = sorted(set(data) - {"rules", "lexicon", "version"})
    if unknown:
        raise RulesError(f"{path}: unknown top-level keys {unknown}; use `rules:` and `lexicon:`")
    lexicon = data.get("lexicon") or {}
    if not isinstance(lexicon, dict):
        raise RulesError(f"{path}: `lexicon:` maps a word list's name to {{add: [...], remove: [...]}}")
    lines = dict(zip(lexicon, _lines_of(root, "lexicon")))
    edits = {name: (edit, f"{path}:{lines.get(name, 0)}") for name, edit in lexicon.items()}
    return _Source(str(path), _items(data, root, "rules", str(path), None)), edits, hashlib.sha256(raw).hexdigest()[:12]


def _edit_lexicon(words: dict[str, Any], edits: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """The packaged word lists with a user's ``add`` / ``remove`` edits (``edits``: list name ->
    (its edit, where it was read)). Every word is one token, compared as the engine reads it."""
    out = {name: dict(spec) for name, spec in words.items()}
    for name, (edit, where) in edits.items():
        if name not in out:
            raise RulesError(f"{where}: unknown word list {name!r}; the lists are {', '.join(Lexicon.names())}")
        if not isinstance(edit, dict) or set(edit) - {"add", "remove"}:
            raise RulesError(f"{where}: lexicon.{name} takes `add:` and `remove:` lists")
        add, remove = _words(edit.get("add"), name, where), _words(edit.get("remove"), name, where)
        current = [w.lower() for w in out[name]["words"]]
        missing = [w for w in remove if w not in current]
        if missing:
            raise RulesError(f"{where}: word list {name!r} has no words {missing} to remove")
        current.extend(w for w in add if w not in current)
        out[name]["words"] = [w for w in current if w not in remove]
    return out


def _words(items: object, name: str, where: str) -> list[str]:
    """A user's list of words for word list ``name``, each one token as the engine reads it."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise RulesError(f"{where}: lexicon.{name}: `add` and `remove` take a list of words, e.g. [confirmed]")
    out = []
    for word in items:
        tokens = _phrase(word, f"lexicon.{name}", where)
        if len(tokens) != 1:
            raise RulesError(f"{where}: lexicon.{name}: {word!r} is {len(tokens)} words; a word list holds single words")
        out.append(tokens[0])
    return out


# -- building the rule set -----------------------------------------------------------------------

#: The cue key of the side and zones a landmark's own words give a finding that is no device.
LANDMARK_PLACES = "landmark_places"


def _place_landmarks(merged: dict[tuple[str, ...], dict[str, Any]], vocab: Any) -> None:
    """Give each landmark phrase the sides and zones its words hold as :data:`LANDMARK_PLACES`
    ("left upper lobe bronchus": left, upper), read where the mention is no device; none for a
    landmark in ``landmarks_without_side`` (a heart chamber's "right" names the chamber)."""
    words: PhraseTrie[tuple[str, str]] = PhraseTrie()
    for kind in ("sides", "zones"):
        for phrase, value in getattr(vocab, kind).items():
            toks = tuple(term_tokens(phrase))
            if words.get(toks) is None:
                words.add(toks, (kind, value))
    for toks, kinds in merged.items():
        landmark = kinds.get("landmarks")
        if landmark is None or landmark in vocab.landmarks_without_side:
            continue
        found = [v for _, _, v in words.scan(list(toks))]
        sides = tuple(v for k, v in found if k == "sides")
        zones = tuple(dict.fromkeys(v for k, v in found if k == "zones"))
        if sides or zones:
            kinds[LANDMARK_PLACES] = (sides, zones)


def load_rules(ontology: Ontology, user_rules: str | Path | None = None) -> RuleSet:
    """The packaged rules (and a user's rule file) for ``ontology``: every record validated."""
    sources, words, versions = _packaged()
    raw: dict[str, tuple[dict[str, Any], str]] = {}
    for source in sources:
        for item, line in source.records:
            raw[item["id"]] = (item, f"{source.name}:{line}")
    suffix, user_name = "", None
    if user_rules is not None:
        user, edits, digest = _user_source(Path(user_rules))
        _merge_user(raw, user)
        words = _edit_lexicon(words, edits)
        suffix, user_name = f".u{digest}", user.name
    records = {rid: _validate(item, where) for rid, (item, where) in raw.items()}
    wheres = {rid: where for rid, (_, where) in raw.items()}
    for rid, record in records.items():
        _check_switch_and_numbers(record, wheres[rid])
    try:
        lexicon = lexicon_from_data(words, str(user_rules or "cxreval:lexicon.yaml"))
    except LexiconError as exc:
        raise RulesError(str(exc)) from exc
    # The packaged normal statements name the packaged ontology's entities: with another, none.
    keep_normals = versions["ontology"] in ("", ontology.id)
    vocab = attribute_vocabulary()
    version = f"c{versions['c']}.n{versions['n'] if keep_normals else '0'}.a{vocab.version}{suffix}"
    build = _Builder(ontology, records, wheres, user_name, keep_normals)
    return build.rule_set(version, lexicon)


class _Builder:
    """Turns validated records into a :class:`RuleSet`, checking them against the ontology."""

    def __init__(
        self, ontology: Ontology, records: dict[str, Record], wheres: dict[str, str], user: str | None, keep_normals: bool
    ) -> None:
        self.ontology = ontology
        self.known = set(ontology.entity_ids)
        self.records = records
        self.wheres = wheres
        self.user = user
        self.keep_normals = keep_normals

    def _strict(self, rid: str) -> bool:
        """Whether an unknown entity in this record is an error (the user's records, or the packaged
        ones with the packaged ontology) rather than a reason to drop it (another ontology)."""
        return self.user is not None and self.wheres[rid].startswith(self.user) or self.keep_normals

    def rule_set(self, version: str, lexicon: Lexicon) -> RuleSet:
        for derived in self._of(DerivedRecord):  # "device.malposition" names an entity of the ontology
            self._check_entities(derived, [derived.to])
        cues, cue_ids = self._cues()
        return RuleSet(
            version=version,
            cues=cues,
            lexicon=lexicon,
            normal_statements=self._normals(),
            modifiers=self._modifiers(),
            sites=self._sites(),
            not_findings=tuple(
                _phrase(p, r.id, self.wheres[r.id])
                for r in self._of(PhraseListRecord)
                if r.kind == "not_findings"
                for p in r.phrases
            ),
            names=self._names(),
            name_conditions=self._name_conditions(),
            cue_ids=cue_ids,
            steps=self._steps(),
            records=self.records,
            spelling=self._spelling(),
        )

    def _spelling(self) -> tuple[int, frozenset[str]] | None:
        """The spelling rule's length and its words that are no slip (None: the rule is off)."""
        records = self._of(SpellingRecord)
        if not records:
            return None
        r = records[0]
        return r.min_length, frozenset(w for p in r.phrases for w in _phrase(p, r.id, self.wheres[r.id]))

    def _of(self, model: type[Record]) -> list[Any]:
        """The records of one kind that are on (every step: :meth:`_steps` reads ``enabled``)."""
        return [r for r in self.records.values() if type(r) is model and (r.enabled or model is StepRecord)]

    def _cues(self) -> tuple[PhraseTrie[dict[str, Any]], dict[tuple[str, str], str]]:
        """One trie of every cue phrase and attribute word (phrase -> category -> value), and the
        record id of each (category, phrase)."""
        merged: dict[tuple[str, ...], dict[str, Any]] = {}
        ids: dict[tuple[str, str], str] = {}
        for record in self._of(CueRecord):
            value: Any = True
            if record.category in GRADED:
                value = record.grade or "possible"
            elif record.grade is not None:
                raise RulesError(
                    f"{self.wheres[record.id]}: rule {record.id!r}: only hedges "
                    f"({', '.join(GRADED)}) have a grade, one of {', '.join(HEDGE_GRADES)}"
                )
            for phrase in record.phrases:
                toks = _phrase(phrase, record.id, self.wheres[record.id])
                merged.setdefault(toks, {})[record.category] = value
                ids[(record.category, " ".join(toks))] = record.id
        vocab = attribute_vocabulary()
        for kind in VOCAB_KINDS:
            for phrase, value in getattr(vocab, kind).items():
                merged.setdefault(_phrase(phrase, kind, "cxreval:attributes.yaml"), {})[kind] = value
        _place_landmarks(merged, vocab)
        trie: PhraseTrie[dict[str, Any]] = PhraseTrie()
        for toks, kinds in merged.items():
            trie.add(toks, kinds)
        return trie, ids

    def _modifiers(self) -> frozenset[str]:
        """Words that may stand inside a name: the modifier records' plus every one-word side,
        zone and severity term ("calcified right hilar lymph nodes")."""
        words = {
            t
            for r in self._of(PhraseListRecord)
            if r.kind == "modifiers"
            for p in r.phrases
            for t in _phrase(p, r.id, self.wheres[r.id])
        }
        vocab = attribute_vocabulary()
        for kind in ("sides", "zones", "severity"):
            words.update(t for phrase in getattr(vocab, kind) for t in term_tokens(phrase))
        return frozenset(words)

    def _check_entities(self, record: Record, entities: list[str]) -> bool:
        """Whether every entity is known; an unknown one raises for a strict record."""
        missing = [e for e in entities if e not in self.known]
        if missing and self._strict(record.id):
            raise RulesError(
                f"{self.wheres[record.id]}: rule {record.id!r} names entities not in ontology "
                f"{self.ontology.signature}: {missing}"
            )
        return not missing

    def _sites(self) -> dict[str, tuple[SiteRule, ...]]:
        out: dict[str, list[SiteRule]] = {}
        for r in self._of(SiteRecord):
            if not self._check_entities(r, [r.entity, r.to]):
                continue
            where = self.wheres[r.id]
            out.setdefault(r.entity, []).append(
                SiteRule(
                    r.to,
                    frozenset(_site_word(w, r.id, where) for w in r.words),
                    frozenset(_site_word(w, r.id, where) for w in r.unless),
                    r.reach,
                    r.id,
                )
            )
        return {e: tuple(rules) for e, rules in out.items()}

    def _names(self) -> dict[tuple[str, ...], tuple[str, str]]:
        out: dict[tuple[str, ...], tuple[str, str]] = {}
        for r in self._of(NameRecord):
            self._check_entities(r, [r.entity])
            for phrase in r.phrases:
                out[_phrase(phrase, r.id, self.wheres[r.id])] = (r.entity, r.id)
        return out

    def _name_conditions(self) -> dict[str, SiteRule]:
        out = {}
        for r in self._of(NameRecord):
            if r.near:
                where = self.wheres[r.id]
                out[r.id] = SiteRule(
                    r.entity,
                    frozenset(_site_word(w, r.id, where) for w in r.near),
                    frozenset(_site_word(w, r.id, where) for w in r.unless),
                    r.reach,
                    r.id,
                )
        return out

    def _normals(self) -> list[NormalStatement]:
        out = []
        for r in self._of(NormalRecord):
            where = self.wheres[r.id]
            if not self.keep_normals and not (self.user and where.startswith(self.user)):
                continue
            self._check_entities(r, r.entities)
            try:
                pattern = re.compile(r.pattern, re.IGNORECASE)
            except re.error as exc:
                raise RulesError(f"{where}: rule {r.id!r} has a bad pattern: {exc}") from exc
            requires = tuple(w.lower() for w in r.requires)
            local = within_full_stops(pattern) and not any("." in w for w in requires)
            out.append(NormalStatement(pattern, tuple(r.entities), requires, local, r.id))
        return out

    def _steps(self) -> tuple[str, ...]:
        """The enabled status steps by ``order``; two with one order conflict, and
        ``finding.stated`` (what none deciding means) stays last."""
        steps = sorted((r for r in self._of(StepRecord) if r.enabled), key=lambda r: r.order)
        if steps and steps[-1].id != STATED:
            stated: StepRecord = self.records[STATED]  # type: ignore[assignment]
            raise RulesError(
                f"{self.wheres[steps[-1].id]}: step {steps[-1].id!r} (order {steps[-1].order}) would "
                f"come after {STATED!r} (order {stated.order}), which is what no step deciding means"
            )
        for a, b in itertools.pairwise(steps):
            if a.order == b.order:
                late = b if self.user and self.wheres[b.id].startswith(self.user) else a
                raise RulesError(
                    f"{self.wheres[late.id]}: conflicting order: steps {a.id!r} and {b.id!r} both have order {a.order}"
                )
        unknown = [r.id for r in self._of(StepRecord) if r.id not in STEP_IDS]
        if unknown:
            raise RulesError(f"{self.wheres[unknown[0]]}: unknown step {unknown[0]!r}: a step needs code of its own")
        return tuple(r.id for r in steps)


def _phrase(phrase: object, rule_id: str, where: str) -> tuple[str, ...]:
    # YAML reads a bare `no` as False: insist on text so a rule is never silently lost.
    if not isinstance(phrase, str) or not term_tokens(phrase):
        raise RulesError(f"{where}: rule {rule_id!r}: phrase {phrase!r} is not text (quote it in YAML)")
    return term_tokens(phrase)


def _site_word(word: object, rule_id: str, where: str) -> str:
    tokens = _phrase(word, rule_id, where)
    if len(tokens) > 2:
        raise RulesError(f"{where}: rule {rule_id!r}: site word {word!r} is more than two tokens")
    return " ".join(tokens)
