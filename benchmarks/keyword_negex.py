"""The trivial baseline every accuracy figure has beside it: keywords + sentence-level NegEx.

Every ontology term (entity names and synonyms) is a keyword; a report is split into sentences;
a keyword found in a sentence is a mention of its entity, *absent* when a NegEx trigger comes
before it in the sentence (Chapman et al. 2001's pre-negation phrases, the common ones) or a
post-trigger follows it ("... is not seen", "... has resolved"), else *present*. No uncertainty,
no sections, no normal statements, no attributes. It returns cxreval ``Extraction`` objects, so it
runs through exactly the same projections and scoring as the rule engine.
"""

from __future__ import annotations

import re

from cxreval.extract.models import Extraction, Mention, constructed
from cxreval.ontology import Ontology

PRE_NEGATION = re.compile(
    r"\b(?:no|not|without|negative for|free of|absence of|rule out|ruled out|resolution of|resolved|"
    r"clear of|no evidence of|no signs? of|denies)\b",
    re.I,
)
POST_NEGATION = re.compile(
    r"^\W*(?:is|are|was|were|has|have)?\s*(?:not seen|not identified|absent|resolved|"
    r"no longer (?:seen|present|visible))",
    re.I,
)
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


WORD = re.compile(r"[a-z0-9]+")
_MENTION_FIELDS = {"entity", "status", "start", "end", "sentence_start", "sentence_end", "source"}
_EXTRACTION_FIELDS = {"engine", "mentions", "text"}


class KeywordNegex:
    """Keyword + sentence NegEx extractor over an ontology's terms (see module doc).

    Terms are looked up as word n-grams in a dict, longest first, only at words that start a term
    and only up to the longest term starting with that word: a report costs about one dict lookup
    per word (not one regex alternation of thousands of terms, nor every n-gram length per word),
    Mentions are built as the rule engine builds its own: one validated mention per status, the
    others copies of it with their entity and offsets (``constructed``), bound to the report text.
    So the baseline is as fast as a plain reading of this kind can be in Python, and the speed
    ratio compares readings, not object construction.
    """

    engine = "keyword-negex@1"

    def __init__(self, ontology: Ontology) -> None:
        self._terms: dict[tuple[str, ...], str] = {}
        for e in ontology.entities:
            for term in [e.name, *e.terms]:
                words = tuple(WORD.findall(term.lower()))
                if words:
                    self._terms.setdefault(words, ontology.precedence.get(term, e.id))
        # first word -> the term lengths starting with it, longest first
        lengths: dict[str, set[int]] = {}
        for words in self._terms:
            lengths.setdefault(words[0], set()).add(len(words))
        self._lengths = {w: sorted(ns, reverse=True) for w, ns in lengths.items()}
        self._like = {status: Mention(entity="x", status=status) for status in ("present", "absent")}

    def extract(self, text: str) -> Extraction:
        mentions = []
        lower = text.lower()
        terms, lengths = self._terms, self._lengths
        for s in SENTENCE.finditer(lower):
            sentence = s.group()
            found = [(w.group(), w.start(), w.end()) for w in WORD.finditer(sentence)]
            words = [w for w, _, _ in found]
            i, n_words = 0, len(words)
            while i < n_words:
                for n in lengths.get(words[i], ()):
                    entity = terms.get(tuple(words[i : i + n])) if i + n <= n_words else None
                    if entity is not None:
                        a, b = found[i][1], found[i + n - 1][2]
                        negated = PRE_NEGATION.search(sentence[:a]) or POST_NEGATION.search(sentence[b:])
                        like = self._like["absent" if negated else "present"]
                        fields = like.__dict__.copy()
                        fields.update(
                            entity=entity,
                            start=s.start() + a,
                            end=s.start() + b,
                            sentence_start=s.start(),
                            sentence_end=s.end(),
                            source=text,
                        )
                        mentions.append(constructed(Mention, fields, _MENTION_FIELDS))
                        i += n
                        break
                else:
                    i += 1
        return constructed(Extraction, {"engine": self.engine, "mentions": tuple(mentions), "text": text}, _EXTRACTION_FIELDS)
