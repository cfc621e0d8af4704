"""Normalising a report, and splitting it into sections and tokens.

Only the sections that state findings (findings, impression and untitled text) are read for
entities: an indication such as "rule out pneumonia" is a question, not a finding.

The engine reads a normalised copy of the report (:func:`normalize`): NFKC, invisible format
characters and combining diacritics removed, case-folded, letters of another script inside a Latin
word folded to the Latin letter they look like (Unicode's confusables data), and the full stops of
a few abbreviations ("vs.", "e.g.") read as spaces, so they end no sentence. Every offset it reports
is mapped back to the original text, so evidence is always a slice of what the user wrote.
"""

from __future__ import annotations

import json
import re
import unicodedata
from array import array
from collections.abc import Iterator, Sequence
from functools import cache
from importlib import resources
from typing import NamedTuple

# Section titles and the section each one opens. Titles outside this map end the previous section
# and are skipped; "body" is text before any title.
SECTION_TITLES: dict[str, str | None] = {
    "findings": "findings",
    "finding": "findings",
    "impression": "impression",
    "impressions": "impression",
    "conclusion": "impression",
    "conclusions": "impression",
    "summary": "impression",
    "opinion": "impression",
    "interpretation": "impression",
    "comparison": None,
    "comparisons": None,
    "indication": None,
    "indications": None,
    "history": None,
    "clinical history": None,
    "clinical indication": None,
    "clinical information": None,
    "reason for exam": None,
    "reason for examination": None,
    "technique": None,
    "examination": None,
    "exam": None,
    "procedure": None,
    "recommendation": None,
    "recommendations": None,
    "context": None,
}

_TITLE_RE = re.compile(
    r"(?:^|(?<=[\s.;]))(" + "|".join(sorted((re.escape(t) for t in SECTION_TITLES), key=len, reverse=True)) + r")\s*:",
    re.IGNORECASE,
)


class Section(NamedTuple):
    name: str
    start: int
    end: int


# Titles by their last letter, longest first (a title is found from the ":" after it).
_TITLES_ENDING: dict[str, list[str]] = {}
for _title in sorted(SECTION_TITLES, key=len, reverse=True):
    _TITLES_ENDING.setdefault(_title[-1], []).append(_title)


def _titles(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, title)`` of each ``_TITLE_RE`` match in ``text``, faster for lower-case
    ASCII text (the common case: the engine reads case-folded text).

    A match is a title, spaces and a ":", so each ":" is looked at once: the spaces before it are
    skipped and the longest title ending there whose start ``_TITLE_RE``'s lookbehind accepts is
    the match (the leftmost start, as ``finditer`` finds it; no match holds a ":" but its last, so
    matches of successive colons never overlap). Case-sensitive comparison equals the pattern's
    case-insensitive one only where the text has no upper-case letter, and no non-ASCII letter
    (the dotless "ı" matches "i" case-insensitively): any other text takes the pattern itself.
    """
    if not (text.isascii() and text.islower()):
        for match in _TITLE_RE.finditer(text):
            yield match.start(), match.end(), match.group(1)
        return
    pos = 0
    colon = text.find(":")
    while colon >= 0:
        q = colon
        while q > pos and text[q - 1].isspace():  # str.isspace is the pattern's \s
            q -= 1
        if q > pos:
            for title in _TITLES_ENDING.get(text[q - 1], ()):
                p = q - len(title)
                if p >= pos and text.startswith(title, p) and (p == 0 or text[p - 1].isspace() or text[p - 1] in ".;"):
                    yield p, colon + 1, title
                    pos = colon + 1
                    break
        colon = text.find(":", colon + 1)


def split_sections(text: str) -> list[Section]:
    """Return the spans of ``text`` to read for findings, each with its section name.

    A skipped section (indication, history, comparison, technique) runs to the next title. In a
    report with no Findings title, one before any Impression ends at its first blank line, and the
    paragraph after it is read as untitled text ("INDICATION: cough.\n\nThe lungs are clear."
    reads the lungs): there the findings have nowhere else to be. Where a Findings title follows,
    a second paragraph is more indication or history ("Evaluate for pneumonia.", "Prior pneumonia
    2019."), and reading it would overrule the findings.
    """
    sections: list[Section] = []
    current: str | None = "body"
    pos = 0
    titles = list(_titles(text))
    release = not any(SECTION_TITLES[t.lower()] == "findings" for _, _, t in titles)
    for start, end, title in titles:
        _add_section(sections, text, current, pos, start, release)
        current = SECTION_TITLES[title.lower()]
        release = release and current is None  # nothing released after an Impression
        pos = end
    _add_section(sections, text, current, pos, len(text), release)
    return sections


#: A blank line: a line break, then a line of spaces only, then another line break.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")


def _add_section(sections: list[Section], text: str, name: str | None, start: int, end: int, release: bool) -> None:
    """Append ``text[start:end]`` as section ``name`` if it holds text. A skipped one (``name``
    None) adds nothing, or with ``release`` the text after its first blank line, as untitled text."""
    if name is None:
        if not release or text.find("\n", start, end) < 0:
            return  # one paragraph (most reports, all one line): skipped whole
        # the first blank line after the skipped paragraph's text ("INDICATION:\n\ncough\n\n...":
        # not the one between the title and its text)
        blank = _PARAGRAPH_BREAK.search(text, _first_text(text, start, end), end)
        if blank is None:
            return
        start, name = blank.end(), "body"
    if start < end and text[start:end].strip():
        sections.append(Section(name, start, end))


def _first_text(text: str, start: int, end: int) -> int:
    """Where the first character that is no space lies in ``text[start:end]`` (``end`` if none)."""
    m = _NON_SPACE.search(text, start, end)
    return m.start() if m else end


_NON_SPACE = re.compile(r"\S")


class Token(NamedTuple):
    text: str
    start: int
    end: int


class NormalizedText:
    """A report as the engine reads it, with a map from its offsets back to the original.

    ``text`` is ``original`` with each character cluster (a character and the combining marks that
    follow it) put in NFKC form and case-folded, and with format characters (Unicode category Cf:
    zero-width space / joiners, word joiner, byte-order mark, soft hyphen, bidi marks) removed:
    they are invisible, so "pneu<soft hyphen>mothorax" must read as "pneumothorax". Folding changes
    lengths ("İ" -> "i", "ﬁ" -> "fi", "ß" -> "ss"), hence the map; ASCII text, the common case,
    is only lower-cased and needs none. Combining diacritics are removed ("pneumótho\u0301rax" reads
    "pneumothorax"), and a letter of another script inside a word that holds Latin letters is
    folded to the Latin letter it looks like (a Cyrillic "о" in "pneumоthorax"): one character for
    one, so the map is unchanged. ``lookalikes`` counts the letters of another script so folded and
    the separate combining marks so removed (a precomposed "ö" is folded but not counted): a report
    that holds any may be hiding a finding from a reader, and callers warn or penalise. The
    full stops of "vs.", "approx.", "e.g.", "i.e." and "cf." become spaces (same length).
    """

    __slots__ = ("ends", "lookalikes", "original", "starts", "text")

    def __init__(
        self,
        original: str,
        text: str,
        starts: Sequence[int] | None = None,
        ends: Sequence[int] | None = None,
        lookalikes: int = 0,
    ) -> None:
        self.original = original
        self.text = text
        self.lookalikes = lookalikes
        # starts[i]: where the original cluster of normalised character i starts (a span's start
        # maps through it); ends[j]: where the cluster of character j - 1 ends (a span's end).
        # Ranges when the map is the identity: no memory, and indexing stays in C.
        self.starts: Sequence[int] = range(len(text)) if starts is None else starts
        self.ends: Sequence[int] = range(len(text) + 1) if ends is None else ends

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of the normalised span ``[start, end)``."""
        return self.starts[start], self.ends[end]


# A run of non-ASCII characters with the character before it (a base its combining marks follow).
_NON_ASCII = re.compile(r"[\x00-\x7f]?[^\x00-\x7f]+")
# "İ" case-folds to "i" + a combining dot, which would split the word it is in.
_PRE_FOLD = str.maketrans({"\u0130": "I"})


# Combining diacritics (U+0300-036F and their supplements): removed where what is left is a plain
# Latin letter, so that an accent put on a letter ("pneumo\u0301thorax") hides no word; the marks of
# other scripts' letters ("й") stay.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def _fold(cluster: str) -> tuple[str, int]:
    """A character cluster as the engine reads it, and 1 where a Latin letter carried separate
    combining marks ("o" + U+0301), read as the plain letter, else 0. A precomposed letter ("ö" of
    Löfgren, Sjögren) is read as the plain letter too but not counted: people write it."""
    kept = "".join(c for c in cluster if unicodedata.category(c) != "Cf")
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", kept).translate(_PRE_FOLD).casefold())
    if folded.isascii():
        return folded, 0
    bare = _DIACRITICS.sub("", unicodedata.normalize("NFD", folded))
    if not (bare.isascii() and bare.isalpha()):
        return folded, 0  # another script's letter ("й", "ά"): its marks are part of it
    return bare, int(len(cluster) > 1 and any(unicodedata.combining(c) for c in cluster[1:]))


@cache
def lookalike_letters() -> dict[str, str]:
    """Lower-case letter of another script -> the ASCII letter it looks like, from Unicode's
    confusables data (the ``confusable-homoglyphs`` package's copy); read once, when a report
    first holds a word mixing scripts. Only a lower-case letter that looks like a lower-case ASCII
    letter is kept: the engine reads case-folded text, and a look-alike of a capital says nothing
    of the small letter ("М" looks like "M", "м" like no "m"; "μ" of "μm" is no "m")."""
    data = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    table: dict[str, str] = {}
    for char, glyphs in data.items():
        if len(char) != 1 or char.isascii() or char != char.casefold() or not char.isalpha():
            continue
        latin = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].islower()]
        if latin:
            table[char] = latin[0]
    return table


_LETTERS = re.compile(r"[^\W\d_]+")


def _fold_lookalikes(folded: str) -> tuple[str, int]:
    """``folded`` with each letter of another script that stands in a word holding ASCII letters
    replaced by the ASCII letter it looks like (one character for one), and how many were."""
    pieces: list[str] = []
    pos = count = 0
    for word in _LETTERS.finditer(folded):
        w = word.group()
        if w.isascii() or not any("a" <= c <= "z" for c in w):
            continue
        table = lookalike_letters()
        latin = "".join(c if c.isascii() else table.get(c, c) for c in w)
        if latin != w:
            pieces += [folded[pos : word.start()], latin]
            pos = word.end()
            count += sum(a != b for a, b in zip(w, latin))
    return ("".join(pieces) + folded[pos:], count) if pieces else (folded, 0)


# Abbreviations whose full stops end no sentence ("atelectasis vs. pneumonia", "e.g. a PICC"):
# each "." in them is read as a space (same length, so offsets need no map).
_ABBREVIATION = re.compile(r"\b(?:vs|approx|e\.g|i\.e|cf)\.(?=[\s,;:(]|$)")


def _unstop(folded: str) -> str:
    """``folded`` with the full stops of abbreviations (``_ABBREVIATION``) made spaces."""
    if "." not in folded or _ABBREVIATION.search(folded) is None:
        return folded
    return _ABBREVIATION.sub(lambda m: m.group().replace(".", " "), folded)


def normalize(text: str) -> NormalizedText:
    """``text`` as the engine reads it; see :class:`NormalizedText`."""
    if text.isascii():
        return NormalizedText(text, _unstop(text.lower()))
    parts: list[str] = []
    starts, ends = array("q"), array("q", [0])
    pos = diacritics = 0
    for run in _NON_ASCII.finditer(text):
        a, b = run.span()
        if a > pos:
            parts.append(text[pos:a].lower())
            starts.extend(range(pos, a))
            ends.extend(range(pos + 1, a + 1))
        i = a
        while i < b:
            j = i + 1
            while j < b and unicodedata.combining(text[j]):
                j += 1
            piece, accented = _fold(text[i:j])
            diacritics += accented
            parts.append(piece)
            starts.extend([i] * len(piece))
            ends.extend([j] * len(piece))
            i = j
        pos = b
    if pos < len(text):
        parts.append(text[pos:].lower())
        starts.extend(range(pos, len(text)))
        ends.extend(range(pos + 1, len(text) + 1))
    folded, letters = _fold_lookalikes("".join(parts))
    return NormalizedText(text, _unstop(folded), starts, ends, diacritics + letters)


def lookalike_count(text: str) -> int:
    """How many letters of ``text`` the engine reads as other letters they only look like
    (:class:`NormalizedText`): 0 for plain text."""
    return 0 if text.isascii() else normalize(text).lookalikes


# Numbers keep their decimals ("1.5"); words keep internal apostrophes; hyphens and slashes
# separate words (so "right-sided" == "right sided"); other punctuation is a token of its own.
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|[a-z]+(?:'[a-z]+)?|[.,;:!?()\[\]]")


def scan_tokens(folded: str, pos: int = 0, endpos: int | None = None) -> list[Token]:
    """Tokens of ``folded[pos:endpos]`` (already normalised), with offsets into ``folded``."""
    end = len(folded) if endpos is None else endpos
    # tuple.__new__ directly: a NamedTuple's own constructor is a Python function, called per token.
    out = [_new_tuple(Token, (m.group(), *m.span())) for m in _TOKEN_RE.finditer(folded, pos, end)]
    if folded.find("!", pos, end) >= 0 or folded.find("?", pos, end) >= 0:
        out = [Token(".", t.start, t.end) if t.text in ("!", "?") else t for t in out]
    return out


_new_tuple = tuple.__new__

#: Tokens as three columns: their texts, starts and ends (offsets into the folded text).
TokenColumns = tuple[list[str], list[int], list[int]]


def token_columns(folded: str, pos: int = 0, endpos: int | None = None) -> TokenColumns:
    """``scan_tokens(folded, pos, endpos)`` as columns, without a tuple per token.

    The texts come from one ``findall``; each start is where its text is next found. No character
    between two tokens can begin a token (else a token would begin there), so the next occurrence
    of a token's text is the token itself.
    """
    end = len(folded) if endpos is None else endpos
    words: list[str] = _TOKEN_RE.findall(folded, pos, end)
    starts: list[int] = []
    ends: list[int] = []
    find = folded.find
    at = pos
    for word in words:
        at = find(word, at)
        starts.append(at)
        at += len(word)
        ends.append(at)
    if folded.find("!", pos, end) >= 0 or folded.find("?", pos, end) >= 0:
        words = ["." if w in ("!", "?") else w for w in words]
    return words, starts, ends


# A "." token (or "!", "?") and the numbers before it: ``_TOKEN_RE``'s number (a digit, then
# ``\d*(?:\.\d+)?``, ``\d+(?:\.\d+)?`` in all), so the "." inside "1.5" is part of a number here
# too. No other token holds a digit or one of ".!?", so the sentence ends found are those of
# ``scan_tokens``. Led by one character class, so the engine skips other characters in C.
_STOP_RE = re.compile(r"[\d.!?](?:(?<=\d)\d*(?:\.\d+)?)?")


def sentence_spans(folded: str, pos: int = 0, endpos: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``folded[pos:endpos]``: from the start of a sentence's first token to the
    end of its last (its "." token), as splitting ``scan_tokens(folded, pos, endpos)`` after each
    "." token would give them, without making a token of every word.

    ``scan_tokens(folded, start, end)`` of a span gives that sentence's tokens.
    """
    end = len(folded) if endpos is None else endpos
    spans: list[tuple[int, int]] = []
    first = _TOKEN_RE.search
    q = pos
    for m in _STOP_RE.finditer(folded, pos, end):
        stop = m.end()
        if folded[stop - 1] in ".!?":  # a full stop, not a number (a number ends with a digit)
            head = first(folded, q, stop)
            if head is None:  # the stop is a token: never
                raise AssertionError(f"no token before the full stop at {stop}")
            spans.append((head.start(), stop))
            q = stop
    tail = scan_tokens(folded, q, end)
    if tail:
        spans.append((tail[0].start, tail[-1].end))
    return spans


def tokenize(text: str, offset: int = 0) -> list[Token]:
    """Normalised word and punctuation tokens with character offsets into the original text."""
    norm = normalize(text)
    starts, ends = norm.starts, norm.ends
    return [Token(t.text, starts[t.start] + offset, ends[t.end] + offset) for t in scan_tokens(norm.text)]


def term_tokens(term: str) -> tuple[str, ...]:
    """Tokens of a lexicon phrase, tokenised exactly as report text is."""
    return tuple(t.text for t in scan_tokens(normalize(term).text))
