"""The rule engine's word lists (``data/lexicon.yaml``) as one typed, read-only lexicon.

Each list is a set of lower-case tokens the engine tests words against ("is this word a clause
break?"); its doc and example sit beside it in the YAML. A user rule file may add or remove words
(:func:`cxreval.extract.rules.ruleset.load_rules`), so no list is a constant in code.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

#: Lists the lexicon computes from others rather than reads.
_DERIVED = ("adjectives_only",)


class LexiconError(ValueError):
    """A word list that cannot be used (unknown name, a word that is no text)."""


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Every word list the engine reads, by name (the keys of ``data/lexicon.yaml``)."""

    clause_break: frozenset[str]
    contrast_break: frozenset[str]
    conjunctions: frozenset[str]
    closing_verbs: frozenset[str]
    aside_openers: frozenset[str]
    list_openers: frozenset[str]
    negated_list_sizes: frozenset[str]
    forward_break: frozenset[str]
    alternative_break: frozenset[str]
    predicate_verbs: frozenset[str]
    bare_copula: frozenset[str]
    descriptors: frozenset[str]
    prefix_descriptors: frozenset[str]
    naming_descriptors: frozenset[str]
    not_a_judges: frozenset[str]
    versus: frozenset[str]
    earlier_exam: frozenset[str]
    exam_words: frozenset[str]
    conditions: frozenset[str]
    where_words: frozenset[str]
    articles: frozenset[str]
    plural_verbs: frozenset[str]
    label_negations: frozenset[str]
    adjacent_after: frozenset[str]
    lungs: frozenset[str]
    own_verbs: frozenset[str]
    size_denials: frozenset[str]
    degree_words: frozenset[str]
    strong_break: frozenset[str]
    joiners: frozenset[str]
    #: In the YAML's order: a name goes on at the first copula its trie continues with.
    copulas: tuple[str, ...]
    subject_breaks: frozenset[str]
    size_joiners: frozenset[str]
    prior_before: frozenset[str]
    prior_after: frozenset[str]
    size_fillers: frozenset[str]
    tip_above: frozenset[str]
    tip_below: frozenset[str]
    tip_elsewhere: frozenset[str]
    tip_close: frozenset[str]
    size_amounts: frozenset[str]
    measure_verbs: frozenset[str]
    #: Words after "is not a" that describe the finding named after them, so the denial is of the
    #: description ("this is not a displaced fracture"): ``descriptors`` without
    #: ``naming_descriptors``, and ``prefix_descriptors`` (derived, so an edit of those reaches it).
    adjectives_only: frozenset[str] = frozenset()

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The list names of ``data/lexicon.yaml``, in its order (the derived list excluded)."""
        return tuple(f.name for f in fields(cls) if f.name not in _DERIVED)


def lexicon_from_data(words: dict[str, Any], source: str) -> Lexicon:
    """The lexicon of ``data/lexicon.yaml``'s ``words`` mapping: every list present, each a list of words."""
    missing = [name for name in Lexicon.names() if name not in words]
    unknown = sorted(set(words) - set(Lexicon.names()))
    if missing or unknown:
        raise LexiconError(f"{source}: word lists missing {missing}, unknown {unknown}")
    sets: dict[str, Any] = {name: _word_set(words[name].get("words"), name, source) for name in Lexicon.names()}
    sets["copulas"] = tuple(dict.fromkeys(w.lower() for w in words["copulas"]["words"]))
    sets["adjectives_only"] = sets["descriptors"] - sets["naming_descriptors"] | sets["prefix_descriptors"]
    return Lexicon(**sets)


def _word_set(items: object, name: str, source: str) -> frozenset[str]:
    if not isinstance(items, list) or not all(isinstance(w, str) and w for w in items):
        raise LexiconError(f"{source}: word list {name} must be a list of words (quote `no` in YAML)")
    return frozenset(w.lower() for w in items)
