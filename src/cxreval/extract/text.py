"""Splitting a report into sections and tokens.

Only the sections that state findings (findings, impression and untitled text) are read for
entities: an indication such as "rule out pneumonia" is a question, not a finding.
"""

from __future__ import annotations

import re
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


def split_sections(text: str) -> list[Section]:
    """Return the spans of ``text`` to read for findings, each with its section name."""
    sections: list[Section] = []
    current: str | None = "body"
    pos = 0
    for match in _TITLE_RE.finditer(text):
        if current is not None and match.start() > pos and text[pos : match.start()].strip():
            sections.append(Section(current, pos, match.start()))
        current = SECTION_TITLES[match.group(1).lower()]
        pos = match.end()
    if current is not None and text[pos:].strip():
        sections.append(Section(current, pos, len(text)))
    return sections


class Token(NamedTuple):
    text: str
    start: int
    end: int


# Numbers keep their decimals ("1.5"); words keep internal apostrophes; hyphens and slashes
# separate words (so "right-sided" == "right sided"); other punctuation is a token of its own.
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|[a-z]+(?:'[a-z]+)?|[.,;:!?()\[\]]")


def tokenize(text: str, offset: int = 0) -> list[Token]:
    """Lower-case word and punctuation tokens with character offsets into the original text."""
    lowered = text.lower()
    out: list[Token] = []
    for m in _TOKEN_RE.finditer(lowered):
        tok = m.group()
        if tok in "!?":
            tok = "."
        out.append(Token(tok, m.start() + offset, m.end() + offset))
    return out


def term_tokens(term: str) -> tuple[str, ...]:
    """Tokens of a lexicon phrase, tokenised exactly as report text is."""
    return tuple(t.text for t in tokenize(term))
