"""Dictation slips in long finding names: "cardiomeagly" read as "cardiomegaly".

A word is read as a word of a finding name when it is long (``min_length`` letters or more), no
word the engine knows (any word of a finding name, cue, word list or attribute phrase, nor one of
the record's ``phrases``), and exactly one edit away from exactly one name word: a letter added,
dropped or changed, or two neighbours swapped (the optimal string alignment distance). The edit
must keep the word's last letter: a different ending is another form of a word ("expanded" and
"expander", "structure" and "structures", "parenchyma" and "parenchymal"), not a slip. Rule ``finding.spelling`` (names.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def one_edit(word: str, other: str) -> bool:
    """Whether ``other`` is one edit from ``word`` (an insertion, deletion, substitution or
    transposition of neighbours) that keeps the last letter (a new ending is another word form)."""
    la, lb = len(word), len(other)
    if word == other or abs(la - lb) > 1 or word[-1:] != other[-1:]:
        return False
    i = 0
    while i < min(la, lb) and word[i] == other[i]:
        i += 1
    if la == lb:
        return word[i + 1 :] == other[i + 1 :] or (
            word[i + 2 :] == other[i + 2 :] and word[i] == other[i + 1] and word[i + 1] == other[i]
        )
    return word[i + 1 :] == other[i:] if la > lb else word[i:] == other[i + 1 :]


class Speller:
    """Reads slips of long finding-name words (see the module doc)."""

    def __init__(self, targets: Iterable[str], known: Iterable[str], min_length: int) -> None:
        self.min_length = min_length
        self.known = frozenset(known)
        self._by_length: dict[int, list[str]] = {}
        for word in sorted(set(targets)):
            if len(word) >= min_length - 1 and word.isalpha():
                self._by_length.setdefault(len(word), []).append(word)
        #: word -> its reading (None: none); a sentence is read once (the sentence cache), but a
        #: word recurs across sentences.
        self._seen: dict[str, str | None] = {}

    def read(self, word: str) -> str | None:
        """The name word ``word`` is a slip of, or None."""
        if len(word) < self.min_length or word in self.known or not word.isalpha():
            return None
        hit = self._seen.get(word, "")
        if hit != "":
            return hit
        found = {t for n in (len(word) - 1, len(word), len(word) + 1) for t in self._by_length.get(n, ()) if one_edit(word, t)}
        reading = found.pop() if len(found) == 1 else None
        if len(self._seen) > 65536:
            self._seen.clear()
        self._seen[word] = reading
        return reading

    def correct(self, words: Sequence[str]) -> tuple[list[str], frozenset[int]] | None:
        """``words`` with each slip read as its name word, and the indices read so; None when no
        word is a slip (the usual case: no copy is made)."""
        fixed: list[str] | None = None
        where: set[int] = set()
        for i, word in enumerate(words):
            reading = self.read(word) if len(word) >= self.min_length else None
            if reading is not None:
                if fixed is None:
                    fixed = list(words)
                fixed[i] = reading
                where.add(i)
        return None if fixed is None else (fixed, frozenset(where))
