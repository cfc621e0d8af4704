"""Deterministic judgement: compare two extractions entity by entity.

Decisions (documented in the README):
- Presence: an entity is positive in a report when it is present, or uncertain under the
  default policy ``uncertain="positive"`` (a hedged finding still asks the reader to act on it;
  differential diagnoses are nearly always hedged). ``uncertain="negative"`` counts hedges as
  absent. TP / FP / FN / TN follow from the two reports' polarity.
- Attributes are judged on TP rows only, and only where the ontology says they apply.
  Location: not-available unless both reports give a side or a zone; not-aligned when the sides
  differ, or when both give zones and none is shared. Severity: not-available unless both give
  one; aligned when the buckets (mild / moderate / severe) agree. Comparison:
  missing-mentioned-comparison when only the reference states a change from a prior,
  adding-unmentioned-comparison when only the candidate does, conflicting-comparison when both
  do and the directions differ (:data:`CHANGE_DIRECTION`: worse = new / increased, better =
  decreased / resolved, same = unchanged; new vs increased agree), otherwise other.
  ``spec_compat=True`` keeps SPEC-CXR's three values: a conflict is ``other``.
- Rows are written for every entity that either report mentions (TN included when both deny
  it). An entity neither report mentions is an implicit TN: scores count it as
  ``n_pairs - TP - FP - FN``, so no information is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from cxreval.extract.explain import rules_line
from cxreval.extract.models import CERTAINTY_POLICIES, EntityState, Extraction, constructed
from cxreval.judge.models import AttributeJudgement, ComparisonJudgement, EntityJudgement, Presence
from cxreval.judge.table import COLUMNS
from cxreval.literals import UncertainPolicy
from cxreval.ontology import Entity, Ontology
from cxreval.ontology.models import DevicePosition


def is_positive(state: EntityState | None, uncertain: UncertainPolicy) -> bool:
    if state is None:
        return False
    if state.status != "uncertain":
        return state.status == "present"
    return state.certainty in CERTAINTY_POLICIES[uncertain]


def _presence(ref_pos: bool, cand_pos: bool) -> Presence:
    if ref_pos:
        return "TP" if cand_pos else "FN"
    return "FP" if cand_pos else "TN"


def judge_location(ref: EntityState, cand: EntityState) -> AttributeJudgement:
    ref_has = ref.side is not None or bool(ref.zones)
    cand_has = cand.side is not None or bool(cand.zones)
    if not (ref_has and cand_has):
        return "not-available"
    if ref.side and cand.side and ref.side != cand.side:
        return "not-aligned"
    if ref.zones and cand.zones and not set(ref.zones) & set(cand.zones):
        return "not-aligned"
    if (ref.side is None) != (cand.side is None) and not (ref.zones and cand.zones):
        # One gives only a side, the other only a zone: nothing to compare.
        return "not-available"
    return "aligned"


def judge_tip(position: DevicePosition, ref: EntityState, cand: EntityState) -> AttributeJudgement | None:
    """Where two reports put one device's tip (docs/scoring.md, "Device tips, sizes and sides"): aligned at
    one place (a landmark, or one band of a measured distance) or where both places are where the
    tip belongs; not-aligned otherwise. None when either report names no landmark."""
    ref_place, cand_place = position.place(ref.tip, ref.tip_mm), position.place(cand.tip, cand.tip_mm)
    if ref_place is None or cand_place is None:
        return None
    if ref_place == cand_place or (position.is_expected(ref_place) and position.is_expected(cand_place)):
        return "aligned"
    return "not-aligned"


def judge_device_location(position: DevicePosition, ref: EntityState, cand: EntityState) -> AttributeJudgement:
    """A device's location: its tip (:func:`judge_tip`) and its side or zones (:func:`judge_location`);
    a conflict in either is one location error."""
    by_place = judge_location(ref, cand)
    by_tip = judge_tip(position, ref, cand)
    if by_tip is None or by_place == "not-aligned":
        return by_place
    return by_tip


#: Two stated sizes of one finding agree when the larger is at most this many times the smaller
#: (and no size threshold of the entity lies between them): measurements on radiographs vary by
#: reader and projection, a ratio of 1.5 is a change a radiologist reports. In the signature as
#: ``sizes:x1.5``.
SIZE_TOLERANCE = 1.5


#: Two sizes on either side of a threshold disagree only when they are also more than this many
#: times apart: "3 cm mass" and "3.1 cm mass" are one measurement read twice, not a nodule and a mass.
THRESHOLD_MARGIN = 1.1


def sizes_agree(a: float, b: float, thresholds: tuple[float, ...] = (), tolerance: float = SIZE_TOLERANCE) -> bool:
    """Whether two sizes (mm) of one finding agree: within ``tolerance`` of each other, and not on
    two sides of a threshold while more than :data:`THRESHOLD_MARGIN` apart (a nodule is up to
    30 mm: 25 and 35 mm disagree; 30 and 31 mm agree)."""
    low, high = sorted((a, b))
    if high > low * tolerance:
        return False
    return not (high > low * THRESHOLD_MARGIN and any(low <= t < high for t in thresholds))


def severity_by_side(state: EntityState) -> dict[str, str]:
    """The size word of each side a state sizes: its ``side_severity``, else its one side and
    severity (a bilateral size sizes both sides); empty when it sizes no side."""
    if state.side_severity:
        return dict(state.side_severity)
    if state.severity is None or state.side is None:
        return {}
    return {side: state.severity for side in (("left", "right") if state.side == "bilateral" else (state.side,))}


def judge_severity(ref: EntityState, cand: EntityState, thresholds: tuple[float, ...] = ()) -> AttributeJudgement:
    """Stated sizes in millimetres where both give one (:func:`sizes_agree`); else the size words'
    buckets (mild / moderate / severe), side by side where both size a side (a small right and large
    left effusion against small bilateral effusions: the left disagrees); not-available unless both
    give one or the other."""
    if ref.size_mm is not None and cand.size_mm is not None:
        return "aligned" if sizes_agree(ref.size_mm, cand.size_mm, thresholds) else "not-aligned"
    if ref.severity is None or cand.severity is None:
        return "not-available"
    if ref.side_severity or cand.side_severity:
        ref_sides, cand_sides = severity_by_side(ref), severity_by_side(cand)
        shared = ref_sides.keys() & cand_sides.keys()
        if shared:
            return "aligned" if all(ref_sides[s] == cand_sides[s] for s in shared) else "not-aligned"
    return "aligned" if ref.severity == cand.severity else "not-aligned"


#: The direction of each extracted change from a prior: two stated changes conflict when their
#: directions differ ("stable" vs "increased", "new" vs "decreased"); two of one direction
#: ("new" vs "increased", "decreased" vs "resolved") agree.
CHANGE_DIRECTION: dict[str, str] = {
    "new": "worse",
    "increased": "worse",
    "decreased": "better",
    "resolved": "better",
    "unchanged": "same",
}


def judge_comparison(ref: EntityState, cand: EntityState, spec_compat: bool = False) -> ComparisonJudgement:
    """The comparison verdict of a TP row; ``spec_compat`` maps conflicting-comparison to other."""
    if ref.comparison and not cand.comparison:
        return "missing-mentioned-comparison"
    if cand.comparison and not ref.comparison:
        return "adding-unmentioned-comparison"
    if (
        not spec_compat
        and ref.comparison
        and cand.comparison
        and CHANGE_DIRECTION[ref.comparison] != CHANGE_DIRECTION[cand.comparison]
    ):
        return "conflicting-comparison"
    return "other"


def compare_extractions(
    pair_id: str,
    reference: Extraction,
    candidate: Extraction,
    ontology: Ontology,
    uncertain: UncertainPolicy = "positive",
    spec_compat: bool = False,
    hierarchy: bool = False,
) -> list[EntityJudgement]:
    """One :class:`EntityJudgement` per entity mentioned in either report, in ontology order
    (``spec_compat``: SPEC-CXR's three comparison values only, see :func:`judge_comparison`;
    ``hierarchy``: the is-a rule of :func:`match_hierarchy`, else every entity on its own)."""
    return compare_states(pair_id, reference.states(), candidate.states(), ontology, uncertain, spec_compat, hierarchy)


def compare_states(
    pair_id: str,
    ref_states: Mapping[str, EntityState],
    cand_states: Mapping[str, EntityState],
    ontology: Ontology,
    uncertain: UncertainPolicy = "positive",
    spec_compat: bool = False,
    hierarchy: bool = False,
) -> list[EntityJudgement]:
    """:func:`compare_extractions` of the two reports' entity states (:meth:`Extraction.states`),
    for a caller that keeps a report's states to compare it many times (the RL reward)."""
    judge = _Pair(ref_states, cand_states, ontology, uncertain, spec_compat)
    rows = {e.id: judge.row(e, e) for e in _in_ontology_order(ref_states.keys() | cand_states.keys(), ontology)}
    if hierarchy and ontology.has_hierarchy:
        rows = match_hierarchy(rows, judge)
    _malposition_once(rows, judge)
    return [
        constructed(EntityJudgement, {"pair_id": pair_id, **fields, **_NO_SPANS}, _ROW_FIELDS)
        for fields in sorted(rows.values(), key=lambda f: judge.place[f["entity"]])
    ]


class _Pair:
    """The two reports' states of one pair, and how a row is judged from them."""

    def __init__(
        self,
        ref: Mapping[str, EntityState],
        cand: Mapping[str, EntityState],
        ontology: Ontology,
        uncertain: UncertainPolicy,
        spec_compat: bool,
    ) -> None:
        self.ref, self.cand, self.ontology = ref, cand, ontology
        self.uncertain, self.spec_compat = uncertain, spec_compat
        self.place = _places(ontology)

    def positive(self, side: Mapping[str, EntityState], entity_id: str) -> bool:
        return is_positive(side.get(entity_id), self.uncertain)

    def denies(self, side: Mapping[str, EntityState], entity_id: str) -> bool:
        """The side states the entity and does not affirm it, in words of its own: a blanket normal
        statement ("The lungs are clear.") that a report can make beside a small finding is no
        denial of that finding."""
        state = side.get(entity_id)
        return state is not None and not is_positive(state, self.uncertain) and not (state.rule_ids or "").startswith("normal.")

    @staticmethod
    def same_place(one: EntityState | None, other: EntityState | None) -> bool:
        """Two states may be one finding: their places do not conflict. A finding the other side
        has matched already ("left basilar opacity" in both reports) names no finding at another
        place ("calcified granuloma in the right base"). A bilateral place holds either side."""
        if one is None or other is None:
            return True
        sides = {one.side, other.side} - {None, "bilateral"}
        if len(sides) > 1:  # left against right; "bilateral" holds either side
            return False
        return not (one.zones and other.zones and not set(one.zones) & set(other.zones))

    def row(self, entity: Entity, cand_entity: Entity, specificity: str = "exact") -> dict[str, str]:
        """The row of ``entity``, the reference's state of ``entity`` against the candidate's of
        ``cand_entity`` (the same entity, or its match in the hierarchy); every value is one of the
        Literals of :class:`EntityJudgement`, so rows are built without validating (hot path)."""
        ref, cand = self.ref.get(entity.id), self.cand.get(cand_entity.id)
        presence = _presence(is_positive(ref, self.uncertain), is_positive(cand, self.uncertain))
        location: AttributeJudgement = "not-available"
        severity: AttributeJudgement = "not-available"
        comparison: ComparisonJudgement = "other"
        if presence == "TP":
            assert ref is not None and cand is not None
            if "location" in entity.attributes:
                position = self.ontology.device_position(entity.id)
                location = judge_location(ref, cand) if position is None else judge_device_location(position, ref, cand)
            if "severity" in entity.attributes:
                severity = judge_severity(ref, cand, self.ontology.size_thresholds_of(entity.id))
            if "comparison" in entity.attributes:
                comparison = judge_comparison(ref, cand, self.spec_compat)
        return {
            "entity": entity.id,
            "presence": presence,
            "location": location,
            "severity": severity,
            "comparison": comparison,
            "reference": ref.evidence if ref else "",
            "candidate": cand.evidence if cand else "",
            "reference_rules": rules_line(ref.rule_ids, ref.cue) if ref else "",
            "candidate_rules": rules_line(cand.rule_ids, cand.cue) if cand else "",
            "specificity": specificity if presence == "TP" else "exact",
        }


def match_hierarchy(rows: dict[str, dict[str, str]], pair: _Pair) -> dict[str, dict[str, str]]:
    """The is-a rule (docs/scoring.md, "The judgement rule") on a pair's flat rows.

    1. A finding the reference states and the candidate leaves unstated (a flat FN) is matched,
       nearest first, to a finding the candidate states: a member of its near-synonym class
       (``synonym``: one finding, no error), else one of its ancestors (``less-specific``: right
       at the ancestor, wrong in specificity only). The row becomes a TP at the reference's
       entity, its attributes judged between the two states; a candidate finding the reference
       does not state (a flat FP) is used up by the match and its row goes.
    2. The other way round, a candidate finding the reference does not state (FP) that is a
       near-synonym or a descendant of a reference finding is matched to it: ``synonym``, or
       ``more-specific`` (wrong in the added specificity only).
    3. What stays unmatched but is implied by the other side (an FP at an ancestor of a finding
       the reference states, an FN at an ancestor of one the candidate states) is a TP: a mention
       implies its ancestors. The finding itself keeps its own row (a denied "tension" stays an FN).
    A side that explicitly denies an entity is never matched on it: a denial is not a synonym.
    """
    onto = pair.ontology
    states = {"FN": (pair.ref, pair.cand), "FP": (pair.cand, pair.ref)}
    for kind, how_up in (("FN", "less-specific"), ("FP", "more-specific")):
        own, other = states[kind]
        opposite = "FP" if kind == "FN" else "FN"
        for entity_id in sorted((e for e, r in rows.items() if r["presence"] == kind), key=pair.place.__getitem__):
            if entity_id not in rows or pair.denies(other, entity_id):  # used up, or the other side denies it
                continue
            targets = {
                e
                for e, r in rows.items()
                if r["presence"] == opposite
                or (
                    r["presence"] == "TP"
                    and r["specificity"] in ("exact", "synonym")
                    and pair.same_place(own.get(entity_id), other.get(e))
                )
            }
            # a side that denies an entity in its own words is not matched to it by a pair: "airspace
            # disease without consolidation" names no consolidation
            found = _match(entity_id, targets, onto, how_up, {e for e in targets if pair.denies(own, e)})
            if found is not None:
                _apply(rows, pair, kind, entity_id, *found)
    _implied(rows, pair)
    _denied_above(rows, pair)
    return rows


#: The entity rule of a malpositioned device derived from a device's tip (``names.yaml``).
DERIVED_MALPOSITION = "device.malposition"


def _malposition_once(rows: dict[str, dict[str, str]], pair: _Pair) -> None:
    """One discrepancy counts once: a malposition one report derives from a device's tip
    (``device.malposition``) and the other does not state is no error of its own where the two
    reports put that device's tip at different places (its location error counts the discrepancy),
    for every device whose tip the report puts at a malpositioned landmark. The row goes; a
    malposition stated in words (which leads the state) stays, and so does one of a device the other
    report leaves out."""
    for entity_id, row in list(rows.items()):
        if row["presence"] not in ("FP", "FN"):
            continue
        stating = pair.ref if row["presence"] == "FN" else pair.cand
        state = stating.get(entity_id)
        if state is None or (state.rule_ids or "").split("|", 1)[0] != DERIVED_MALPOSITION:
            continue
        malpositioned = [d for d in stating if _malpositioned_tip(pair, stating, d)]
        if malpositioned and all(
            rows.get(d, {}).get("presence") == "TP" and rows[d]["location"] == "not-aligned" for d in malpositioned
        ):
            del rows[entity_id]


def _malpositioned_tip(pair: _Pair, stating: Mapping[str, EntityState], device: str) -> bool:
    """Whether ``stating`` puts ``device``'s tip at one of its malpositioned landmarks."""
    position = pair.ontology.device_position(device)
    own = stating.get(device)
    return position is not None and own is not None and pair.positive(stating, device) and own.tip in position.malpositioned


def _denied_above(rows: dict[str, dict[str, str]], pair: _Pair) -> None:
    """A reference finding the candidate leaves unstated but whose ancestor it denies ("No
    pneumothorax." for "Left tension pneumothorax.") was denied, not left out: the FN row shows
    the candidate's denial as its evidence."""
    onto = pair.ontology
    for entity_id, r in rows.items():
        if r["presence"] != "FN" or r["candidate"]:
            continue
        for ancestor in onto.ancestors(entity_id, classes=True):
            state = pair.cand.get(ancestor)
            if state is not None and pair.denies(pair.cand, ancestor):
                r["candidate"] = state.evidence
                r["candidate_rules"] = rules_line(state.rule_ids, state.cue)
                break


def _apply(rows: dict[str, dict[str, str]], pair: _Pair, kind: str, entity_id: str, other_id: str, how: str) -> None:
    """Record a match of ``entity_id``'s row (FN or FP) with ``other_id``'s (see :func:`match_hierarchy`)."""
    onto = pair.ontology
    ref_id, cand_id = (entity_id, other_id) if kind == "FN" else (other_id, entity_id)
    other = rows[other_id]
    specificity = "exact" if how == "size" else how
    if other["presence"] == "TP":  # the other side's finding is shared already: it stays, this one is named
        if how == "size":  # both sizes named on one side: two lesions, or one named twice; no match
            return
        if kind == "FN":
            # its place, grade and change are judged on the shared row: this row says the specificity only
            rows[entity_id] = {
                **pair.row(onto.entity(ref_id), onto.entity(cand_id), specificity),
                "location": "not-available",
                "severity": "not-available",
                "comparison": "other",
            }
        else:
            if how != "synonym" and other["specificity"] == "exact":
                other["specificity"] = how
            del rows[entity_id]
        return
    row = rows[ref_id] = pair.row(onto.entity(ref_id), onto.entity(cand_id), specificity)
    if how == "size":  # one lesion at two sizes: the size is wrong whatever the words' degrees say
        row["severity"] = "not-aligned"
    del rows[cand_id]


def _implied(rows: dict[str, dict[str, str]], pair: _Pair) -> None:
    """Step 3 of :func:`match_hierarchy`: an FP or FN at an ancestor of a finding the other side
    states is a TP (the ancestor's row, attributes judged against that finding's state)."""
    onto = pair.ontology
    for entity_id, r in list(rows.items()):
        if r["presence"] not in ("FP", "FN"):
            continue
        side = pair.ref if r["presence"] == "FP" else pair.cand  # the side that does not state it
        if pair.denies(side, entity_id):  # "No consolidation." beside "pneumonia": the denial stands
            continue
        stated = pair.ref if r["presence"] == "FN" else pair.cand  # the side that states the ancestor
        below = [
            d
            for d in onto.descendants(entity_id, classes=True)
            if pair.positive(side, d)
            and pair.same_place(stated.get(entity_id), side.get(d))
            and not _placed_apart(stated.get(entity_id), stated.get(d) if pair.positive(stated, d) else None)
        ]
        if below:
            ent = onto.entity(entity_id)
            ref_e, cand_e = (onto.entity(below[0]), ent) if r["presence"] == "FP" else (ent, onto.entity(below[0]))
            row = pair.row(ref_e, cand_e)
            row["entity"] = entity_id
            rows[entity_id] = row


def _placed_apart(ancestor: EntityState | None, descendant: EntityState | None) -> bool:
    """Whether a report that states both an ancestor and its descendant places them apart: the
    ancestor at a zone, the descendant at zones none of which is the ancestor's, or throughout both
    lungs ("interstitial prominence bilaterally" and "patchy retrocardiac opacity"). Then they are
    two findings, and the descendant does not imply that ancestor."""
    if ancestor is None or descendant is None or not ancestor.zones:
        return False
    if descendant.zones:
        return not set(ancestor.zones) & set(descendant.zones)
    return descendant.side == "bilateral" or (
        descendant.side is None and descendant.status == "uncertain" and ancestor.status == "present"
    )


def _match(
    entity_id: str, others: Set[str], ontology: Ontology, how_up: str, denied: Set[str] = frozenset()
) -> tuple[str, str] | None:
    """The nearest of ``others`` that names ``entity_id``'s finding at another level: a member of
    its near-synonym class (``synonym``), else its partner in a matched pair (``synonym`` or
    ``size``; not one in ``denied``, which the entity's own side denies), else an ancestor
    (``how_up``)."""
    if not others:
        return None
    for member in ontology.near_synonym_members(entity_id):
        if member != entity_id and member in others:
            return member, "synonym"
    for other in sorted(others - denied):
        how = ontology.matched_pair(entity_id, other)
        if how is not None:
            return other, how
    for ancestor in ontology.ancestors(entity_id, classes=True):
        for member in ontology.near_synonym_members(ancestor):  # a class is one node of the hierarchy
            if member in others:
                return member, how_up
    return None


def _places(ontology: Ontology) -> dict[str, int]:
    """Entity id -> its place in the ontology (built once per ontology object)."""
    hit = _ORDERS.get(id(ontology))
    if hit is None or hit[0] is not ontology:
        if len(_ORDERS) > 16:
            _ORDERS.clear()
        place: dict[str, int] = {}
        for i, e in enumerate(ontology.entities):
            place.setdefault(e.id, i)
        hit = _ORDERS[id(ontology)] = (ontology, place, {e.id: e for e in reversed(ontology.entities)})
    return hit[1]


def _in_ontology_order(ids: Set[str], ontology: Ontology) -> list[Entity]:
    """The ontology's entities named in ``ids``, in ontology order: a sort of the few a pair
    mentions rather than a walk over every entity of the ontology for every pair."""
    place = _places(ontology)
    by_id = _ORDERS[id(ontology)][2]
    return [by_id[i] for i in sorted((i for i in ids if i in place), key=place.__getitem__)]


#: id(ontology) -> (the ontology, entity id -> place, entity id -> entity), for the ontologies in use.
_ORDERS: dict[int, tuple[Ontology, dict[str, int], dict[str, Entity]]] = {}

#: Every field of a judgement row (:data:`cxreval.judge.table.COLUMNS`), as ``constructed`` takes them.
#: The fields of a row an engine makes that only a row read back from a compact file fills.
_NO_SPANS = {"reference_span": None, "candidate_span": None}
_ROW_FIELDS = set(COLUMNS) | set(_NO_SPANS)
