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


class KeywordNegex:
    """Keyword + sentence NegEx extractor over an ontology's terms (see module doc)."""

    engine = "keyword-negex@1"

    def __init__(self, ontology: Ontology) -> None:
        owner: dict[str, str] = {}
        for e in ontology.entities:
            for term in [e.name.lower(), *e.terms]:
                owner.setdefault(term, ontology.precedence.get(term, e.id))
        terms = sorted(owner, key=len, reverse=True)  # longest first: "pleural effusion" before "effusion"
        words = (r"[\s-]+".join(re.escape(w) for w in t.split()) for t in terms)
        self._pattern = re.compile(r"\b(?:" + "|".join(words) + r")\b", re.I)
        self._owner = {re.sub(r"[\s-]+", " ", t): e for t, e in owner.items()}

    def extract(self, text: str) -> Extraction:
        mentions = []
        for s in SENTENCE.finditer(text):
            sentence = s.group()
            for m in self._pattern.finditer(sentence):
                entity = self._owner.get(re.sub(r"[\s-]+", " ", m.group().lower()))
                if entity is None:
                    continue
                negated = PRE_NEGATION.search(sentence[: m.start()]) or POST_NEGATION.search(sentence[m.end():])
                mentions.append(Mention(entity=entity, status="absent" if negated else "present",
                                        start=s.start() + m.start(), end=s.start() + m.end(),
                                        sentence_start=s.start(), sentence_end=s.end()))
        return Extraction(engine=self.engine, mentions=tuple(mentions), text=text)
