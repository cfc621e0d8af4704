"""Finding names and cue phrases in a run of tokens: a token trie with longest-match scanning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, NamedTuple, TypeVar

V = TypeVar("V")

_END = "\x00end"


class PhraseTrie(Generic[V]):
    """Maps token sequences to values; finds the longest phrases in a run of tokens."""

    def __init__(self) -> None:
        self._root: dict = {}
        self.size = 0

    def add(self, tokens: Sequence[str], value: V) -> None:
        """Map the phrase ``tokens`` to ``value`` (a later value for the same phrase replaces it)."""
        if not tokens:
            return
        node = self._root
        for tok in tokens:
            node = node.setdefault(tok, {})
        if _END not in node:
            self.size += 1
        node[_END] = value

    def get(self, tokens: Sequence[str]) -> V | None:
        """The value of exactly the phrase ``tokens``, or None."""
        node: dict[str, Any] = self._root
        for tok in tokens:
            child = node.get(tok)
            if child is None:
                return None
            node = child
        return node.get(_END)

    def scan(self, tokens: Sequence[str]) -> list[tuple[int, int, V]]:
        """Greedy left-to-right longest matches that do not overlap: ``(start, end, value)``."""
        out: list[tuple[int, int, V]] = []
        i = 0
        n = len(tokens)
        root = self._root
        while i < n:
            node = root.get(tokens[i])
            best = 0
            value: V = None  # type: ignore[assignment]
            j = i + 1
            while node is not None:
                if _END in node:
                    best, value = j, node[_END]
                if j >= n:
                    break
                node = node.get(tokens[j])
                j += 1
            if best:
                out.append((i, best, value))
                i = best
            else:
                i += 1
        return out


class GappedMatch(NamedTuple):
    """A phrase found with up to a few modifier words skipped inside it."""

    start: int
    end: int
    value: object
    used: tuple[int, ...]


# Coordinated subjects sharing one copula: "the cardiac silhouette and vascularity are enlarged"
# reads as "cardiac silhouette [and vascularity] are enlarged". After a joiner ("and"), a second
# subject of at most MAX_COSUBJECT words, none of them a subject break, must be followed by a copula;
# the name then goes on at its own copula ("cardiac silhouette is enlarged").
MAX_COSUBJECT = 3


class NameGrammar(NamedTuple):
    """The words a finding name may hold besides its own (the lexicon's lists; see lexicon.yaml)."""

    #: Modifier words that may stand inside a name ("calcified right hilar lymph nodes").
    skippable: frozenset[str]
    #: Skippable words that join two modifiers ("tortuous and calcified aorta"); a match never ends
    #: after one, so the words that follow it belong to the next item of a list.
    joiners: frozenset[str]
    copulas: tuple[str, ...]
    subject_breaks: frozenset[str]
    max_skips: int = 2


def scan_gapped(trie: PhraseTrie[V], tokens: Sequence[str], grammar: NameGrammar) -> list[GappedMatch]:
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
    skippable, joiners, max_skips = grammar.skippable, grammar.joiners, grammar.max_skips
    for i in range(n):
        node = root.get(tokens[i])
        if node is None:
            continue
        if _END not in node:  # no name is this word alone: go on only if the next word may continue one
            after = tokens[i + 1] if i + 1 < n else None
            if after is None or (after not in node and after not in skippable and after not in joiners):
                continue
        # the longest match of each value from this start
        best: dict[object, GappedMatch] = {}
        stack: list[tuple[dict[str, Any], int, int, tuple[int, ...]]] = [(node, i + 1, 0, (i,))]
        while stack:
            node, j, skips, used = stack.pop()
            if _END in node:
                value = node[_END]
                end = j if used[-1] + 1 >= j else _match_end(tokens, used, j, joiners)
                old = best.get(value)
                if old is None or len(used) > len(old.used) or (len(used) == len(old.used) and end > old.end):
                    best[value] = _new_match(GappedMatch, (i, end, value, used))
            if j >= n:
                continue
            word = tokens[j]
            nxt = node.get(word)
            if nxt is not None:
                stack.append((nxt, j + 1, skips, used + (j,)))
            if word in joiners:
                _push_shared_copula(stack, node, tokens, j, skips, used, grammar)
            if skips < max_skips and word in skippable:
                # skip one modifier word; the phrase must still continue after it
                k = j + 1
                if k < n and (node.get(tokens[k]) is not None or tokens[k] in skippable):
                    stack.append((node, k, skips + 1, used))
        found.extend(best.values())
    if len(found) < 2:
        return found  # nothing to drop or reorder (most sentences)
    return _longest_kept(found)


def _push_shared_copula(
    stack: list[tuple[dict[str, Any], int, int, tuple[int, ...]]],
    node: dict[str, Any],
    tokens: Sequence[str],
    j: int,
    skips: int,
    used: tuple[int, ...],
    grammar: NameGrammar,
) -> None:
    """Go on at the copula a second, coordinated subject shares ("the cardiac silhouette [and
    vascularity] are enlarged"), when ``tokens[j]`` (a joiner) starts one."""
    shared = _shared_copula(node, tokens, j, grammar)
    if shared is not None:
        nxt_node, k = shared
        stack.append((nxt_node, k + 1, skips, used + (k,)))


def _match_end(tokens: Sequence[str], used: tuple[int, ...], j: int, joiners: frozenset[str]) -> int:
    """Where a match whose last own token is ``used[-1]`` ends, read up to ``j``: trailing skipped
    modifiers stay in the span ("calcified granuloma, right base") up to a joining word ("effusion
    and patchy left ..." is a new item)."""
    if used[-1] + 1 >= j:
        return j
    end = next((t for t in range(used[-1] + 1, j) if tokens[t] in joiners), j)
    while end < len(tokens) and tokens[end] in joiners and end > used[-1] + 1 and tokens[end - 1] == ",":
        end -= 1  # "tortuosity of the aorta, and ...": the comma still closes the name
    return end


def _longest_kept(found: list[GappedMatch]) -> list[GappedMatch]:
    """The matches, longest first, each kept unless a kept one covers all its tokens; in text order."""
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


def _shared_copula(
    node: dict[str, Any], tokens: Sequence[str], j: int, grammar: NameGrammar
) -> tuple[dict[str, Any], int] | None:
    """(trie node after the copula, index of the copula) when ``tokens[j]`` ("and") starts a second
    subject that shares the copula the phrase continues with; None otherwise."""
    copulas = grammar.copulas
    own = next((node[c] for c in copulas if c in node), None)
    if own is None:
        return None
    for k in range(j + 1, min(j + 2 + MAX_COSUBJECT, len(tokens))):
        word = tokens[k]
        if word in copulas:
            return (own, k) if k > j + 1 else None
        if word in grammar.subject_breaks or not word.isalpha():
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
SPLIT_PREFIXES = (
    "hyper",
    "hypo",
    "over",
    "under",
    "peri",
    "para",
    "retro",
    "sub",
    "supra",
    "infra",
    "intra",
    "non",
    "pseudo",
    "multi",
)  # not "post": "status post surgical removal of ..."


def prefix_variants(tokens: tuple[str, ...]) -> list[tuple[str, ...]]:
    """A phrase with one prefixed word written apart: ("hyperexpanded", "lungs") -> ("hyper",
    "expanded", "lungs"). The rest must be a word of four letters or more."""
    out: list[tuple[str, ...]] = []
    for i, tok in enumerate(tokens):
        for prefix in SPLIT_PREFIXES:
            rest = tok[len(prefix) :]
            if tok.startswith(prefix) and len(rest) >= 4 and rest.isalpha():
                out.append((*tokens[:i], prefix, rest, *tokens[i + 1 :]))
    return out
