"""Map IU X-ray MeSH codes (``Heading/qualifier/...``) onto ontology entities.

An IU-style MeSH field is a ``;``-separated list of codes such as
``Opacity/lung/base/left/streaky;Cardiomegaly/mild``. The first ``/``-separated part of a
code is its *heading*, the rest are *qualifiers* (anatomy, side, zone, severity, shape).

Entities declare patterns in ``mappings[<labelset>]`` (by default ``mesh``), written as
``Heading[/qualifier...]``. A pattern matches a code when

* the headings are equal after case folding and whitespace collapsing, and
* every qualifier of the pattern is among the code's qualifiers (a subset test).

When several patterns match, the one with the most qualifiers wins. A tie between patterns
of *different* entities is an ontology error: :meth:`MeshMapper.map_code` raises
:class:`AmbiguousMeshCode` and :func:`coverage` counts it under ``ambiguous``.

Side, zone and severity are attributes, not part of the entity: :data:`SIDE_ALIASES`,
:data:`ZONE_ALIASES` and :data:`SEVERITY_SCALE` turn qualifier words (and the common report
words for the same ideas) into a small shared vocabulary that the rule engine reuses.

Coarse zone vocabulary (:data:`ZONES`):

``upper``
    upper lobe, apex / apical
``middle``
    right middle lobe, lingula, mid lung
``lower``
    lower lobe, base / basilar, costophrenic and cardiophrenic angles, posterior sulcus
``hilar``
    hilum, perihilar, infrahilar, suprahilar
``retrocardiac``
    behind the heart on the frontal view
``paratracheal``
    along the trachea (mostly nodes and calcifications)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from cxreval.ontology.attributes import attribute_vocabulary
from cxreval.ontology.models import Ontology

__all__ = [
    "SEVERITY_LEVELS",
    "SEVERITY_SCALE",
    "SIDES",
    "SIDE_ALIASES",
    "ZONES",
    "ZONE_ALIASES",
    "AmbiguousMeshCode",
    "CoverageReport",
    "MeshCode",
    "MeshMapper",
    "MeshMatch",
    "MeshPattern",
    "coverage",
    "is_normal",
    "is_unindexed",
    "normalize_mesh_part",
    "parse_mesh_field",
]

_VOCAB = attribute_vocabulary()

#: Canonical sides, zones and severity buckets, mildest first (from ``data/attributes.yaml``).
SIDES: tuple[str, ...] = tuple(_VOCAB.buckets["sides"])
ZONES: tuple[str, ...] = tuple(_VOCAB.buckets["zones"])
SEVERITY_LEVELS: tuple[str, ...] = tuple(_VOCAB.buckets["severity"])

#: Word (MeSH qualifier or report wording, normalised) -> canonical side / zone / severity.
SIDE_ALIASES: dict[str, str] = dict(_VOCAB.sides)
ZONE_ALIASES: dict[str, str] = dict(_VOCAB.zones)
SEVERITY_SCALE: dict[str, str] = dict(_VOCAB.severity)

_NORMAL_HEADING = "normal"
_UNINDEXED_HEADING = "no indexing"


def normalize_mesh_part(part: str) -> str:
    """Comparison key of a heading or qualifier: case folded, whitespace collapsed."""
    return " ".join(part.split()).casefold()


class MeshCode(BaseModel):
    """One parsed code: ``heading`` and ``qualifiers`` are whitespace-collapsed, case kept."""

    model_config = ConfigDict(frozen=True)

    heading: str
    qualifiers: tuple[str, ...] = ()
    raw: str

    @classmethod
    def parse(cls, code: str) -> MeshCode:
        """Parse one ``Heading/qualifier/...`` code (no ``;``)."""
        parts = [" ".join(p.split()) for p in code.split("/")]
        heading, quals = parts[0], tuple(q for q in parts[1:] if q)
        return cls(heading=heading, qualifiers=quals, raw=" ".join(code.split()))

    @property
    def key(self) -> str:
        """Normalised ``heading/q1/q2`` string: a stable name for counting codes."""
        return "/".join(normalize_mesh_part(p) for p in (self.heading, *self.qualifiers))


def parse_mesh_field(field: str | None) -> list[MeshCode]:
    """Split a MeSH field on ``;`` into parsed codes; empty parts (and None/NaN) are skipped."""
    if not isinstance(field, str):
        return []
    return [MeshCode.parse(c) for c in field.split(";") if c.strip() and c.split("/")[0].strip()]


def is_normal(code: MeshCode) -> bool:
    """True for the ``normal`` code, which marks a normal study (no entity)."""
    return normalize_mesh_part(code.heading) == _NORMAL_HEADING


def is_unindexed(code: MeshCode) -> bool:
    """True for ``No Indexing``, which marks a study that was not coded."""
    return normalize_mesh_part(code.heading) == _UNINDEXED_HEADING


class MeshMatch(BaseModel):
    """A code resolved to an entity, with the attributes read from its qualifiers."""

    model_config = ConfigDict(frozen=True)

    entity_id: str
    code: MeshCode
    pattern: str = Field(description="the winning mapping pattern, as written in the ontology")
    sides: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    severity: str | None = None
    joined: bool = Field(
        False, description="moved to another code's entity as the same finding (cxreval.datasets.iu_xray.join_same_findings)"
    )


class AmbiguousMeshCode(ValueError):
    """Two entities' patterns match a code equally well: the ontology must disambiguate."""


@dataclass(frozen=True)
class MeshPattern:
    """One compiled ``Heading[/qualifier...]`` mapping pattern (normalised) of an entity."""

    entity_id: str
    heading: str
    qualifiers: frozenset[str]
    text: str


def _attributes(code: MeshCode) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    sides: list[str] = []
    zones: list[str] = []
    severity: str | None = None
    for q in code.qualifiers:
        word = normalize_mesh_part(q)
        side = SIDE_ALIASES.get(word)
        if side and side not in sides:
            sides.append(side)
        zone = ZONE_ALIASES.get(word)
        if zone and zone not in zones:
            zones.append(zone)
        level = SEVERITY_SCALE.get(word)
        if level and (severity is None or SEVERITY_LEVELS.index(level) > SEVERITY_LEVELS.index(severity)):
            severity = level
    if "bilateral" in sides:
        sides = ["bilateral"]
    return tuple(sides), tuple(zones), severity


class MeshMapper:
    """Resolve MeSH codes to entity ids using the ontology's ``labelset`` mapping patterns."""

    def __init__(self, ontology: Ontology, labelset: str = "mesh") -> None:
        self.ontology = ontology
        self.labelset = labelset
        self._patterns: dict[str, list[MeshPattern]] = {}
        owners: dict[tuple[str, frozenset[str]], str] = {}
        for entity in ontology.entities:
            for text in entity.mappings.get(labelset, []):
                parts = [normalize_mesh_part(p) for p in text.split("/")]
                heading, quals = parts[0], frozenset(q for q in parts[1:] if q)
                key = (heading, quals)
                previous = owners.setdefault(key, entity.id)
                if previous != entity.id:
                    raise AmbiguousMeshCode(f"MeSH pattern {text!r} is mapped by both {previous!r} and {entity.id!r}")
                self._patterns.setdefault(heading, []).append(MeshPattern(entity.id, heading, quals, text))

    @property
    def headings(self) -> set[str]:
        """Normalised headings that at least one pattern covers."""
        return set(self._patterns)

    def best_patterns(self, code: MeshCode) -> list[MeshPattern]:
        """All matching patterns with the highest qualifier count (empty when none match)."""
        quals = {normalize_mesh_part(q) for q in code.qualifiers}
        found = [p for p in self._patterns.get(normalize_mesh_part(code.heading), []) if p.qualifiers <= quals]
        if not found:
            return []
        top = max(len(p.qualifiers) for p in found)
        return [p for p in found if len(p.qualifiers) == top]

    def resolve(self, code: MeshCode) -> tuple[str, ...]:
        """Entity ids of the most specific matching patterns: () none, 1 id, or >1 on a tie."""
        return tuple(dict.fromkeys(p.entity_id for p in self.best_patterns(code)))

    def map_code(self, code: MeshCode) -> MeshMatch | None:
        """The entity a code maps to, or None. Raises :class:`AmbiguousMeshCode` on a tie."""
        best = self.best_patterns(code)
        if not best:
            return None
        ids = tuple(dict.fromkeys(p.entity_id for p in best))
        if len(ids) > 1:
            listing = ", ".join(f"{p.entity_id} ({p.text})" for p in best)
            raise AmbiguousMeshCode(f"MeSH code {code.raw!r} matches equally: {listing}")
        sides, zones, severity = _attributes(code)
        return MeshMatch(
            entity_id=ids[0],
            code=code,
            pattern=best[0].text,
            sides=sides,
            zones=zones,
            severity=severity,
        )

    def map_field(self, field: str | None) -> tuple[list[MeshMatch], list[MeshCode]]:
        """(matched, unmapped) codes of one field; ``normal`` / ``No Indexing`` are in neither."""
        matched: list[MeshMatch] = []
        unmapped: list[MeshCode] = []
        for code in parse_mesh_field(field):
            if is_normal(code) or is_unindexed(code):
                continue
            match = self.map_code(code)
            if match is None:
                unmapped.append(code)
            else:
                matched.append(match)
        return matched, unmapped


class CoverageReport(BaseModel):
    """Occurrence counts of codes over many fields (``normal`` / ``No Indexing`` set apart)."""

    fields: int = 0
    total: int = Field(0, description="codes that should map: all but normal / No Indexing")
    mapped: int = 0
    normal: int = 0
    unindexed: int = 0
    unmapped: Counter[str] = Field(default_factory=Counter)
    ambiguous: Counter[str] = Field(default_factory=Counter)
    by_entity: Counter[str] = Field(default_factory=Counter)

    @property
    def coverage(self) -> float:
        """Share of ``total`` occurrences that mapped to exactly one entity (1.0 when empty)."""
        return self.mapped / self.total if self.total else 1.0

    def summary(self, top: int = 20) -> str:
        """A short human-readable report with the most frequent unmapped codes."""
        lines = [
            f"fields={self.fields} codes={self.total} mapped={self.mapped} "
            f"coverage={self.coverage:.4f} normal={self.normal} unindexed={self.unindexed} "
            f"ambiguous={sum(self.ambiguous.values())}"
        ]
        lines += [f"  unmapped {n:5d}  {code}" for code, n in self.unmapped.most_common(top)]
        lines += [f"  AMBIGUOUS {n:4d}  {code}" for code, n in self.ambiguous.most_common(top)]
        return "\n".join(lines)


def coverage(mapper: MeshMapper, fields: Iterable[str | None]) -> CoverageReport:
    """Count, by occurrence, how many codes in ``fields`` map to an entity."""
    report = CoverageReport()
    for field in fields:
        report.fields += 1
        for code in parse_mesh_field(field):
            if is_normal(code):
                report.normal += 1
                continue
            if is_unindexed(code):
                report.unindexed += 1
                continue
            report.total += 1
            ids = mapper.resolve(code)
            if len(ids) == 1:
                report.mapped += 1
                report.by_entity[ids[0]] += 1
            elif ids:
                report.ambiguous[code.key] += 1
            else:
                report.unmapped[code.key] += 1
    return report
