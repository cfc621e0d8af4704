"""Pydantic models of the entity ontology.

The ontology is data: every entity the engines can report, how it is grouped for plots, the
words that name it, which attributes are judged for it and how it maps onto other label sets.
These models are the contract between the YAML files and the rest of cxreval.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cxreval.literals import HedgeGrade

Attribute = Literal["location", "severity", "comparison"]
EntityKind = Literal["finding", "differential"]

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def normalize_term(term: str) -> str:
    """Canonical form used to compare synonyms: lower case, hyphens as spaces, single spaces."""
    term = term.lower().replace("-", " ").replace("/", " ")
    return " ".join(term.split())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Category(_Strict):
    """A key anatomical category (or exam quality / differential diagnoses)."""

    id: str
    name: str


class Group(_Strict):
    """One of the ~15 plot groups (SPEC-CXR figure 4); each belongs to a category."""

    id: str
    name: str
    category: str


class LabelSet(_Strict):
    """An external label set the ontology maps onto (CheXpert-14, Ran-21, ChestX-ray14, MeSH).

    ``kind: labels`` mapping targets must be listed labels. ``kind: mesh`` targets are
    ``Heading[/qualifier...]`` patterns whose heading must be listed.
    """

    name: str
    kind: Literal["labels", "mesh"] = "labels"
    description: str = ""
    labels: list[str]
    #: Where the label definitions come from (paper, labeler), shown in the docs.
    source: str = ""
    #: Labels defined by their words (ChestX-ray14: "Infiltration" is the word family
    #: infiltrate / infiltration, not every airspace process): label -> regular expressions,
    #: matched case-insensitively against the words of a mention (its matched span, else its
    #: sentence). A mention of a mapped entity counts for such a label only when one matches.
    terms: dict[str, list[str]] = Field(default_factory=dict)
    #: Words the label set's authors give to a label beyond the entities mapped onto it: label ->
    #: entity id -> regular expressions (case-insensitive, against a mention's words as for
    #: ``terms``). A mention of that entity also counts for the label when one matches. For a
    #: synonym whose owner as a whole is not the label: CheXpert's phrase lists make "lump" a Lung
    #: Lesion mention, but ``soft_tissue_mass``, which owns "lump", is not a lung lesion.
    word_mappings: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    #: What a hedged (uncertain) mention gives: ``uncertain`` (-1, CheXpert's "u" label; the
    #: scorer's ``uncertain`` policy then decides) or ``negative`` (0: a label set that, by its
    #: definition, rules hedged mentions out, as ChestX-ray14 does).
    hedged: Literal["uncertain", "negative"] = "uncertain"
    #: Hedge grades the label set's own labeler reads as findings, because its uncertainty
    #: patterns do not name them: NegBio (ChestX-ray14) has no pattern for "or" / "versus", so
    #: "atelectasis or scarring" is an Atelectasis. A projection affirms these grades under every
    #: certainty policy; the policy can only add grades to them.
    affirms: list[HedgeGrade] = Field(default_factory=list)

    @field_validator("terms")
    @classmethod
    def _terms_compile(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for label, patterns in value.items():
            _check_patterns(f"terms of {label!r}", patterns)
        return value

    @field_validator("word_mappings")
    @classmethod
    def _word_mappings_compile(cls, value: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
        for label, by_entity in value.items():
            for entity, patterns in by_entity.items():
                _check_patterns(f"word_mappings of {label!r} / {entity!r}", patterns)
        return value

    def term_pattern(self, label: str) -> re.Pattern[str] | None:
        """The compiled definition of ``label`` (None: every mention of a mapped entity counts)."""
        patterns = self.terms.get(label)
        return _term_regex(tuple(patterns)) if patterns else None

    def word_mapping_patterns(self, label: str) -> dict[str, re.Pattern[str]]:
        """Entity id -> compiled words by which that entity's mentions also count for ``label``."""
        return {entity: _term_regex(tuple(patterns)) for entity, patterns in self.word_mappings.get(label, {}).items()}

    @property
    def by_words(self) -> bool:
        """Whether some label is read from a mention's words (``terms`` or ``word_mappings``)."""
        return bool(self.terms or self.word_mappings)


def _check_patterns(where: str, patterns: list[str]) -> None:
    """Stop at the first pattern that is not a regular expression, naming where it is."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}: {pattern!r} is not a regular expression: {exc}") from None


@lru_cache(maxsize=256)
def _term_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One case-insensitive regex of a label's term patterns, compiled once (projection calls it
    for every report)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.I)


class ParentLink(_Strict):
    """One is-a link of an entity: every instance of the entity is an instance of ``id``, as a
    radiologist reads a chest X-ray, anchored in the source ``source`` (a key of the ontology's
    ``hierarchy_sources``)."""

    id: str
    source: str


class NearSynonymClass(_Strict):
    """Entities radiologists use interchangeably at one place ("airspace disease" and "airspace
    opacity"): two members of one class named at the same place are one finding. A class is judged
    as one node of the is-a hierarchy (docs/engine.md, "The finding hierarchy")."""

    id: str
    members: list[str]
    source: str
    note: str = ""


class MatchedPair(_Strict):
    """Two entities that name one finding at one place, outside the hierarchy's nodes.

    ``synonym``: a radiologist accepts either word for the finding ("airspace disease" for a
    consolidation), but the relation is not a class: it does not carry over to the other entities
    either one is near-synonym with. ``size``: one lesion named by its size class (a nodule is up to
    3 cm, a mass larger, Fleischner), so naming the other is a wrong size, an attribute error, not a
    miss and a false finding.
    """

    members: tuple[str, str]
    how: Literal["synonym", "size"]
    source: str
    note: str = ""


class Entity(_Strict):
    """One radiological finding or differential diagnosis."""

    id: str
    name: str
    kind: EntityKind
    category: str
    group: str
    description: str = ""
    synonyms: list[str] = Field(default_factory=list)
    attributes: list[Attribute] = Field(default_factory=list)
    critical: bool = False
    mappings: dict[str, list[str]] = Field(default_factory=dict)
    #: Is-a parents, nearest first as listed. A file that declares ``hierarchy_sources`` gives every
    #: entity this key (``[]`` for none: "considered, no parent"); in a file without a hierarchy an
    #: absent key reads as ``[]``. Whether the key was given is ``"parents" in model_fields_set``.
    parents: list[ParentLink] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id_is_snake_case(cls, value: str) -> str:
        if not _ID_RE.match(value):
            raise ValueError(f"entity id {value!r} must be snake_case ascii")
        return value

    @property
    def terms(self) -> list[str]:
        """The name and all synonyms, normalised and de-duplicated, in declaration order."""
        seen: dict[str, None] = {}
        for term in [self.name, *self.synonyms]:
            seen.setdefault(normalize_term(term), None)
        return list(seen)


class TipDistance(_Strict):
    """A tip reported as a distance from a landmark ("5 cm above the carina"). ``above``: the
    landmark a tip above it lies at ("above the carina": in the trachea); ``expected_mm``: the range
    of distances, in millimetres above the landmark, where the tip is expected (None: no range is
    standard, and a distance above says only ``above``)."""

    landmark: str
    above: str
    #: The landmark a tip below this one lies at ("below the carina": in a bronchus).
    beyond: str | None = None
    expected_mm: tuple[float, float] | None = None


class DevicePosition(_Strict):
    """Where one device's tip belongs, from standard radiology practice (``source``).

    ``landmarks``: where its tip can be reported; ``expected``: those where it belongs;
    ``malpositioned``: those where it is malpositioned (a tip there implies ``malpositioned_device``).
    A landmark in neither list (a central line in the right atrium) is no malposition, but another
    landmark than the other report's is still a location error on the device. ``distance``: the
    landmark a tip is measured from and the expected range of that distance.
    """

    device: str
    landmarks: list[str]
    expected: list[str]
    malpositioned: list[str] = Field(default_factory=list)
    distance: TipDistance | None = None
    source: str
    note: str = ""

    def place(self, tip: str | None, tip_mm: float | None) -> str | None:
        """The place a tip reading names: its landmark, or for a distance from the measured landmark
        the band of the expected range it falls in (``carina:below`` / ``carina:expected`` /
        ``carina:above``: the tip is low, well placed or high; without a range, ``above``);
        ``expected_position`` for words that only say the tip is where it belongs."""
        if tip is None:
            return None
        measured = self.distance
        if measured is None or tip != measured.landmark:
            return tip
        if tip_mm is None:
            tip_mm = 0.0  # "at the carina"
        if measured.expected_mm is None:
            return measured.above if tip_mm > 0 else tip
        low, high = measured.expected_mm
        band = "below" if tip_mm < low else "above" if tip_mm > high else "expected"
        return f"{tip}:{band}"

    def is_expected(self, place: str) -> bool:
        """Whether a :meth:`place` is where this device's tip belongs."""
        return place == "expected_position" or place in self.expected or place.endswith(":expected")


class SizeThreshold(_Strict):
    """Sizes (largest dimension, millimetres) at which the field names a finding differently: two
    sizes on either side of one are a size error whatever their ratio (a nodule is up to 30 mm)."""

    entity: str
    mm: list[float]
    source: str
    note: str = ""


class Ontology(_Strict):
    """A versioned entity set with its hierarchy and label-set mappings."""

    id: str
    version: str
    description: str = ""
    categories: list[Category]
    groups: list[Group]
    labelsets: dict[str, LabelSet] = Field(default_factory=dict)
    precedence: dict[str, str] = Field(
        default_factory=dict,
        description="term -> entity id that wins where two entities claim the same term",
    )
    #: Source id -> one-line citation; every parent link and near-synonym class names one. A file
    #: that declares it declares a hierarchy: then every entity must list its ``parents``.
    hierarchy_sources: dict[str, str] = Field(default_factory=dict)
    near_synonyms: list[NearSynonymClass] = Field(default_factory=list)
    matched_pairs: list[MatchedPair] = Field(default_factory=list)
    #: Where each device's tip belongs (:class:`DevicePosition`), and their sources.
    device_positions: list[DevicePosition] = Field(default_factory=list)
    size_thresholds: list[SizeThreshold] = Field(default_factory=list)
    #: Source id -> one-line citation of each device position and size threshold.
    measure_sources: dict[str, str] = Field(default_factory=dict)
    entities: list[Entity]

    @property
    def signature(self) -> str:
        """``id@version``, the ontology part of every score signature."""
        return f"{self.id}@{self.version}"

    @property
    def entity_ids(self) -> list[str]:
        return [e.id for e in self.entities]

    @cached_property
    def _by_id(self) -> dict[str, Entity]:
        return {e.id: e for e in self.entities}

    def entity(self, entity_id: str) -> Entity:
        try:
            return self._by_id[entity_id]
        except KeyError:
            raise KeyError(f"unknown entity {entity_id!r} in ontology {self.signature}") from None

    def findings(self) -> list[Entity]:
        return [e for e in self.entities if e.kind == "finding"]

    def differentials(self) -> list[Entity]:
        return [e for e in self.entities if e.kind == "differential"]

    # ------------------------------------------------------------------ the is-a hierarchy

    @property
    def has_hierarchy(self) -> bool:
        """Whether the file declares a hierarchy (``hierarchy_sources``), so every entity lists its parents."""
        return bool(self.hierarchy_sources)

    @cached_property
    def _parent_ids(self) -> dict[str, list[str]]:
        return {e.id: [p.id for p in e.parents] for e in self.entities}

    @cached_property
    def _child_ids(self) -> dict[str, list[str]]:
        """Entity id -> its children, in the order the entities are declared."""
        children: dict[str, list[str]] = {e.id: [] for e in self.entities}
        for e in self.entities:
            for p in e.parents:
                if e.id not in children.setdefault(p.id, []):
                    children[p.id].append(e.id)
        return children

    @cached_property
    def _class_of(self) -> dict[str, NearSynonymClass]:
        found: dict[str, NearSynonymClass] = {}
        for c in self.near_synonyms:
            for member in c.members:
                found.setdefault(member, c)
        return found

    def _start(self, entity_id: str, classes: bool) -> list[str]:
        self.entity(entity_id)  # KeyError naming the ontology for an unknown id
        return self.near_synonym_members(entity_id) if classes else [entity_id]

    @cached_property
    def _closures(self) -> dict[tuple[str, bool, bool], tuple[str, ...]]:
        """(entity, classes, upwards) -> its ancestors or descendants, walked once per ontology:
        the judgement rule asks for them on every pair."""
        return {}

    def _closure(self, entity_id: str, classes: bool, upwards: bool) -> list[str]:
        key = (entity_id, classes, upwards)
        found = self._closures.get(key)
        if found is None:
            edges = self._parent_ids if upwards else self._child_ids
            found = self._closures[key] = tuple(_reach(self._start(entity_id, classes), edges))
        return list(found)

    def ancestors(self, entity_id: str, *, classes: bool = False) -> list[str]:
        """Every entity ``entity_id`` is-a, transitively: nearest first (breadth first), ties in the
        order the parents are listed. With ``classes`` the entity's near-synonym class counts as one
        node: the ancestors of all its members, the members themselves left out."""
        return self._closure(entity_id, classes, upwards=True)

    def descendants(self, entity_id: str, *, classes: bool = False) -> list[str]:
        """Every entity that is-a ``entity_id``, transitively: nearest first, ties in declaration
        order. ``classes`` as for :meth:`ancestors`."""
        return self._closure(entity_id, classes, upwards=False)

    def near_synonym_class(self, entity_id: str) -> str | None:
        """The id of the near-synonym class ``entity_id`` belongs to, None when it is in none."""
        self.entity(entity_id)
        found = self._class_of.get(entity_id)
        return found.id if found else None

    @cached_property
    def _pair_how(self) -> dict[tuple[str, str], Literal["synonym", "size"]]:
        return {key: p.how for p in self.matched_pairs for key in (p.members, p.members[::-1])}

    def matched_pair(self, entity_id: str, other_id: str) -> Literal["synonym", "size"] | None:
        """How two entities of a :class:`MatchedPair` name one finding, None when they form none."""
        return self._pair_how.get((entity_id, other_id))

    @cached_property
    def _positions(self) -> dict[str, DevicePosition]:
        return {p.device: p for p in self.device_positions}

    def device_position(self, entity_id: str) -> DevicePosition | None:
        """Where ``entity_id``'s tip belongs, None for an entity that is no device with a tip."""
        return self._positions.get(entity_id)

    @cached_property
    def _thresholds(self) -> dict[str, tuple[float, ...]]:
        return {t.entity: tuple(sorted(t.mm)) for t in self.size_thresholds}

    def size_thresholds_of(self, entity_id: str) -> tuple[float, ...]:
        """The sizes (mm) at which the field names ``entity_id`` differently, ``()`` for none."""
        return self._thresholds.get(entity_id, ())

    def near_synonym_members(self, entity_id: str) -> list[str]:
        """The members of ``entity_id``'s near-synonym class in their listed order (itself
        included); ``[entity_id]`` when it is in none."""
        self.entity(entity_id)
        found = self._class_of.get(entity_id)
        return list(found.members) if found else [entity_id]


def _reach(start: list[str], edges: dict[str, list[str]]) -> list[str]:
    """Ids reachable from ``start`` along ``edges``, breadth first (nearest first), each once, the
    start ids left out; terminates on a cycle (the loader reports those)."""
    seen = set(start)
    found: list[str] = []
    frontier = list(start)
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in edges.get(node, []):
                if nxt not in seen:
                    seen.add(nxt)
                    found.append(nxt)
                    following.append(nxt)
        frontier = following
    return found
