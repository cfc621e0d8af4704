"""Load and validate an ontology YAML file (the packaged default or a user's own)."""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from cxreval import yaml_files
from cxreval.ontology.attributes import attribute_vocabulary
from cxreval.ontology.models import Entity, Group, Ontology, normalize_term

DEFAULT_ONTOLOGY = "cxr-entities.yaml"


class OntologyError(ValueError):
    """An ontology file that cannot be used; the message lists every problem found."""


def _problems(onto: Ontology) -> list[str]:
    """Every problem of an ontology the model alone does not catch, in a stable order: categories
    and groups, each entity, label sets, synonyms claimed twice and precedence entries, then the
    is-a hierarchy and the near-synonym classes."""
    cat_ids = [c.id for c in onto.categories]
    groups = {g.id: g for g in onto.groups}
    problems = _group_problems(onto, cat_ids, groups)
    seen_ids: set[str] = set()
    claims: dict[str, list[str]] = defaultdict(list)
    for e in onto.entities:
        problems.extend(_entity_problems(onto, e, cat_ids, groups, seen_ids))
        seen_ids.add(e.id)
        for term in e.terms:
            claims[term].append(e.id)
    problems.extend(_labelset_problems(onto, seen_ids))
    problems.extend(_precedence_problems(onto, claims, seen_ids))
    problems.extend(_hierarchy_problems(onto))
    problems.extend(_near_synonym_problems(onto))
    problems.extend(_matched_pair_problems(onto))
    problems.extend(_measure_problems(onto, seen_ids))
    return problems


def _group_problems(onto: Ontology, cat_ids: list[str], groups: dict[str, Group]) -> list[str]:
    """Category ids defined twice, group ids not unique, groups of unknown categories."""
    problems = [f"category id {dup!r} is defined more than once" for dup in {c for c in cat_ids if cat_ids.count(c) > 1}]
    if len(groups) != len(onto.groups):
        problems.append("group ids are not unique")
    problems.extend(f"group {g.id!r} names unknown category {g.category!r}" for g in onto.groups if g.category not in cat_ids)
    return problems


def _entity_problems(onto: Ontology, e: Entity, cat_ids: list[str], groups: dict[str, Group], seen_ids: set[str]) -> list[str]:
    """One entity's problems: defined twice, its category and group, an empty synonym, its mappings."""
    where = f"entity {e.id!r}"
    problems = []
    if e.id in seen_ids:
        problems.append(f"{where} is defined more than once")
    if e.category not in cat_ids:
        problems.append(f"{where} names unknown category {e.category!r}")
    group = groups.get(e.group)
    if group is None:
        problems.append(f"{where} names unknown group {e.group!r}")
    elif group.category != e.category:
        problems.append(f"{where} is in category {e.category!r} but its group {e.group!r} belongs to {group.category!r}")
    problems.extend(f"{where} has an empty synonym" for term in e.terms if not term)
    for labelset_id, targets in e.mappings.items():
        labelset = onto.labelsets.get(labelset_id)
        if labelset is None:
            problems.append(f"{where} maps to unknown label set {labelset_id!r}")
            continue
        known = set(labelset.labels)
        for target in targets:
            head = target.split("/")[0].strip() if labelset.kind == "mesh" else target
            if head not in known:
                problems.append(f"{where} maps to {target!r}, which is not a label of {labelset_id!r}")
    return problems


def _labelset_problems(onto: Ontology, entity_ids: set[str]) -> list[str]:
    """Label sets' terms and word mappings naming labels they lack, or unknown entities."""
    problems: list[str] = []
    for labelset_id, ls in onto.labelsets.items():
        problems.extend(
            f"label set {labelset_id!r} defines terms for {label!r}, which is not one of its labels"
            for label in ls.terms
            if label not in ls.labels
        )
        for label, by_entity in ls.word_mappings.items():
            if label not in ls.labels:
                problems.append(f"label set {labelset_id!r} maps words onto {label!r}, which is not one of its labels")
            problems.extend(
                f"label set {labelset_id!r} maps words of unknown entity {entity!r} onto {label!r}"
                for entity in by_entity
                if entity not in entity_ids
            )
    return problems


def _precedence_problems(onto: Ontology, claims: dict[str, list[str]], entity_ids: set[str]) -> list[str]:
    """Synonyms two entities claim with no precedence entry (or one naming neither), and
    precedence entries naming unknown entities or written unnormalised."""
    problems = []
    for term, owners in claims.items():
        if len(set(owners)) > 1:
            winner = onto.precedence.get(term)
            if winner is None:
                problems.append(f"synonym {term!r} is claimed by {sorted(set(owners))} and no precedence entry says which wins")
            elif winner not in owners:
                problems.append(f"precedence for {term!r} names {winner!r}, which does not claim it")
    for term, winner in onto.precedence.items():
        if winner not in entity_ids:
            problems.append(f"precedence for {term!r} names unknown entity {winner!r}")
        if normalize_term(term) != term:
            problems.append(f"precedence key {term!r} must be written normalised: {normalize_term(term)!r}")
    return problems


def _hierarchy_problems(onto: Ontology) -> list[str]:
    """Parent links: the ``parents`` key missing where the file declares a hierarchy, unknown parents
    and sources, a parent named twice, a finding under a differential, and cycles."""
    by_id = {e.id: e for e in onto.entities}
    sources = sorted(onto.hierarchy_sources)
    problems = []
    for e in onto.entities:
        where = f"entity {e.id!r}"
        if onto.has_hierarchy and "parents" not in e.model_fields_set:
            problems.append(
                f"{where} has no 'parents' key: a file that declares hierarchy_sources lists every entity's parents ([] for none)"
            )
        named: set[str] = set()
        for link in e.parents:
            parent = by_id.get(link.id)
            if parent is None:
                problems.append(f"{where} names unknown parent {link.id!r}")
            elif e.kind == "finding" and parent.kind == "differential":
                problems.append(
                    f"{where} is a finding but names the differential {link.id!r} as its parent: "
                    "a diagnosis is not a parent of an imaging finding"
                )
            if link.id in named:
                problems.append(f"{where} names parent {link.id!r} more than once")
            named.add(link.id)
            if link.source not in onto.hierarchy_sources:
                problems.append(
                    f"{where} links to {link.id!r} with unknown source {link.source!r} (hierarchy_sources: {sources})"
                )
    problems.extend(_cycle_problems(onto))
    return problems


def _cycle_problems(onto: Ontology) -> list[str]:
    """Each cycle of parent links once, named at its first entity in declaration order."""
    edges = {e.id: [p.id for p in e.parents] for e in onto.entities}
    problems = []
    reported: set[frozenset[str]] = set()
    for e in onto.entities:
        path = _path_back_to(e.id, edges)
        if path and frozenset(path) not in reported:
            reported.add(frozenset(path))
            problems.append(f"entity {e.id!r} is its own ancestor: {' -> '.join([*path, e.id])}")
    return problems


def _path_back_to(start: str, edges: dict[str, list[str]]) -> list[str]:
    """The shortest path ``start -> ... -> x`` whose last step leads back to ``start`` (``[]``: none)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in edges.get(node, []):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return path[::-1]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    return []


def _near_synonym_problems(onto: Ontology) -> list[str]:
    """Near-synonym classes: ids defined twice, unknown sources and members, fewer than two members,
    an entity in two classes, members of two kinds, and classes that are not one node of the hierarchy."""
    kinds = {e.id: e.kind for e in onto.entities}
    problems = []
    seen_ids: set[str] = set()
    member_of: dict[str, str] = {}
    for c in onto.near_synonyms:
        where = f"near-synonym class {c.id!r}"
        if c.id in seen_ids:
            problems.append(f"{where} is defined more than once")
        seen_ids.add(c.id)
        if c.source not in onto.hierarchy_sources:
            problems.append(f"{where} has unknown source {c.source!r} (hierarchy_sources: {sorted(onto.hierarchy_sources)})")
        if len(set(c.members)) < 2:
            problems.append(f"{where} has fewer than two members")
        for member in dict.fromkeys(c.members):
            if member not in kinds:
                problems.append(f"{where} names unknown entity {member!r}")
            elif member in member_of:
                problems.append(f"entity {member!r} is in near-synonym classes {member_of[member]!r} and {c.id!r}")
            else:
                member_of[member] = c.id
        if len({kinds[m] for m in c.members if m in kinds}) > 1:
            problems.append(f"{where} mixes findings and differentials: its members must be of one kind")
        problems.extend(_class_between_problems(onto, c.id, [m for m in c.members if m in kinds]))
    return problems


def _matched_pair_problems(onto: Ontology) -> list[str]:
    """Matched pairs: unknown sources and members, a pair of one entity, members of two kinds, a pair
    listed twice, and a pair whose members already match otherwise (one class, or is-a)."""
    kinds = {e.id: e.kind for e in onto.entities}
    problems, seen = [], set()
    for p in onto.matched_pairs:
        where = f"matched pair {list(p.members)}"
        a, b = p.members
        if p.source not in onto.hierarchy_sources:
            problems.append(f"{where} has unknown source {p.source!r} (hierarchy_sources: {sorted(onto.hierarchy_sources)})")
        unknown = [m for m in p.members if m not in kinds]
        if unknown:
            problems.append(f"{where} names unknown entities {unknown}")
            continue
        if a == b or frozenset(p.members) in seen:
            problems.append(f"{where} pairs an entity with itself or is listed twice")
        seen.add(frozenset(p.members))
        if kinds[a] != kinds[b]:
            problems.append(f"{where} mixes findings and differentials: its members must be of one kind")
        if b in onto.near_synonym_members(a) or b in onto.ancestors(a) or a in onto.ancestors(b):
            problems.append(f"{where} already match by the hierarchy (one near-synonym class, or is-a)")
    return problems


def _measure_problems(onto: Ontology, known: set[str]) -> list[str]:
    """Device positions and size thresholds: unknown entities, sources and landmarks, a device listed
    twice, an expected or malpositioned landmark the device does not list, a landmark both."""
    landmarks = set(attribute_vocabulary().buckets.get("landmarks", []))
    problems: list[str] = []
    seen: set[str] = set()
    for p in onto.device_positions:
        where = f"device position of {p.device!r}"
        if p.device not in known:
            problems.append(f"{where}: unknown entity")
        if p.device in seen:
            problems.append(f"{where} is listed twice")
        seen.add(p.device)
        if p.source not in onto.measure_sources:
            problems.append(f"{where} has unknown source {p.source!r} (measure_sources: {sorted(onto.measure_sources)})")
        named = [
            *p.landmarks,
            *([p.distance.landmark, p.distance.above, *([p.distance.beyond] if p.distance.beyond else [])] if p.distance else []),
        ]
        if p.distance is not None and p.distance.landmark not in p.landmarks:
            problems.append(f"{where}: its distance landmark {p.distance.landmark!r} is not among its landmarks")
        problems.extend(f"{where} names unknown landmark {x!r} (attributes.yaml landmarks)" for x in named if x not in landmarks)
        problems.extend(
            f"{where}: {x!r} is expected or malpositioned but not among its landmarks"
            for x in [*p.expected, *p.malpositioned]
            if x not in p.landmarks
        )
        problems.extend(f"{where}: {x!r} is both expected and malpositioned" for x in set(p.expected) & set(p.malpositioned))
        span = p.distance.expected_mm if p.distance is not None else None
        if span is not None and not 0 <= span[0] <= span[1]:
            problems.append(f"{where}: expected_mm must be a range low <= high of distances >= 0")
    seen = set()
    attributes = {e.id: e.attributes for e in onto.entities}
    for t in onto.size_thresholds:
        where = f"size threshold of {t.entity!r}"
        if t.entity not in known:
            problems.append(f"{where}: unknown entity")
        elif "severity" not in attributes[t.entity]:
            problems.append(f"{where}: the entity has no severity attribute, so its sizes are never compared")
        if t.entity in seen:
            problems.append(f"{where} is listed twice")
        seen.add(t.entity)
        if t.source not in onto.measure_sources:
            problems.append(f"{where} has unknown source {t.source!r} (measure_sources: {sorted(onto.measure_sources)})")
        if not t.mm or any(x <= 0 for x in t.mm):
            problems.append(f"{where}: give one or more sizes > 0 mm")
    return problems


def _class_between_problems(onto: Ontology, class_id: str, members: list[str]) -> list[str]:
    """A class is judged as one node of the hierarchy, so a member may be another member's ancestor
    (near-synonymy wins between them), but no entity outside the class may lie between two members:
    collapsing the class would make a cycle through it."""
    inside = set(members)
    problems = []
    for member in members:
        for ancestor in onto.ancestors(member):
            if ancestor in inside:
                continue
            above = [m for m in members if m in onto.ancestors(ancestor)]
            if above:
                problems.append(
                    f"near-synonym class {class_id!r}: {ancestor!r} is an ancestor of member {member!r} "
                    f"and a descendant of member {above[0]!r}; a class is one node of the hierarchy, so "
                    "every entity between two members must be a member"
                )
    return problems


def parse_ontology(data: dict, source: str = "<memory>") -> Ontology:
    """Build and validate an :class:`Ontology` from already-parsed YAML data."""
    try:
        onto = Ontology.model_validate(data)
    except ValidationError as exc:
        raise OntologyError(f"{source}: invalid ontology:\n{exc}") from exc
    problems = _problems(onto)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise OntologyError(f"{source}: {len(problems)} problem(s) in ontology:\n{listing}")
    return onto


def load_ontology(path: str | Path | None = None) -> Ontology:
    """Load an ontology: the packaged default when ``path`` is None, else the user's YAML file."""
    if path is None:
        return _load_default()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OntologyError(f"{path}: cannot read ontology file: {exc.strerror}") from exc
    return _parse_text(text, str(path))


def _parse_text(text: str, source: str) -> Ontology:
    try:
        data = yaml_files.safe_load(text)
    except yaml.YAMLError as exc:
        raise OntologyError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise OntologyError(f"{source}: expected a mapping at the top level")
    return parse_ontology(data, source)


@lru_cache(maxsize=1)
def _load_default() -> Ontology:
    ref = resources.files("cxreval.ontology") / "data" / DEFAULT_ONTOLOGY
    return _parse_text(ref.read_text(encoding="utf-8"), f"cxreval:{DEFAULT_ONTOLOGY}")
