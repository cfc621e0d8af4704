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

from cxreval.extract.models import Extraction, Mention
from cxreval.ontology import Ontology

PRE_NEGATION = re.compile(
    r"\b(?:no|not|without|negative for|free of|absence of|rule out|ruled out|resolution of|resolved|"
    r"clear of|no evidence of|no signs? of|denies)\b", re.I)
POST_NEGATION = re.compile(r"^\W*(?:is|are|was|were|has|have)?\s*(?:not seen|not identified|absent|resolved|"
                           r"no longer (?:seen|present|visible))", re.I)
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


WORD = re.compile(r"[a-z0-9]+")


class KeywordNegex:
    """Keyword + sentence NegEx extractor over an ontology's terms (see module doc).

    Terms are looked up as word n-grams in a dict (longest first at each word), so reading a report
    costs a few dict lookups per word, not one regex alternation of thousands of terms.
    """

    engine = "keyword-negex@1"

    def __init__(self, ontology: Ontology) -> None:
        self._terms: dict[tuple[str, ...], str] = {}
        for e in ontology.entities:
            for term in [e.name, *e.terms]:
                words = tuple(WORD.findall(term.lower()))
                if words:
                    self._terms.setdefault(words, ontology.precedence.get(term, e.id))
        self._longest = max(map(len, self._terms))

    def extract(self, text: str) -> Extraction:
        mentions = []
        lower = text.lower()
        for s in SENTENCE.finditer(lower):
            sentence = s.group()
            words = [(w.group(), w.start(), w.end()) for w in WORD.finditer(sentence)]
            i = 0
            while i < len(words):
                for n in range(min(self._longest, len(words) - i), 0, -1):
                    entity = self._terms.get(tuple(w for w, _, _ in words[i : i + n]))
                    if entity is not None:
                        a, b = words[i][1], words[i + n - 1][2]
                        negated = PRE_NEGATION.search(sentence[:a]) or POST_NEGATION.search(sentence[b:])
                        mentions.append(Mention(entity=entity, status="absent" if negated else "present",
                                                start=s.start() + a, end=s.start() + b,
                                                sentence_start=s.start(), sentence_end=s.end()))
                        i += n
                        break
                else:
                    i += 1
        return Extraction(engine=self.engine, mentions=tuple(mentions), text=text)
