"""How a hedged finding is described to an LLM engine: the hedge words, and for the graded
uncertainty policies the words of each grade, read from the rule engine's graded cues so that both
engines count the same hedges (``extract/rules/data/cues.yaml``)."""

from __future__ import annotations

from cxreval.ontology import Ontology

#: Words that hedge a finding (beside "X or Y", which hedges both), for the ungraded policies.
HEDGE_WORDS = (
    "possible",
    "possibly",
    "probable",
    "probably",
    "likely",
    "may represent",
    "could reflect",
    "suggestive of",
    "concerning for",
    "suspicious for",
    "questionable",
    "cannot be excluded",
    "not excluded",
)
#: Hedge words shown per grade (from the rule engine's graded cues, the first of each cue).
GRADE_WORDS_SHOWN = 4


def grade_words(ontology: Ontology) -> dict[str, list[str]]:
    """The words of each hedge grade, read from the packaged rule engine's graded cues
    (``hedge.pre.<grade>``, ``hedge.post.<grade>``): ``probable`` leans towards the finding,
    ``possible`` raises it as a possibility, ``alternative`` offers it as one of alternatives."""
    from cxreval.extract.rules import load_rules
    from cxreval.extract.rules.ruleset import CueRecord

    words: dict[str, list[str]] = {}
    for record in load_rules(ontology).records.values():
        if isinstance(record, CueRecord) and record.grade and record.id.startswith("hedge."):
            words.setdefault(record.grade, []).extend(record.phrases[:GRADE_WORDS_SHOWN])
    return words


def uncertain_rule(policy: str, ontology: Ontology | None = None) -> str:
    """How a hedged mention counts under the engine's uncertainty policy: ``positive`` or
    ``negative`` (every hedge, or none), or a graded one (``probable``, ``probable-alternative``:
    the hedge grades it counts, :data:`cxreval.extract.models.CERTAINTY_POLICIES`; the words of
    each grade come from ``ontology``'s rule engine, :func:`grade_words`)."""
    if policy in ("positive", "negative"):
        counts = "counts as present" if policy == "positive" else "counts as absent"
        return (
            f"A hedged mention ({', '.join(HEDGE_WORDS)}; and each finding of a differential such as "
            f'"atelectasis or pneumonia") {counts}.'
        )
    from cxreval.extract.models import CERTAINTY_POLICIES
    from cxreval.literals import HEDGE_GRADES
    from cxreval.ontology import load_ontology

    counted = CERTAINTY_POLICIES[policy]  # type: ignore[index]
    words = grade_words(ontology or load_ontology())
    shown = {**words, "alternative": ['"X or Y"', *words.get("alternative", [])]}
    parts = []
    for grade in HEDGE_GRADES:
        counts = "present" if grade in counted else "absent"
        parts.append(f"{grade} hedges ({', '.join(dict.fromkeys(shown.get(grade, [])))}) count as {counts}")
    return f"Hedged mentions are graded (policy {policy}): " + "; ".join(parts) + "."
