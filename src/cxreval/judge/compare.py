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
from cxreval.literals import UncertainPolicy
from cxreval.ontology import Entity, Ontology


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


def judge_severity(ref: EntityState, cand: EntityState) -> AttributeJudgement:
    if ref.severity is None or cand.severity is None:
        return "not-available"
    return "aligned" if ref.severity == cand.severity else "not-aligned"


#: The direction of each extracted change from a prior: two stated changes conflict when their
#: directions differ ("stable" vs "increased", "new" vs "decreased"); two of one direction
#: ("new" vs "increased", "decreased" vs "resolved") agree.
CHANGE_DIRECTION: dict[str, str] = {
    "new": "worse", "increased": "worse",
    "decreased": "better", "resolved": "better",
    "unchanged": "same",
}


def judge_comparison(ref: EntityState, cand: EntityState, spec_compat: bool = False) -> ComparisonJudgement:
    """The comparison verdict of a TP row; ``spec_compat`` maps conflicting-comparison to other."""
    if ref.comparison and not cand.comparison:
        return "missing-mentioned-comparison"
    if cand.comparison and not ref.comparison:
        return "adding-unmentioned-comparison"
    if (not spec_compat and ref.comparison and cand.comparison
            and CHANGE_DIRECTION[ref.comparison] != CHANGE_DIRECTION[cand.comparison]):
        return "conflicting-comparison"
    return "other"


def compare_extractions(
    pair_id: str,
    reference: Extraction,
    candidate: Extraction,
    ontology: Ontology,
    uncertain: UncertainPolicy = "positive",
    spec_compat: bool = False,
) -> list[EntityJudgement]:
    """One :class:`EntityJudgement` per entity mentioned in either report, in ontology order
    (``spec_compat``: SPEC-CXR's three comparison values only, see :func:`judge_comparison`)."""
    return compare_states(pair_id, reference.states(), candidate.states(), ontology, uncertain, spec_compat)


def compare_states(
    pair_id: str,
    ref_states: Mapping[str, EntityState],
    cand_states: Mapping[str, EntityState],
    ontology: Ontology,
    uncertain: UncertainPolicy = "positive",
    spec_compat: bool = False,
) -> list[EntityJudgement]:
    """:func:`compare_extractions` of the two reports' entity states (:meth:`Extraction.states`),
    for a caller that keeps a report's states to compare it many times (the RL reward)."""
    rows: list[EntityJudgement] = []
    mentioned = ref_states.keys() | cand_states.keys()
    for entity in _in_ontology_order(mentioned, ontology):
        ref = ref_states.get(entity.id)
        cand = cand_states.get(entity.id)
        presence = _presence(is_positive(ref, uncertain), is_positive(cand, uncertain))
        location: AttributeJudgement = "not-available"
        severity: AttributeJudgement = "not-available"
        comparison: ComparisonJudgement = "other"
        if presence == "TP":
            assert ref is not None and cand is not None
            if "location" in entity.attributes:
                location = judge_location(ref, cand)
            if "severity" in entity.attributes:
                severity = judge_severity(ref, cand)
            if "comparison" in entity.attributes:
                comparison = judge_comparison(ref, cand, spec_compat)
        # Every value is one of the Literals above: built without re-validating (hot path), as
        # EntityJudgement.model_construct(**fields) would, without its generic field loop.
        rows.append(
            constructed(
                EntityJudgement,
                {
                    "pair_id": pair_id,
                    "entity": entity.id,
                    "presence": presence,
                    "location": location,
                    "severity": severity,
                    "comparison": comparison,
                    "reference": ref.evidence if ref else "",
                    "candidate": cand.evidence if cand else "",
                    "reference_rules": rules_line(ref.rule_ids, ref.cue) if ref else "",
                    "candidate_rules": rules_line(cand.rule_ids, cand.cue) if cand else "",
                },
                set(_ROW_FIELDS),
            )
        )
    return rows


def _in_ontology_order(ids: Set[str], ontology: Ontology) -> list[Entity]:
    """The ontology's entities named in ``ids``, in ontology order: a sort of the few a pair
    mentions rather than a walk over every entity of the ontology for every pair."""
    hit = _ORDERS.get(id(ontology))
    if hit is None or hit[0] is not ontology:
        position = {e.id: (i, e) for i, e in enumerate(ontology.entities)}
        if len(position) != len(ontology.entities):  # an id twice: walk the list as it is
            return [e for e in ontology.entities if e.id in ids]
        if len(_ORDERS) > 16:
            _ORDERS.clear()
        hit = _ORDERS[id(ontology)] = (ontology, position)
    position = hit[1]
    return [e for _, e in sorted(position[i] for i in ids if i in position)]


#: id(ontology) -> (the ontology, entity id -> (place, entity)), for the ontologies in use.
_ORDERS: dict[int, tuple[Ontology, dict[str, tuple[int, Entity]]]] = {}

_ROW_FIELDS = ("pair_id", "entity", "presence", "location", "severity", "comparison", "reference", "candidate",
               "reference_rules", "candidate_rules")
