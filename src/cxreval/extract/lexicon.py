"""Phrase lookup for the rule engine: a token trie with longest-match scanning."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

V = TypeVar("V")

_END = "\x00end"


class PhraseTrie(Generic[V]):
    """Maps token sequences to values; finds the longest phrase starting at a position."""

    def __init__(self) -> None:
        self._root: dict = {}
        self.size = 0

    def add(self, tokens: Sequence[str], value: V) -> None:
        if not tokens:
            return
        node = self._root
        for tok in tokens:
            node = node.setdefault(tok, {})
        if _END not in node:
            self.size += 1
        node[_END] = value

    def get(self, tokens: Sequence[str]) -> V | None:
        node = self._root
        for tok in tokens:
            node = node.get(tok)
            if node is None:
                return None
        return node.get(_END)

    def longest_at(self, tokens: Sequence[str], i: int) -> tuple[int, V] | None:
        """Return ``(end, value)`` of the longest phrase that starts at ``tokens[i]``."""
        node = self._root
        best: tuple[int, V] | None = None
        j = i
        n = len(tokens)
        while j < n:
            node = node.get(tokens[j])
            if node is None:
                break
            j += 1
            if _END in node:
                best = (j, node[_END])
        return best

    def scan(self, tokens: Sequence[str]) -> Iterable[tuple[int, int, V]]:
        """Greedy left-to-right longest matches that do not overlap: ``(start, end, value)``."""
        i = 0
        n = len(tokens)
        root = self._root
        while i < n:
            if tokens[i] in root:
                hit = self.longest_at(tokens, i)
                if hit is not None:
                    end, value = hit
                    yield i, end, value
                    i = end
                    continue
            i += 1


class GappedMatch(NamedTuple):
    """A phrase found with up to a few modifier words skipped inside it."""

    start: int
    end: int
    value: object
    used: tuple[int, ...]


# Skippable words that join two modifiers ("tortuous and calcified aorta"); a match never ends
# after one, so the words that follow it belong to the next item of a list.
_JOINERS = frozenset({"and"})
# Coordinated subjects sharing one copula: "the cardiac silhouette and vascularity are enlarged"
# reads as "cardiac silhouette [and vascularity] are enlarged". After "and", a second subject of at
# most MAX_COSUBJECT words, none of them a break word, must be followed by one of _COPULAS; the
# name then goes on at its own copula ("cardiac silhouette is enlarged").
MAX_COSUBJECT = 3
_COPULAS = ("is", "are")
_SUBJECT_BREAKS = frozenset({"and", "or", "but", "no", "not", "without", "with", "there", "which", "that"})


def scan_gapped(
    trie: PhraseTrie[V], tokens: Sequence[str], skippable: frozenset[str], max_skips: int = 2
) -> list[GappedMatch]:
    """Every phrase of ``trie`` in ``tokens``, allowing modifier words inside a phrase.

    "calcified right hilar lymph nodes" matches "calcified lymph nodes" by skipping the words
    "right" and "hilar"; "tortuous calcified aorta" yields both "tortuous aorta" (skipping
    "calcified") and "calcified aorta". From one start the longest phrase of each value is kept, so
    "aorta is tortuous and calcified" yields "aorta is tortuous" and "aorta is [tortuous and]
    calcified". A match whose own tokens all belong to a longer kept
    match is dropped ("effusion" inside "pleural effusion"); matches are returned in text order.
    """
    root = trie._root
    found: list[GappedMatch] = []
    n = len(tokens)
    for i in range(n):
        node = root.get(tokens[i])
        if node is None:
            continue
        best: dict[object, GappedMatch] = {}
        stack = [(node, i + 1, 0, (i,))]
        while stack:
            node, j, skips, used = stack.pop()
            if _END in node:
                value = node[_END]
                old = best.get(value)
                end = j
                if used[-1] + 1 < j:
                    # Trailing skipped modifiers stay in the span ("calcified granuloma, right base")
                    # up to a joining word: "effusion and patchy left ..." is a new item.
                    end = next((t for t in range(used[-1] + 1, j) if tokens[t] in _JOINERS), j)
                    while end < n and tokens[end] in _JOINERS and end > used[-1] + 1 and tokens[end - 1] == ",":
                        end -= 1  # "tortuosity of the aorta, and ...": the comma still closes the name
                if old is None or len(used) > len(old.used) or (len(used) == len(old.used) and end > old.end):
                    best[value] = _new_match(GappedMatch, (i, end, value, used))
            if j >= n:
                continue
            word = tokens[j]
            nxt = node.get(word)
            if nxt is not None:
                stack.append((nxt, j + 1, skips, used + (j,)))
            if word in _JOINERS:
                shared = _shared_copula(node, tokens, j)
                if shared is not None:
                    nxt_node, k = shared
                    stack.append((nxt_node, k + 1, skips, used + (k,)))
            if skips < max_skips and word in skippable:
                # skip one modifier word; the phrase must still continue after it
                k = j + 1
                if k < n and (node.get(tokens[k]) is not None or tokens[k] in skippable):
                    stack.append((node, k, skips + 1, used))
        found.extend(best.values())
    if len(found) < 2:
        return found  # nothing to drop or reorder (most sentences)
    found.sort(key=_longest_first)
    kept: list[GappedMatch] = []
    covered: set[int] = set()
    for m in found:
        if set(m.used) <= covered:
            continue
        kept.append(m)
        covered.update(m.used)
    kept.sort(key=lambda m: m.start)
    return kept


def _longest_first(m: GappedMatch) -> tuple[int, int]:
    return -len(m.used), m.start


_new_match = tuple.__new__  # a NamedTuple's own constructor is a Python function, called per match


def _shared_copula(node: dict[str, Any], tokens: Sequence[str], j: int) -> tuple[dict[str, Any], int] | None:
    """(trie node after the copula, index of the copula) when ``tokens[j]`` ("and") starts a second
    subject that shares the copula the phrase continues with; None otherwise."""
    own = next((node[c] for c in _COPULAS if c in node), None)
    if own is None:
        return None
    for k in range(j + 1, min(j + 2 + MAX_COSUBJECT, len(tokens))):
        word = tokens[k]
        if word in _COPULAS:
            return (own, k) if k > j + 1 else None
        if word in _SUBJECT_BREAKS or not word.isalpha():
            return None
    return None


def plural_variants(tokens: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Regular English plurals of a phrase's last word: effusion -> effusions, opacity -> opacities."""
    if not tokens:
        return []
    *head, last = tokens
    if not last.isalpha() or len(last) < 3:
        return []
    forms: list[str] = []
    if last.endswith("sis"):
        forms.append(last[:-3] + "ses")
    elif last.endswith("y") and last[-2] not in "aeiou":
        forms.append(last[:-1] + "ies")
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        forms.append(last + "es")
    else:
        forms.append(last + "s")
    return [(*head, f) for f in forms]


#: Prefixes a report may write apart or hyphenated ("hyper-expanded", "sub segmental", "non
#: calcified"); hyphens are spaces to the tokenizer, so "hyperexpanded" needs a two-word form too.
SPLIT_PREFIXES = ("hyper", "hypo", "over", "under", "peri", "para", "retro", "sub", "supra", "infra",
                  "intra", "non", "pseudo", "multi")  # not "post": "status post surgical removal of ..."


def prefix_variants(tokens: tuple[str, ...]) -> list[tuple[str, ...]]:
    """A phrase with one prefixed word written apart: ("hyperexpanded", "lungs") -> ("hyper",
    "expanded", "lungs"). The rest must be a word of four letters or more."""
    out: list[tuple[str, ...]] = []
    for i, tok in enumerate(tokens):
        for prefix in SPLIT_PREFIXES:
            rest = tok[len(prefix):]
            if tok.startswith(prefix) and len(rest) >= 4 and rest.isalpha():
                out.append((*tokens[:i], prefix, rest, *tokens[i + 1:]))
    return out
