"""The offline rule engine: ontology synonyms + ConText-style cues -> entity mentions.

How a sentence is read:
1. Entity names are found as whole token sequences, longest first (a trie over the ontology's
   synonyms and their regular plurals).
2. Each mention looks backwards for a cue (negation, hedge, history, or a pseudo-negation such
   as "no change in" that cancels one) until a clause terminator; the nearest cue wins. Lists
   stay in scope ("no effusion, pneumothorax or consolidation") unless an item carries its own
   severity ("no pneumothorax, mild cardiomegaly"). Failing that it looks a few tokens forward
   for a post-cue ("pneumothorax is not seen", "pneumonia cannot be excluded"); a predicate
   negation reaches further ("pneumonia seen on the prior CT is not seen on this study"). A
   hypothetical cue ("more sensitive to identify", "if there is") drops the mention; a removal
   noun right after a name ("chest tube removal") denies it.
3. Two findings joined as alternatives ("atelectasis or pneumonia") are both uncertain.
   A hedge carries its cue's grade (``cues.yaml``: probable / possible / alternative), an
   alternative the grade ``alternative``; present is ``definite``, absent ``negated``.
4. Side, zone and severity come from the words around the mention inside its clause; the
   comparison with a prior comes from the nearest change word in the clause.
5. Global normal statements ("no acute cardiopulmonary process") imply the absence of the
   entities the rule file lists for them.

The text is read normalised (``text.normalize``: NFKC, invisible characters removed, case-folded)
and every offset is mapped back, so a mention's evidence is the original text. A mention stores
offsets, not text; its evidence is the sentence around it (see ``_scopes``: a sentence longer
than ``MAX_SCOPE_CHARS`` is cut at a clause boundary), so memory stays linear in the report.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from operator import itemgetter
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cxreval.extract.lexicon import GappedMatch, PhraseTrie, plural_variants, prefix_variants, scan_gapped
from cxreval.extract.models import HEDGE_GRADES, Extraction, Mention, constructed
from cxreval.extract.text import (
    NormalizedText,
    Section,
    TokenColumns,
    normalize,
    sentence_spans,
    split_sections,
    term_tokens,
    token_columns,
)
from cxreval.ontology import Ontology, load_ontology
from cxreval.ontology.attributes import attribute_vocabulary

RULES_VERSION = "26"  # what each version changed: docs/engine.md, one section per version range

_NEG_PRE = "negation_pre"
_NEG_POST = "negation_post"
_PSEUDO = "pseudo_negation"
_UNC_PRE = "uncertain_pre"
_UNC_POST = "uncertain_post"
_HIST = "historical_pre"
_TERM = "terminators"
_ALT = "alternatives"
_HYP = "hypothetical_pre"
_REMOVAL = "removal_post"
# A word that denies only the finding named right after it: IU X-ray's "lungs are clear airspace
# disease" (its "of" dropped); "lungs are clear, cardiomegaly is present" keeps the finding.
_NEG_NEXT = "negation_adjacent"
# A prefix written apart that denies the finding word it stands before: "non-enlarged heart",
# "non-dilated loops of bowel" (hyphens are spaces to the tokenizer). A name that holds the prefix
# itself ("non-calcified nodule", a form of "noncalcified nodule") is matched whole and not denied.
_NEG_PREFIX = "negation_prefix"
# A phrase holding a cue word that is no cue ("previously noted"): no rule reads this kind; being
# matched as one longer phrase, it hides the cue inside it from the longest-match cue scan.
_NOT_CUE = "not_cues"
#: The value of a ``not_findings`` name in the entity trie: no entity id (ids are non-empty).
_NOT_A_FINDING = ""
_CUE_KINDS = (_NEG_PRE, _NEG_POST, _PSEUDO, _UNC_PRE, _UNC_POST, _HIST, _TERM, _ALT, _HYP, _REMOVAL, _NOT_CUE,
              _NEG_NEXT, _NEG_PREFIX)
_VOCAB_KINDS = ("sides", "zones", "severity", "comparison")
# Hedge kinds whose entries carry a certainty grade (a mapping grade -> phrases in cues.yaml).
_GRADED_KINDS = (_UNC_PRE, _UNC_POST)
_ALTERNATIVE = "alternative"  # the grade of two findings offered as alternatives ("X versus Y")
_UNGRADED = "possible"  # the grade of a hedge listed without one (a plain list in a user's cue file)

# How many modifier words may stand inside one multi-word entity name.
MAX_SKIPPED = 3
# How far cues reach, in tokens.
PRE_SCOPE = 14
POST_SCOPE = 6
# A post-negation that is the predicate of the finding ("pneumonia seen on the prior CT is not seen
# on this study") reaches further: the cue must then start with one of these verbs.
POST_SCOPE_PREDICATE = 10
# ("is not" alone is too weak that far: "volume loss seen on CT is not as well demonstrated").
_PREDICATE_VERBS = frozenset({"is", "are", "has", "have", "was", "were"})
_BARE_COPULA = frozenset({"is not", "are not"})
# Words that describe a finding rather than deny it after a bare negated copula: "the nodule is not
# calcified", "the effusion is not loculated", "the fracture is not displaced" state the finding.
_DESCRIPTORS = frozenset({"calcified", "loculated", "displaced", "kinked", "comminuted", "acute", "chronic", "old", "healed",
                          "healing", "new", "cavitary", "cavitating", "complex", "tortuous", "ectatic", "dense",
                          "focal", "patchy", "diffuse", "bilateral", "severe", "massive", "moderate", "mild",
                          "small", "tiny", "trace", "minimal"})
#: Alternatives that always offer a differential, whatever the other side names ("or" needs a
#: finding there: "effusion or thickening", not "no change in effusion or position of the tube").
_VERSUS = frozenset({"versus", "vs"})
#: Words that describe a finding without naming it, after a negating prefix or "is not a", where
#: the rest of the name names no finding: "non-layering fluid", "non-loculated fluid".
_PREFIX_DESCRIPTORS = frozenset({"loculated", "layering", "lytic", "sclerotic", "blastic", "expansile"})
#: Words after "is not a" that describe the finding named after them, so the denial is of the
#: description ("this is not a displaced fracture"); "pleural" in "not a pleural effusion" names.
_ADJECTIVES_ONLY = _DESCRIPTORS - {"tortuous", "ectatic", "cavitary", "cavitating", "calcified"} | _PREFIX_DESCRIPTORS
#: Words after "X is not a" that judge the finding, not deny it: "cardiomegaly is not a new finding",
#: "atelectasis is not an unexpected finding after CABG" ("pneumothorax is not a concern" denies it).
_NOT_A_JUDGES = frozenset({"new", "acute", "unexpected", "unusual", "surprising", "uncommon", "rare",
                           "contraindication", "emergency"})
#: What follows "vs" / "versus" when it compares with an earlier exam, not another diagnosis.
_EARLIER_EXAM = frozenset({"prior", "previous", "previously", "yesterday", "today", "comparison", "baseline", "the",
                           "last", "recent", "earlier", "that", "those", "outside", "initial", "admission", "osh",
                           "old", "preop", "postop", "preoperative", "postoperative"})
#: Words naming an exam or a time, within three words after "vs": "vs. CT of 3/4/2021", "vs. two days ago".
_EXAM_WORDS = frozenset({"film", "films", "study", "studies", "exam", "exams", "examination", "radiograph",
                         "radiographs", "image", "images", "ct", "cxr", "xr", "ago", "admission", "morning", "evening",
                         "day", "days", "week", "weeks", "month", "months", "january", "february", "march", "april",
                         "june", "july", "august", "september", "october", "november", "december"})
#: Words that open a condition: "if this is not a pneumothorax, ..." states nothing.
_CONDITIONS = frozenset({"if", "whether", "unless"})


def _says_what_it_is_not(words: list[str], cue_at: list[dict[str, Any] | None], entity_at: list[int], j: int) -> bool:
    """Whether the words from ``j``, right after "X is not a", say what X is not, so X is stated: a
    finding named within three words ("the opacity is not a true nodule"), a size ("the effusion is
    not a large one") or a judgement of it ("cardiomegaly is not a new finding")."""
    if words[j] in _NOT_A_JUDGES or _is_size(cue_at, j):
        return True
    return any(entity_at[k] >= 0 for k in range(j, min(len(words), j + 3)))


def _sized_next(words: list[str], cue_at: list[dict[str, Any] | None], j: int) -> bool:
    """Whether the item from ``j`` (after "or" / "and") opens with a size of its own, an article
    allowed before it: "atelectasis or (a) small effusion" (the size is the effusion's)."""
    if j < len(words) and words[j] in _ARTICLES:
        j += 1
    return _is_size(cue_at, j)


def _is_size(cue_at: list[dict[str, Any] | None], j: int) -> bool:
    """Whether token ``j`` (past the end: no) is a size word ("large", "mild")."""
    kinds = cue_at[j] if j < len(cue_at) else None
    return kinds is not None and "severity" in kinds


def _copula_keeps(words: list[str], cue_at: list[dict[str, Any] | None], entity_at: list[int], j: int) -> bool:
    """Whether the words from ``j``, right after a finding's bare "is not" / "are not", say what the
    finding is not rather than deny it, so it is stated: a description ("the nodule is not
    calcified", "consolidation is not (as) extensive"), a place ("the ET tube is not in the right
    mainstem bronchus"; "not in evidence" denies) or what it is not ("the opacity is not a nodule",
    see :func:`_says_what_it_is_not`)."""
    n = len(words)
    if j >= n:
        return False
    after = j + 1 if j + 1 < n and words[j] in _DEGREE_WORDS else j
    if words[after] in _DESCRIPTORS or _is_size(cue_at, after):
        return True
    if j + 1 >= n:
        return False
    if words[j] in _WHERE_WORDS:
        return words[j : j + 2] != ["in", "evidence"]
    return words[j] in _ARTICLES and _says_what_it_is_not(words, cue_at, entity_at, j + 1)


def _earlier_exam(words: list[str], j: int) -> bool:
    """Whether the words from ``j``, right after "vs", compare with an earlier exam ("vs prior",
    "vs 1/2/2020", "vs. outside films", "vs. two days ago") rather than name another diagnosis."""
    return (words[j] in _EARLIER_EXAM or words[j][:1].isdigit()
            or not _EXAM_WORDS.isdisjoint(words[j : j + 3]))


def _in_condition(words: list[str], i: int) -> bool:
    """Whether a condition word opens the clause before position ``i`` ("if this is not a ...")."""
    j = i - 1
    while j >= 0 and words[j] not in _CLAUSE_BREAK:
        if words[j] in _CONDITIONS:
            return True
        j -= 1
    return False


#: Prepositions after "X is not": the sentence says where X is not, so X is stated ("the ET tube is
#: not in the right mainstem bronchus", "the pneumothorax is not under tension"); "not in evidence" denies.
_WHERE_WORDS = frozenset({"in", "within", "at", "into", "beyond", "below", "above", "under", "over", "near", "along",
                          "across", "through", "past", "inside", "outside", "against"})
#: Indefinite articles between a negated copula and what it denies: "this is not a pneumothorax".
_ARTICLES = frozenset({"a", "an"})
_PLURAL_VERBS = frozenset({"are", "have", "were"})
# Values that deny a finding named as a label: "Pneumothorax: none".
_LABEL_NEGATIONS = frozenset({"none", "no", "negative", "absent", "nil"})
# How many entity names a cue reaches across ("no pleural effusion pneumothorax"): crossing a name
# costs no step, so without this cap a run of names takes quadratic time.
MAX_ENTITY_HOPS = 14
ATTRIBUTE_BACK = 5
ATTRIBUTE_FORWARD = 6
# A site or character that moves a finding to another entity may close a longer predicate: "nodules
# in the left base are XXXX calcified".
SITE_FORWARD = 8
# A change clause may close a long finding phrase: "markings in both lower lungs, worse than before".
COMPARISON_FORWARD = 12
# ... and a change noun may open one: "interval increase in the size of the right pleural effusion".
COMPARISON_BACK = 8
# Tokens that end the window in which attributes are looked for.
_CLAUSE_BREAK = frozenset({".", ";", ":", ","})
# Words that open a contrasting clause: attributes do not cross them in either direction ("no
# pneumothorax but there is a small left effusion": the pneumothorax is neither small nor left).
_CONTRAST_BREAK = frozenset({"but", "however", "although", "though", "whereas", "except"})
_CONJUNCTIONS = frozenset({"and", "or", "nor"})
# Participles that close a negated clause before a comma ("no effusion seen, ..."): a denial does
# not reach a finding listed after them ("no effusion seen, left hilar calcifications").
_CLOSING_VERBS = frozenset({"seen", "identified", "noted", "visualized", "demonstrated", "appreciated", "evident",
                            "detected", "present"})
# ... unless the participle belongs to an aside: "no effusion, as previously noted, or pneumothorax"
_ASIDE_OPENERS = frozenset({"previously", "as", "earlier", "formerly", "initially"})
# ... nor when the words after the comma spell out what is denied: "no acute abnormality identified,
# such as / including / specifically pneumonia"
# Cue kinds that open a statement of its own (a hedge, a denial, a verb ending a clause): an "or"
# after one joins that statement's alternatives, not a list of what an earlier denial names.
_STATEMENT_KINDS = frozenset({_NEG_PRE, _NEG_POST, _UNC_PRE, _UNC_POST, _TERM, _HYP, _HIST})
_LIST_OPENERS = frozenset({"such", "including", "specifically", "namely", "particularly", "especially"})
# Size words that routinely sit inside a negated list ("no consolidation, large effusion, or
# pneumothorax") and so do not mark a list item as a separate, affirmed finding.
_NEGATED_LIST_SIZES = frozenset({"large", "significant", "moderate", "sizable", "massive", "extensive"})
_FORWARD_BREAK = frozenset({"and", "with"})
# ... and "or" / "nor" before a size word: "no pneumothorax or large effusion" (the pneumothorax is
# not large), while "pneumothorax or skin fold on the left" keeps its side.
_ALTERNATIVE_BREAK = frozenset({"or", "nor"})

# Evidence scopes: a sentence longer than this (characters of the original text) is cut, at the
# last clause boundary that keeps the piece under it (";", ":" or a line break, else a comma),
# else at the last token that fits. The longest IU X-ray sentence has 262 characters.
MAX_SCOPE_CHARS = 400
#: Distinct sentences whose mentions a RuleExtractor keeps (0: no cache).
SENTENCE_CACHE = 50_000
#: Distinct reports whose extraction a RuleExtractor keeps (0: none; it is off with the sentence cache).
REPORT_CACHE = 10_000
_STRONG_BREAK = frozenset({";", ":"})


class RulesError(ValueError):
    """A rule file that cannot be used."""


@dataclass(frozen=True)
class NormalStatement:
    """A sentence pattern that implies the absence of a list of entities."""

    pattern: re.Pattern[str]
    entities: tuple[str, ...]
    #: Words one of which every match contains (lower case); a section holding none of them is
    #: not searched (a fast substring test instead of a regex scan). Empty: always searched.
    requires: tuple[str, ...] = ()
    #: No match can hold a full stop or look past one (:func:`_within_full_stops`): with
    #: ``requires``, only the pieces of a section between full stops that hold a word are searched.
    local: bool = False


@dataclass(frozen=True)
class SiteRule:
    """A finding whose site (or character), named in its clause, makes it another entity.

    The ontology splits some findings by site: bare "degenerative changes" is the spine's by
    convention, but "degenerative changes of the right shoulder" is degenerative joint disease;
    a lung nodule is one not known to be calcified, so a nodule "that appears calcified" is a
    calcified nodule. ``words`` name the other site; ``unless`` words in the same window keep the
    entity ("degenerative changes of the spine and shoulders", "not calcified").
    """

    to: str
    #: Each a token or two tokens joined by a space: "T12" is read as the tokens "t" "12", so it is
    #: kept as "t 12" and looked for as adjacent tokens (never as a bare "12" or "t").
    words: frozenset[str]
    unless: frozenset[str] = frozenset()
    #: Where the words are looked for: the mention's clause (a few words either side, stopping at
    #: another finding) or its whole sentence ("rib contour deformities compatible with old
    #: fractures": the fractures are the ribs').
    reach: str = "clause"

    @cached_property
    def pairs(self) -> bool:
        """Whether a word of the rule is two tokens (then adjacent pairs of tokens are read too)."""
        return any(" " in w for w in self.words | self.unless)


@dataclass
class RuleSet:
    """Cue phrases (``cues.yaml``), the attribute vocabulary and the normal statements, as one lookup."""

    version: str
    cues: PhraseTrie[dict[str, Any]]
    normal_statements: list[NormalStatement] = field(default_factory=list)
    modifiers: frozenset[str] = frozenset()
    alternatives: frozenset[str] = frozenset()
    #: Entity -> the site rules that may move its mentions to another entity (``site_entities``).
    sites: dict[str, tuple[SiteRule, ...]] = field(default_factory=dict)
    #: Names holding a finding's word that name no finding (``not_findings``: "thoracic cavity").
    not_findings: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_data(cls, cues: dict, normals: dict | None, ontology: Ontology, source: str,
                  strict_sites: bool = True) -> "RuleSet":
        """Build the rule set; ``strict_sites=False`` drops site rules naming entities the ontology
        lacks (the packaged cue file, written for the packaged ontology, read with a user's one)."""
        trie: PhraseTrie[dict[str, Any]] = PhraseTrie()
        merged: dict[tuple[str, ...], dict[str, Any]] = {}
        for kind in _CUE_KINDS:
            for phrase, grade in _entries(cues.get(kind), kind, source):
                # A hedge's value is its certainty grade; any other cue's is True.
                merged.setdefault(_phrase(phrase, kind, source), {})[kind] = grade
        vocab = attribute_vocabulary()
        for kind in _VOCAB_KINDS:
            for phrase, value in getattr(vocab, kind).items():
                merged.setdefault(_phrase(phrase, kind, "cxreval:attributes.yaml"), {})[kind] = value
        for toks, kinds in merged.items():
            trie.add(toks, kinds)
        statements: list[NormalStatement] = []
        known = set(ontology.entity_ids)
        for i, item in enumerate((normals or {}).get("statements", []) or []):
            missing = [e for e in item.get("entities", []) if e not in known]
            if missing:
                raise RulesError(
                    f"{source}: normal statement {i} names entities not in ontology "
                    f"{ontology.signature}: {missing}"
                )
            try:
                pattern = re.compile(item["pattern"], re.IGNORECASE)
            except (KeyError, re.error) as exc:
                raise RulesError(f"{source}: normal statement {i} has a bad pattern: {exc}") from exc
            requires = tuple(str(w).lower() for w in item.get("requires", []) or [])
            local = _within_full_stops(pattern) and not any("." in w for w in requires)
            statements.append(NormalStatement(pattern, tuple(item.get("entities", [])), requires, local))
        # c = cue file, n = normal statements, a = attribute vocabulary: any edit bumps one.
        version = f"c{cues.get('version', '?')}.n{(normals or {}).get('version', '0')}.a{vocab.version}"
        # Words that may stand inside a multi-word entity name: the cue file's modifiers plus every
        # single-word side, zone and severity term ("calcified right hilar lymph nodes").
        modifiers = {t for phrase in cues.get("modifiers", []) or [] for t in _phrase(phrase, "modifiers", source)}
        for kind in ("sides", "zones", "severity"):
            modifiers.update(t for phrase in getattr(vocab, kind) for t in term_tokens(phrase))
        alternatives = frozenset(" ".join(_phrase(p, _ALT, source)) for p in cues.get(_ALT, []) or [])
        return cls(version=version, cues=trie, normal_statements=statements, modifiers=frozenset(modifiers),
                   alternatives=alternatives,
                   sites=_site_rules(cues.get("site_entities"), known, source, strict_sites),
                   not_findings=tuple(_phrase(p, "not_findings", source) for p in cues.get("not_findings", []) or []))


def _site_rules(entries: object, known: set[str], source: str, strict: bool = True) -> dict[str, tuple[SiteRule, ...]]:
    """``site_entities`` of a cue file: entity -> its site rules, every entity checked against the
    ontology (an unknown one raises, or with ``strict=False`` drops its rule)."""
    out: dict[str, list[SiteRule]] = {}
    for i, item in enumerate(entries or []):
        if not isinstance(item, dict) or not item.get("words"):
            raise RulesError(f"{source}: site_entities item {i} needs entity, to and words")
        entity, to = item.get("entity"), item.get("to")
        missing = [e for e in (entity, to) if e not in known]
        if missing and not strict:
            continue
        if missing:
            raise RulesError(f"{source}: site_entities item {i} names entities not in the ontology: {missing}")
        # a word is matched whole: "t12" is two tokens, looked for together (see SiteRule.words)
        words = frozenset(_site_word(p, source) for p in item["words"])
        unless = frozenset(_site_word(p, source) for p in item.get("unless", []) or [])
        reach = item.get("reach", "clause")
        if reach not in ("clause", "sentence"):
            raise RulesError(f"{source}: site_entities item {i} has reach {reach!r}; use clause or sentence")
        out.setdefault(entity, []).append(SiteRule(to, words, unless, reach))
    return {e: tuple(rules) for e, rules in out.items()}


def _site_word(word: object, source: str) -> str:
    tokens = _phrase(word, "site_entities", source)
    if len(tokens) > 2:
        raise RulesError(f"{source}: site_entities word {word!r} is more than two tokens")
    return " ".join(tokens)


def _outer_hedge(hedge: str | None, grade: str, phrase: str, phrase_grade: str) -> tuple[str, str]:
    """The hedge of a mention after the hedge cue ``phrase`` is met, looking back from it: the
    nearest hedge wins, except that two findings offered as alternatives ("versus") take a hedge
    before them, at most ``possible`` ("may represent atelectasis versus pneumonia": pneumonia is
    possible too; "probable A versus B" favours A)."""
    if hedge is None:
        return phrase, phrase_grade
    if grade == _ALTERNATIVE != phrase_grade:
        return phrase, _UNGRADED
    return hedge, grade


def _within_full_stops(pattern: re.Pattern[str]) -> bool:
    """Whether every match of ``pattern`` lies between two full stops, whatever the text around it.

    True when no part of the pattern can match a "." (no ``.``, ``\\W``, negated class or class
    holding "."), it asserts nothing but word boundaries (no lookaround, no ``^``/``$``) and it
    never matches the empty string: then searching the pieces between full stops one by one
    finds the very matches a search of the whole text finds (a ``\\b`` at a piece's end sees the
    "." either way). Anything it cannot tell is False (search the whole section).
    """
    try:
        from re import _constants as c, _parser
    except ImportError:  # an internal module of the standard library: if it moved, search whole sections
        return False

    dot = ord(".")

    def class_has_dot(items: list) -> bool:
        hit, negate = False, False
        for op, av in items:
            if op is c.NEGATE:
                negate = True
            elif op is c.LITERAL:
                hit |= av == dot
            elif op is c.RANGE:
                hit |= av[0] <= dot <= av[1]
            elif op is c.CATEGORY:
                if av not in (c.CATEGORY_DIGIT, c.CATEGORY_SPACE, c.CATEGORY_WORD, c.CATEGORY_LINEBREAK):
                    return True  # \D, \S, \W, ...: may match "."
            else:
                return True
        return hit != negate

    def local(items: Any) -> bool:
        for op, av in items:
            if op is c.LITERAL:
                if av == dot:
                    return False
            elif op is c.NOT_LITERAL:
                if av != dot:
                    return False
            elif op is c.IN:
                if class_has_dot(av):
                    return False
            elif op is c.AT:
                if av not in (c.AT_BOUNDARY, c.AT_NON_BOUNDARY):
                    return False
            elif op is c.BRANCH:
                if not all(local(alt) for alt in av[1]):
                    return False
            elif op is c.SUBPATTERN:
                if not local(av[3]):
                    return False
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                if not local(av[2]):
                    return False
            elif op is c.ATOMIC_GROUP:
                if not local(av):
                    return False
            else:
                return False  # ANY, lookaround, back-reference, conditional: may reach a "."
        return True

    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an internal parser: if it disagrees, search the whole section
        return False
    return parsed.getwidth()[0] > 0 and local(parsed)


def _entries(entries: object, kind: str, source: str) -> list[tuple[object, Any]]:
    """A cue list's (phrase, value) pairs: hedges as ``{grade: [phrases]}`` (or a plain list, all
    ``possible``), every other kind a plain list (value True)."""
    if not entries:
        return []
    if kind not in _GRADED_KINDS:
        if isinstance(entries, dict):
            raise RulesError(f"{source}: {kind} is a list of phrases, not a mapping")
        return [(p, True) for p in entries]
    if not isinstance(entries, dict):
        return [(p, _UNGRADED) for p in entries]
    out: list[tuple[object, Any]] = []
    for grade, phrases in entries.items():
        if grade not in HEDGE_GRADES:
            raise RulesError(f"{source}: {kind} grade {grade!r} is not one of {', '.join(HEDGE_GRADES)}")
        out.extend((p, grade) for p in phrases or [])
    return out


def _phrase(phrase: object, kind: str, source: str) -> tuple[str, ...]:
    # YAML reads a bare `no` as False: insist on text so a rule is never silently lost.
    if not isinstance(phrase, str) or not term_tokens(phrase):
        raise RulesError(f"{source}: {kind} entry {phrase!r} is not a phrase (quote it in YAML)")
    return term_tokens(phrase)


def _read_yaml(name: str) -> dict:
    ref = resources.files("cxreval.extract") / "rules" / name
    return yaml.safe_load(ref.read_text(encoding="utf-8")) or {}


def load_rules(ontology: Ontology, cues_path: str | Path | None = None) -> RuleSet:
    """Load the packaged cue rules (or a user's cue file) for ``ontology``."""
    cues = yaml.safe_load(Path(cues_path).read_text("utf-8")) if cues_path else _read_yaml("cues.yaml")
    normals = _read_yaml("normal_statements.yaml")
    if normals.get("ontology") not in (None, ontology.id):
        normals = {}
    # The packaged site rules name packaged entities: with a user's ontology, keep those it has.
    return RuleSet.from_data(cues, normals, ontology, str(cues_path or "cxreval:cues.yaml"),
                             strict_sites=bool(cues_path))


def build_entity_trie(ontology: Ontology) -> PhraseTrie[str]:
    """Every term of every entity, plus regular plurals and prefixes written apart ("hyper
    expanded") that no entity claims explicitly."""
    trie: PhraseTrie[str] = PhraseTrie()
    explicit: dict[tuple[str, ...], str] = {}
    for entity in ontology.entities:
        for term in entity.terms:
            toks = term_tokens(term)
            owner = ontology.precedence.get(term, entity.id)
            explicit.setdefault(toks, owner)
            if ontology.precedence.get(term):
                explicit[toks] = owner
    for toks, owner in explicit.items():
        trie.add(toks, owner)
    for toks, owner in explicit.items():
        for variant in plural_variants(toks):
            if variant not in explicit and trie.get(variant) is None:
                trie.add(variant, owner)
    # a prefixed word written apart or hyphenated ("hyper-expanded", "sub segmental atelectasis")
    for toks, owner in list(explicit.items()):
        for form in (toks, *plural_variants(toks)):
            for variant in prefix_variants(form):
                if variant not in explicit and trie.get(variant) is None:
                    trie.add(variant, owner)
    return trie


class RuleExtractor:
    """Deterministic, offline extraction of ontology entities from report text."""

    name = "rules"

    def __init__(self, ontology: Ontology | None = None, rules: RuleSet | None = None, *,
                 sentence_cache: int = SENTENCE_CACHE, report_cache: int = REPORT_CACHE) -> None:
        self.ontology = ontology or load_ontology()
        self.rules = rules or load_rules(self.ontology)
        self._entities = build_entity_trie(self.ontology)
        for toks in self.rules.not_findings:
            # matched as a name, longest first, so the finding's word inside it is no mention; then dropped
            self._entities.add(toks, _NOT_A_FINDING)
        #: What "the lungs are clear" can be clear of (``negation_adjacent``): lung and pleural findings.
        self._lung_entities = frozenset(e.id for e in self.ontology.entities if e.category in ("lung", "pleura"))
        #: Mentions of a sentence: (section name, sentence text) -> (where the sentence started in
        #: the report it was read from, its mentions there); reports repeat sentences ("No
        #: pneumothorax."), so each is read once and its mentions moved to the next report.
        self._sentences: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        #: The same for whole sections (section name, section text): sentences and normal statements.
        self._sections: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        #: Normal statement matches of a piece of text between full stops (``_normal_hits``).
        self._pieces: dict[str, tuple[tuple[int, int, int, str], ...]] = {}
        self._nonlocal_statements = any(not r.local for r in self.rules.normal_statements)
        #: (index, rule, search for any of its ``requires`` words or None) of each normal
        #: statement that implies something: one C search in place of a test per word.
        self._statement_checks = [
            (k, r, re.compile("|".join(map(re.escape, r.requires))).search if r.requires else None)
            for k, r in enumerate(self.rules.normal_statements) if r.entities
        ]
        #: One search for a word of any statement: a text holding none (most pieces between full
        #: stops: "No pneumothorax") skips every statement's own check. None: a statement needs none.
        needed = [r.requires for _, r, _ in self._statement_checks]
        self._any_statement_word = (
            re.compile("|".join(map(re.escape, sorted({w for ws in needed for w in ws})))).search
            if needed and all(needed) else None
        )
        #: A validated mention per kind (see ``_read_section``): new ones of that kind copy it.
        self._templates: dict[object, Mention] = {}
        self._cache_size = sentence_cache
        #: Whole reports: text -> its extraction (frozen, so one object serves every repeat). A
        #: reward or a benchmark reads the same references again and again; a repeat is one lookup.
        self._reports: OrderedDict[str, Extraction] = OrderedDict()
        self._report_cache = report_cache if sentence_cache else 0

    @property
    def signature(self) -> str:
        return f"rules@{RULES_VERSION}.{self.rules.version}"

    def extract(self, text: str) -> Extraction:
        """Find every entity mention in one report (a report read before: from the report cache)."""
        if self._report_cache:
            reports = self._reports
            hit = reports.get(text)
            if hit is not None:
                reports.move_to_end(text)
                return hit
            hit = self._extract(text)
            reports[text] = hit
            if len(reports) > self._report_cache:
                reports.popitem(last=False)
            return hit
        return self._extract(text)

    def _extract(self, text: str) -> Extraction:
        """:meth:`extract` without the report cache: each section from the section cache or read."""
        norm = normalize(text)
        mentions: list[Mention] = []
        for section in split_sections(norm.text):
            if self._cache_size and section.start < section.end:
                mentions.extend(self._read_cached_section(norm, section))
                continue
            mentions.extend(self._read_section(norm, token_columns(norm.text, section.start, section.end), section.name))
            mentions.extend(self._normal_statements(norm, section))
        # every mention was validated when made, and reads its evidence from ``text`` already
        return _extraction(self.signature, tuple(mentions), text)

    def _read_cached_section(self, norm: NormalizedText, section: Section) -> list[Mention]:
        """A section's mentions (its sentences', then its normal statements'), each distinct
        section text read once: reports repeat whole sections ("Impression: No acute
        cardiopulmonary abnormality."), 40 % of IU X-ray's. A new section is read sentence by
        sentence through the sentence cache. ``tests/test_rules_identity.py`` checks that the
        caches change no mention on every IU X-ray and ReXrank text."""
        lo, hi = norm.span(section.start, section.end)
        key = (section.name, norm.original[lo:hi])
        hit = self._sections.get(key)
        if hit is not None:
            self._sections.move_to_end(key)
            return _moved(hit, lo, norm.original)
        read = [*self._read_sentences(norm, section), *self._normal_statements(norm, section)]
        self._remember(self._sections, key, (lo, tuple(read)))
        return read

    def _read_sentences(self, norm: NormalizedText, section: Section) -> list[Mention]:
        """:meth:`_read_section` one sentence at a time, each distinct sentence read once.

        Reading never crosses a full stop (every window stops at a clause break, and evidence
        scopes are sentences), so a section's mentions are its sentences' mentions;
        ``tests/test_rules_identity.py`` checks this on every IU X-ray and ReXrank text. Only a
        sentence not in the cache is cut into tokens (:func:`sentence_spans` finds the sentences).
        """
        out: list[Mention] = []
        folded, starts, ends, original = norm.text, norm.starts, norm.ends, norm.original
        cache = self._sentences
        name = section.name
        for a, b in sentence_spans(folded, section.start, section.end):
            lo = starts[a]
            key = (name, original[lo : ends[b]])
            hit = cache.get(key)
            if hit is None:
                read = self._read_section(norm, token_columns(folded, a, b), name)
                self._remember(cache, key, (lo, tuple(read)))
                out.extend(read)
            else:
                cache.move_to_end(key)
                out.extend(_moved(hit, lo, original))
        return out

    def _remember(self, cache: "OrderedDict[Any, Any]", key: object, value: object) -> None:
        """Add to an LRU cache of at most ``sentence_cache`` entries."""
        cache[key] = value
        if len(cache) > self._cache_size:
            cache.popitem(last=False)

    # -- one section ---------------------------------------------------------------------
    def _read_section(self, norm: NormalizedText, columns: TokenColumns, section: str) -> list[Mention]:
        """The mentions of a run of tokens (``token_columns``: their texts, starts and ends)."""
        words, t_start, t_end = columns
        # (start, end, value = the entity, used): read as they come, no copy per match
        matches: list[GappedMatch] = scan_gapped(self._entities, words, self.rules.modifiers, MAX_SKIPPED)
        if not matches:
            return []
        if self.rules.not_findings and any(m.value is _NOT_A_FINDING for m in matches):
            matches = [m for m in matches if m.value is not _NOT_A_FINDING]  # "thoracic cavity": plain words
            if not matches:
                return []
        # cue_at[i]: the cue covering token i (multi-token cues are seen from either end);
        # cue_start / cue_end: that cue's token span.
        n = len(words)
        cue_at: list[dict[str, Any] | None] = [None] * n
        cue_start: list[int] = list(range(n))
        cue_end: list[int] = list(range(1, n + 1))
        # Whether any token names a side, zone or size, or a change: most sentences name none
        # ("No pneumothorax."), and then no mention's window needs walking for them.
        has_attributes = has_change = False
        for s, e, kinds in self.rules.cues.scan(words):
            for i in range(s, e):
                cue_at[i] = kinds
                cue_start[i] = s
                cue_end[i] = e
            if not has_attributes and not _ATTRIBUTE_KINDS.isdisjoint(kinds):
                has_attributes = True
            if not has_change and "comparison" in kinds:
                has_change = True
        entity_at: list[int] = [-1] * len(words)
        for k, m in enumerate(matches):
            for i in m.used:
                if entity_at[i] < 0:
                    entity_at[i] = k
        # Cues hidden inside an entity name only lend it attributes ("right middle lobe ...").
        for m in matches:
            for i in m.used:
                kinds = cue_at[i]
                if kinds and not kinds.keys().isdisjoint(_CUE_KINDS):
                    cue_at[i] = {k: v for k, v in kinds.items() if k in _VOCAB_KINDS} or None
        spans = (cue_start, cue_end)

        scopes = _scopes(norm, columns)
        starts, ends = norm.starts, norm.ends
        templates = self._templates
        out: list[Mention] = []
        for k, m in enumerate(matches):
            status, cue, historical, grade = self._certainty(words, cue_at, spans, entity_at, matches, k)
            if status is None:
                continue  # hypothetical ("CT is more sensitive to identify a small nodule"): no finding
            entity: str = m.value  # type: ignore[assignment]
            if _after_prefix(cue_at, m):
                # "non-tension pneumothorax", "non-compression fracture": the prefix denies the kind,
                # and the rest of the name names the finding there is
                entity = self._rest_names(words, m) or entity
            for rule in self.rules.sites.get(entity, ()):
                at: Collection[int]
                if rule.reach == "sentence":
                    at = _sentence_range(words, m.start, m.end)
                else:
                    at = {j for i in self._window(words, cue_at, spans, entity_at, m, k, ATTRIBUTE_BACK, SITE_FORWARD)
                          for j in range(spans[0][i], spans[1][i])}
                near = {words[j] for j in at}
                if rule.pairs:  # "t12": the tokens "t" "12" side by side
                    near.update(f"{words[j]} {words[j + 1]}" for j in at if j + 1 in at)
                if near & rule.words and not near & rule.unless:
                    entity = rule.to
                    break
            side, zones, severity = (self._location_severity(words, cue_at, spans, entity_at, m, k)
                                     if has_attributes else (None, (), None))
            comparison = self._comparison(words, cue_at, spans, entity_at, m, k) if has_change else None
            # The evidence: the scope(s) holding the mention's first and last token.
            s_start = scopes[bisect_right(scopes, m.start) - 1]
            last = bisect_right(scopes, m.end - 1)
            s_end = scopes[last] if last < len(scopes) else n
            start, end = starts[t_start[m.start]], ends[t_end[m.end - 1]]
            s_lo, s_hi = starts[t_start[s_start]], ends[t_end[s_end - 1]]
            # Validated once per kind of mention (status, grade, attributes); the rest are copies
            # of that one with the fields that validation passes unchanged (strings, offsets).
            key = (status, grade, side, zones, severity, comparison, historical)
            like = templates.get(key)
            if like is None:
                made = Mention(
                    entity=entity,
                    status=status,
                    certainty=grade,
                    side=side,
                    zones=zones,
                    severity=severity,
                    comparison=comparison,
                    historical=historical,
                    section=section,
                    start=start,
                    end=end,
                    sentence_start=s_lo,
                    sentence_end=s_hi,
                    cue=cue,
                    source=norm.original,
                )
                if len(templates) < _TEMPLATES:
                    templates[key] = made
            else:
                made = _stamp(like, entity, section, start, end, s_lo, s_hi, cue, norm.original)
            out.append(made)
        return out

    def _certainty(self, words, cue_at, spans, entity_at, matches, k):
        cue_start, cue_end = spans
        m = matches[k]
        n = len(words)
        # A removal noun right after the name: "status post chest tube removal".
        if m.end < n and cue_at[m.end] and _REMOVAL in cue_at[m.end]:
            return "absent", " ".join(words[cue_start[m.end] : cue_end[m.end]]), False, "negated"
        # A negating prefix right before the word that names the finding: "non-enlarged cardiac
        # silhouette"; not before a word that only describes it, where the rest of the name names
        # a finding ("non-loculated effusion"; "non-tension pneumothorax" is a pneumothorax, see
        # ``_read_section``) or the word is a descriptor ("non-layering fluid").
        if (_after_prefix(cue_at, m) and words[m.start] not in _PREFIX_DESCRIPTORS
                and self._rest_names(words, m) is None):
            return "absent", " ".join(words[cue_start[m.start - 1] : cue_end[m.start - 1]]), False, "negated"
        # A bare negated copula right before the finding, or before its article: "the lungs are not
        # hyperinflated", "this is not a pneumothorax (but a skin fold)".
        c = m.start - 1 if m.start > 1 and words[m.start - 1] in _ARTICLES else m.start
        if c > 0 and cue_at[c - 1] and _NEG_POST in cue_at[c - 1]:
            phrase = " ".join(words[cue_start[c - 1] : cue_end[c - 1]])
            if phrase in _BARE_COPULA and not (c < m.start and (words[m.start] in _ADJECTIVES_ONLY
                                                                or _in_condition(words, cue_start[c - 1]))):
                # not "this is not a displaced fracture", nor "if this is not a pneumothorax, ..."
                return "absent", phrase, False, "negated"
        # A predicate word that denies only what it stands right before: "lungs are clear airspace
        # disease" ("clear hyperexpanded lungs" describes the lungs: no verb or "and" before it).
        if (m.start > 1 and cue_at[m.start - 1] and _NEG_NEXT in cue_at[m.start - 1]
                and words[cue_start[m.start - 1] - 1] in _ADJACENT_AFTER
                and _LUNGS.intersection(words[max(0, cue_start[m.start - 1] - 4) : cue_start[m.start - 1]])
                and m.value in self._lung_entities
                and not words[m.start].endswith("ed") and not _stated_later(words, m.end)):
            # ... the lungs' predicate ("there is clear consolidation" states it), before a lung or
            # pleural finding ("the lungs are clear cardiomegaly" is a run-on) that is no second
            # adjective of the lungs ("the lungs are clear, hyperexpanded"), in no run-on sentence
            # whose finding has a verb of its own ("lungs are clear nodules are stable / noted")
            return "absent", " ".join(words[cue_start[m.start - 1] : cue_end[m.start - 1]]), False, "negated"
        # Backwards: nearest cue before the mention, inside the clause. A hedge does not end the
        # search inside its own list item: "no opacity to suggest pneumonia" is a negation.
        i = m.start - 1
        crossed_comma = False
        item_has_severity = False
        item_has_change = False  # the mention's item names a change of its own ("stable", "new")
        item_joined = False  # the mention's list item is joined by and/or/nor, not a bare comma
        hedge: str | None = None
        hedge_grade = _UNGRADED
        steps = hops = 0
        gap = 0  # words read since the mention or the last finding crossed
        far_hop = False  # crossed a finding more than a list's joining words away ("X is limited due to Y")
        while i >= 0 and steps < PRE_SCOPE:
            if entity_at[i] >= 0:
                hops += 1
                if hops > MAX_ENTITY_HOPS:
                    break
                far_hop = far_hop or gap > 2
                gap = 0
                i = matches[entity_at[i]].start - 1
                continue
            gap += 1
            kinds = cue_at[i]
            steps += 1
            if words[i] == "(" and _closed_clause(words, cue_at, entity_at, i):
                break  # "no effusion identified (blunting of the costophrenic recesses ..."
            if words[i] == ",":
                if hedge is not None:
                    break
                if _closed_clause(words, cue_at, entity_at, i):
                    break  # "no definite pleural effusion seen, left hilar calcifications"
                crossed_comma = True
                if item_has_severity and not item_joined:
                    break  # "no pneumothorax, mild cardiomegaly"
                i -= 1
                continue
            if words[i] in _CONJUNCTIONS and not crossed_comma:
                item_joined = True
            if words[i] == "and" and words[i + 1] == "the" and _own_predicate(words, cue_at, m):
                break  # "no pneumothorax and the endotracheal tube is in standard position": a new clause
            if words[i] == "with" and (item_has_severity or item_has_change or words[i + 1] == "the"):
                # "no focal consolidation with mild bibasilar atelectasis", "no pneumothorax with
                # the chest tube in place": a finding added with its own size, change or article
                # is stated, not denied (bare "no X with Y" stays one denial)
                break
            if not kinds:
                i -= 1
                continue
            start = cue_start[i]
            phrase = " ".join(words[start : cue_end[i]])
            if "severity" in kinds and not crossed_comma and phrase not in _NEGATED_LIST_SIZES:
                item_has_severity = True
            if "comparison" in kinds and not crossed_comma:
                item_has_change = True
            if _TERM in kinds:
                if _UNC_PRE in kinds:  # "there may be": a hedge that also opens a new clause
                    hedge, hedge_grade = _outer_hedge(hedge, hedge_grade, phrase, kinds[_UNC_PRE])
                break
            if _PSEUDO in kinds and not (_UNC_PRE in kinds or _UNC_POST in kinds):
                break
            if _HIST in kinds:
                return "present", phrase, True, "definite"
            if _HYP in kinds:
                if crossed_comma or far_hop:
                    # "if there is concern for X, consider Y": the condition ends at its comma; and
                    # "evaluation for effusion is limited due to the consolidation" states Y
                    break
                return None, phrase, False, None
            if _NEG_PRE in kinds and phrase == "not" and cue_end[i] < m.start and _is_size(cue_at, cue_end[i]):
                # "moderate, not large, effusion": the "not" denies the size only (not a size that
                # begins the name: "not small bowel obstruction")
                i = start - 1
                continue
            if _NEG_PRE in kinds:
                if crossed_comma and item_has_severity and not item_joined:
                    break
                return "absent", phrase, False, "negated"
            if _UNC_PRE in kinds:
                if hedge is None and crossed_comma:
                    if item_has_severity or (start > 0 and entity_at[start - 1] >= 0):
                        # "cephalization suggesting congestion, and moderate cardiomegaly": a hedge
                        # between two findings, or a list item with its own size, is no hedged list
                        break
                    return "uncertain", phrase, False, kinds[_UNC_PRE]
                hedge, hedge_grade = _outer_hedge(hedge, hedge_grade, phrase, kinds[_UNC_PRE])
            i = start - 1
        if hedge is not None:
            return "uncertain", hedge, False, hedge_grade
        # A labelled value, as structured reports write findings: "Pneumothorax: none",
        # "Effusion: not seen", "Pneumonia: possible".
        if m.end + 1 < n and words[m.end] == ":":
            v = m.end + 1
            kinds = cue_at[v]
            if kinds:  # a cue first: "Pneumonia: no change" is a pseudo-negation, not "no"
                phrase = " ".join(words[cue_start[v] : cue_end[v]])
                for kind in _GRADED_KINDS:
                    if kind in kinds:
                        return "uncertain", phrase, False, kinds[kind]
                if (_NEG_POST in kinds or _NEG_PRE in kinds) and _PSEUDO not in kinds:
                    return "absent", phrase, False, "negated"
            elif words[v] in _LABEL_NEGATIONS:
                return "absent", words[v], False, "negated"
        # Forwards: a post-cue a few tokens after the mention ("the tip of the PICC is not seen"
        # denies the tip, not the line).
        i = n if _tip_of(words, cue_at, m) else m.end
        steps = hops = 0
        listed = False  # crossed a comma into a list of findings that share the predicate
        joined = False  # that list joins its last item by and / or
        name_end = m.end  # where the last finding name read ends
        aside = False  # crossed an aside between commas right after the name
        while i < n and steps < POST_SCOPE_PREDICATE:
            if entity_at[i] >= 0:
                hops += 1
                if hops > MAX_ENTITY_HOPS:
                    break
                i = name_end = matches[entity_at[i]].end
                continue
            if words[i] == ",":
                # "Consolidation, atelectasis, and effusion have resolved": a comma right after a
                # name goes on to another finding of the same list, which a plural predicate then
                # denies as a whole ("Mild cardiomegaly, effusion has resolved" and "Tube in
                # standard position, effusions have resolved" stay two statements).
                j = i + 1
                if j < n and words[j] in _CONJUNCTIONS:
                    j += 1
                    joined = True
                if (i == name_end and j < n and entity_at[j] >= 0 and matches[entity_at[j]].start == j
                        and not self._item_has_attributes(words, cue_at, m)):
                    listed = True
                    i = j
                    continue
                if i == m.end and not listed:
                    close = _aside_end(words, cue_at, entity_at, i)
                    if close is not None:
                        # "Pneumothorax, previously seen on the left, is no longer present": an
                        # aside between commas; the predicate after it still denies the finding
                        aside = True
                        i = close + 1
                        continue
                break
            kinds = cue_at[i]
            steps += 1
            if words[i] in _CONJUNCTIONS:
                joined = True
            if kinds:
                phrase = " ".join(words[cue_start[i] : cue_end[i]])
                near = steps <= POST_SCOPE and not listed and not aside
                verb = words[cue_start[i]]
                far_ok = verb in _PREDICATE_VERBS and phrase not in _BARE_COPULA and (
                    not listed or (joined and verb in _PLURAL_VERBS))
                if _NEG_POST in kinds and (near or far_ok):
                    if phrase in _BARE_COPULA and _copula_keeps(words, cue_at, entity_at, cue_end[i]):
                        break  # "the nodule is not calcified", "the ET tube is not in the right mainstem"
                    return "absent", phrase, False, "negated"
                if _UNC_POST in kinds and near:
                    return "uncertain", phrase, False, kinds[_UNC_POST]
                if _TERM in kinds or _PSEUDO in kinds:
                    break
                i = cue_end[i]
                continue
            i += 1
        # Alternatives: "atelectasis or pneumonia", "atelectasis or small effusion" (the other
        # finding's own size or side words stand between).
        before = m.start - 1
        while before >= 0 and m.start - before <= 2 and (_attribute_only(cue_at[before]) or words[before] in _ARTICLES):
            before -= 1  # "atelectasis or a small effusion"
        for j in (before, m.end):
            if 0 <= j < n and cue_at[j] and _ALT in cue_at[j]:
                phrase = " ".join(words[cue_start[j] : cue_end[j]])
                other = cue_start[j] - 1 if j < m.start else cue_end[j]
                if (phrase in _VERSUS and j in (m.start - 1, m.end) and 0 <= other < n and not _attribute_only(cue_at[other])
                        and not (j >= m.end and _earlier_exam(words, other))):
                    # a differential names what else the finding may be, a finding or not:
                    # "small left pneumothorax vs. skin fold", "nodule versus nipple shadow"; right
                    # beside the name ("small vs moderate effusion" doubts the size only)
                    return "uncertain", phrase, False, "alternative"
                step = -1 if j < m.start else 1
                for _ in range(2):
                    if 0 <= other < n and entity_at[other] < 0 and (_attribute_only(cue_at[other]) or words[other] in _ARTICLES):
                        other += step
                if 0 <= other < n and entity_at[other] >= 0:
                    return "uncertain", " ".join(words[cue_start[j] : cue_end[j]]), False, "alternative"
        return "present", None, False, "definite"

    def _rest_names(self, words: list[str], m: GappedMatch) -> str | None:
        """The entity that mention ``m``'s name names without its first word(s), the longest rest
        first: "effusion" in "loculated effusion", "cell carcinoma" -> "carcinoma" in "small cell
        carcinoma", "pneumothorax" in "tension pneumothorax". None when no rest names one ("enlarged
        heart"). A negating prefix before such a first word denies the description only."""
        used = m.used
        for k in range(1, len(used)):
            entity = self._entities.get([words[j] for j in used[k:]])
            if entity is not None and entity is not _NOT_A_FINDING:
                return entity
        return None

    @staticmethod
    def _item_has_attributes(words, cue_at, m) -> bool:
        """Whether the list item of mention ``m`` (back to the previous clause break) names a
        severity or a change of its own: "Small left effusion, pneumothorax and consolidation are
        not seen" and "Stable cardiomegaly, ..." are a finding followed by a list, not one list (a
        site alone does not tell: "Left lower lobe consolidation, atelectasis and effusion have
        resolved")."""
        i = m.start - 1
        while i >= 0 and words[i] not in _CLAUSE_BREAK:
            i -= 1
        for j in range(i + 1, m.end):
            kinds = cue_at[j]
            if kinds and ("severity" in kinds or "comparison" in kinds):
                return True
        return False

    def _window(self, words, cue_at, spans, entity_at, m, k, back: int, forward: int, change: bool = False) -> list[int]:
        """Token positions around mention ``k`` inside its clause, nearest first.

        A multi-token cue counts as one step and is listed once, at its first token. ``change``:
        the window of a change word, which reaches into a next clause opened by a comma ("effusion,
        new since prior") but not back across "and there" (another clause's subject).
        """
        cue_start, cue_end = spans
        positions: list[int] = []
        i, steps = m.start - 1, 0
        added = False  # crossed "with": the finding was added to another ("X with small effusion")
        while i >= 0 and steps < back:
            if entity_at[i] >= 0 and entity_at[i] != k:
                break
            if words[i] in _CLAUSE_BREAK or words[i] in _CONTRAST_BREAK:
                break
            if change and words[i] == "and" and words[i + 1] == "there":
                break  # "heart size is not changed and there is no effusion": a change of another clause
            if steps >= ATTRIBUTE_BACK and added:
                break  # the longer reach of a change word does not cross "with"
            added = added or words[i] == "with"
            positions.append(cue_start[i])
            i = cue_start[i] - 1
            steps += 1
        i, steps = m.end, 0
        n = len(words)
        # "Effusion: small, left": a value after the name's colon is read to the sentence's end
        labelled = i < n and words[i] == ":"
        while i < n and steps < forward:
            if labelled and words[i] in (":", ","):
                if words[i] == "," and self._clause_has_entity(words, entity_at, k, i + 1):
                    break  # "Effusion: resolved, left lower lobe atelectasis"
                i += 1
                continue
            if entity_at[i] >= 0 and entity_at[i] != k:
                break
            if (words[i] in _CLAUSE_BREAK or words[i] in _FORWARD_BREAK or words[i] in _CONTRAST_BREAK
                    or (words[i] in _ALTERNATIVE_BREAK and _sized_next(words, cue_at, i + 1))):
                # "Pneumothorax, new since prior" / "Kyphosis of the spine, worse than before": a
                # change phrase opening the next clause still counts, unless that clause names
                # another finding it can belong to ("effusion, new left pneumothorax").
                if change and words[i] == "," and i + 1 < n and not self._clause_has_entity(
                    words, entity_at, k, i + 1
                ):
                    positions.append(i + 1)
                break
            positions.append(cue_start[i])
            i = cue_end[i]
            steps += 1
        # Words inside the entity name itself ("right pneumothorax" as a synonym).
        positions.extend(range(m.start, m.end))
        return positions

    @staticmethod
    def _clause_has_entity(words, entity_at, k, start) -> bool:
        for j in range(start, len(words)):
            if words[j] in _CLAUSE_BREAK:
                return False
            if entity_at[j] >= 0 and entity_at[j] != k:
                return True
        return False

    def _location_severity(self, words, cue_at, spans, entity_at, m, k):
        sides: list[str] = []
        zones: dict[str, None] = {}
        severity: str | None = None
        rank = attribute_vocabulary().severity_rank
        for i in self._window(words, cue_at, spans, entity_at, m, k, ATTRIBUTE_BACK, ATTRIBUTE_FORWARD):
            kinds = cue_at[i]
            if not kinds:
                continue
            if "sides" in kinds:
                sides.append(kinds["sides"])
            if "zones" in kinds:
                zones.setdefault(kinds["zones"], None)
            if ("severity" in kinds and (severity is None or rank(kinds["severity"]) > rank(severity))
                    and not _denied_word(words, spans[0][i])):
                severity = kinds["severity"]
        side = None
        distinct = set(sides)
        if "bilateral" in distinct or {"left", "right"} <= distinct:
            side = "bilateral"
        elif distinct:
            side = sides[0]
        return side, tuple(zones), severity

    def _comparison(self, words, cue_at, spans, entity_at, m, k):
        for i in self._window(words, cue_at, spans, entity_at, m, k, COMPARISON_BACK, COMPARISON_FORWARD, change=True):
            kinds = cue_at[i]
            if kinds and "comparison" in kinds and not _denied_word(words, spans[0][i]):
                return kinds["comparison"]
        return None

    def _normal_statements(self, norm: NormalizedText, section: Section) -> list[Mention]:
        """The absences the section's normal statements imply: rule by rule, match by match."""
        out: list[Mention] = []
        statements = self.rules.normal_statements
        original = norm.original
        for k, start, end, cue in self._normal_hits(norm.text, section):
            entities = statements[k].entities
            start, end = norm.span(start, end)
            # One mention validated for the extractor's life; the others are copies of it with
            # their own entity, section, offsets and cue (strings and offsets: nothing to check).
            like = self._templates.get(_IMPLIED)
            if like is None:
                first = Mention(
                    entity=entities[0],
                    status="absent",
                    implied=True,
                    section=section.name,
                    start=start,
                    end=end,
                    sentence_start=start,
                    sentence_end=end,
                    cue=cue,
                    source=original,
                )
                if _TEMPLATES:
                    self._templates[_IMPLIED] = first
            else:
                first = _stamp(like, entities[0], section.name, start, end, start, end, cue, original)
            out.append(first)
            out.extend(_with_entity(first, entity) for entity in entities[1:])
        return out

    def _normal_hits(self, folded: str, section: Section) -> list[tuple[int, int, int, str]]:
        """Every normal statement match in the section: (rule index, start, end, matched text),
        ordered by rule, then by place. With the caches on, the pieces between full stops are
        looked up in the piece cache (a local rule's matches lie in one piece, and a piece reads
        the same in any report: the character before it is a "." or the ":" of a title)."""
        lo, hi = section.start, section.end
        if not self._cache_size or (lo > 0 and _WORD_CHAR.match(folded, lo - 1)):
            return self._normal_hits_in(folded, lo, hi, local=None)
        found: list[tuple[int, int, int, str]] = []
        cache = self._pieces
        a = lo
        while a <= hi:
            b = folded.find(".", a, hi)
            if b < 0:
                b = hi
            piece = folded[a:b]
            hits = cache.get(piece)
            if hits is None:
                hits = tuple((k, s - a, e - a, cue) for k, s, e, cue in self._normal_hits_in(folded, a, b, local=True))
                cache[piece] = hits  # first in, first out: no reordering on every hit
                if len(cache) > self._cache_size:
                    del cache[next(iter(cache))]
            if hits:
                found.extend([(k, s + a, e + a, cue) for k, s, e, cue in hits])
            a = b + 1
        if self._nonlocal_statements:
            found.extend(self._normal_hits_in(folded, lo, hi, local=False))
        if len(found) > 1:
            found.sort(key=_RULE)  # stable: each rule's matches stay in text order
        return found

    def _normal_hits_in(self, folded: str, lo: int, hi: int, local: bool | None) -> list[tuple[int, int, int, str]]:
        """The matches of the normal statements (only the local ones, only the others, or all:
        ``local`` True, False, None) in ``folded[lo:hi]``, rule by rule."""
        out: list[tuple[int, int, int, str]] = []
        text = folded[lo:hi]
        if self._any_statement_word is not None and self._any_statement_word(text) is None:
            return out  # no statement's word: every statement's check below would fail
        stops: list[int] | None = None
        for k, rule, has_word in self._statement_checks:
            if local is not None and rule.local != local:
                continue  # not asked for
            if has_word is not None and has_word(text) is None:
                continue  # no word every match needs: nothing to find
            # A section starts after a title's ":" (or at 0) and ends where a title begins, so the
            # patterns' word boundaries read as they would in a copy of the section.
            if rule.local and rule.requires and local is None:
                if stops is None:
                    stops = [m.start() for m in _FULL_STOP.finditer(text)]
                hits = _hits_between_stops(rule, folded, text, lo, stops)
            else:
                hits = rule.pattern.finditer(folded, lo, hi)
            for hit in hits:
                out.append((k, hit.start(), hit.end(), hit.group(0)))
        return out


_RULE = itemgetter(0)

_WORD_CHAR = re.compile(r"\w")
_FULL_STOP = re.compile(r"\.")


def _hits_between_stops(rule: NormalStatement, folded: str, text: str, offset: int,
                        stops: list[int]) -> list[re.Match[str]]:
    """The matches of a ``local`` rule in ``text`` (``folded[offset:]``), searching only the pieces
    between full stops (``stops``: their positions in ``text``) that hold one of its words.

    A local rule's match never holds a "." and holds one of ``rule.requires``, so it lies in one
    such piece; the pieces are searched in order, so the matches come in the order of a search of
    the whole section (``tests/test_rules_identity.py`` checks on every IU X-ray and ReXrank text).
    """
    pieces: set[int] = set()
    last = len(stops)
    for word in rule.requires:
        i = text.find(word)
        while i >= 0:
            k = bisect_right(stops, i)
            pieces.add(k)
            if k == last:
                break
            i = text.find(word, stops[k] + 1)  # the next piece: this one is in
    out: list[re.Match[str]] = []
    end = len(text)
    for k in sorted(pieces):
        a = stops[k - 1] + 1 if k else 0
        b = stops[k] if k < len(stops) else end
        out.extend(rule.pattern.finditer(folded, offset + a, offset + b))
    return out


#: A cached reading: where the text started in the report it was read from, and its mentions there.
_Cached = tuple[int, tuple[Mention, ...]]


def _moved(cached: _Cached, start: int, source: str) -> list[Mention]:
    """A cached reading's mentions for the same text starting at ``start`` of report ``source``:
    each ``m`` with its offsets moved and its evidence read from ``source``.

    What ``m.model_copy(update=...)`` does, without its generic copying: this runs for every
    mention of every report read from the caches, and ``m`` was validated when it was made.
    """
    base, mentions = cached
    by = start - base
    out: list[Mention] = []
    for m in mentions:
        fields = m.__dict__.copy()
        if by:
            fields["start"] += by
            fields["end"] += by
            fields["sentence_start"] += by
            fields["sentence_end"] += by
        fields["source"] = source
        given = m.__pydantic_fields_set__
        # Shared, not copied, when it already names the moved fields (it does for every mention
        # the engine makes): a frozen model never changes its set in place (pydantic copies it in
        # ``model_copy``), and one set per mention was most of a cached mention's memory.
        out.append(constructed(Mention, fields, given if _SHIFTED_FIELDS <= given else given | _SHIFTED_FIELDS))
    return out


def _extraction(engine: str, mentions: tuple[Mention, ...], text: str) -> Extraction:
    """``Extraction.model_construct(engine=..., mentions=..., text=...)``, without its generic
    field loop (once per report read)."""
    return constructed(Extraction, {"engine": engine, "mentions": mentions, "text": text}, {"engine", "mentions", "text"})


#: Kinds of mention whose validated template an extractor keeps (a bound, never reached in practice).
_TEMPLATES = 4096
#: The template key of a normal statement's implied absence.
_IMPLIED = "implied"


def _stamp(like: Mention, entity: str, section: str, start: int, end: int, sentence_start: int,
           sentence_end: int, cue: str | None, source: str) -> Mention:
    """A mention of the kind of ``like`` (same status, grade, attributes, flags) at a new place:
    what ``Mention(...)`` with every field ``like`` was given makes, without validating again the
    fields it shares with ``like``; the others are strings and offsets the engine made."""
    fields = like.__dict__.copy()
    fields["entity"] = entity
    fields["section"] = section
    fields["start"] = start
    fields["end"] = end
    fields["sentence_start"] = sentence_start
    fields["sentence_end"] = sentence_end
    fields["cue"] = cue
    fields["source"] = source
    return constructed(Mention, fields, like.__pydantic_fields_set__)  # the set shared, as in _moved


def _with_entity(m: Mention, entity: str) -> Mention:
    """``m`` naming ``entity`` instead: what ``Mention(**fields, entity=entity)`` makes, without
    validating again what ``m`` passed (``entity`` is any string)."""
    fields = m.__dict__.copy()
    fields["entity"] = entity
    return constructed(Mention, fields, m.__pydantic_fields_set__)  # the set shared, as in _moved


_SHIFTED_FIELDS = frozenset({"start", "end", "sentence_start", "sentence_end", "source"})


def _after_prefix(cue_at: list[dict[str, Any] | None], m: GappedMatch) -> bool:
    """Whether a negating prefix (``negation_prefix``: "non") stands right before mention ``m``."""
    kinds = cue_at[m.start - 1] if m.start > 0 else None
    return kinds is not None and _NEG_PREFIX in kinds


def _attribute_only(kinds: dict[str, Any] | None) -> bool:
    """Whether a token's cue kinds are attribute words only (a size, side or zone): "small" in
    "atelectasis or small effusion"."""
    return bool(kinds) and kinds.keys() <= _ATTRIBUTE_KINDS


_ATTRIBUTE_KINDS = frozenset(_VOCAB_KINDS) - {"comparison"}  # a size, side or zone
# What stands before a `negation_adjacent` word used as a predicate ("are clear", "and clear").
_ADJACENT_AFTER = frozenset({"is", "are", "and", "remain", "remains", "appear", "appears"})
_LUNGS = frozenset({"lung", "lungs"})
_OWN_VERBS = frozenset({"is", "are", "remains", "remain"})


def _own_predicate(words: list[str], cue_at: list[dict[str, Any] | None], m: GappedMatch) -> bool:
    """Whether mention ``m`` is the subject of a verb of its own that states it ("the endotracheal
    tube is in standard position", "the effusions are small"), not one that denies or hedges it."""
    if any(words[j] in _OWN_VERBS for j in range(m.start, m.end)):
        return True  # the name holds its verb: "the cardiac silhouette is enlarged"
    j = m.end
    if j >= len(words) or words[j] not in _OWN_VERBS:
        return False
    kinds = cue_at[j]
    return not (kinds and (_NEG_POST in kinds or _UNC_POST in kinds))


#: Words that deny the size word right after them: "cardiomegaly is not severe", "non-small cell".
_SIZE_DENIALS = frozenset({"not", "non", "longer"})
#: Degree words between "not" and a size: "the effusion is not as large as before", "not so large".
_DEGREE_WORDS = frozenset({"as", "so"})


def _denied_word(words: list[str], start: int) -> bool:
    """Whether the attribute word starting at ``start`` is denied by the word before it ("not
    severe", "not a new finding"): the finding has no such size or change then."""
    if start > 1 and (words[start - 1] in _DEGREE_WORDS or words[start - 1] in _ARTICLES):
        start -= 1  # "not as large (as before)", "cardiomegaly is not a new finding"
    return start > 0 and words[start - 1] in _SIZE_DENIALS


def _stated_later(words: list[str], end: int) -> bool:
    """Whether a verb that states a finding follows its name (``end``) inside the clause."""
    for j in range(end, len(words)):
        if words[j] in _CLAUSE_BREAK:
            return False
        if words[j] in _OWN_VERBS or words[j] in _CLOSING_VERBS:
            return True
    return False


def _closed_clause(words: list[str], cue_at: list[dict[str, Any] | None], entity_at: list[int], i: int) -> bool:
    """Whether the comma or parenthesis at ``i`` follows a denial's clause that its participle
    closed ("no definite pleural effusion seen, left hilar calcifications", "no pneumothorax
    identified (blunting of the costophrenic angles ..."), so the denial reaches no further. Not
    after an aside's participle ("no effusion, as previously noted, or pneumothorax"), nor while a
    list of what is denied goes on ("no effusion present, pneumothorax, consolidation, or edema",
    "no acute abnormality identified, such as consolidation", "no acute process identified
    (pneumonia, edema, or effusion)")."""
    return (i > 1 and words[i - 1] in _CLOSING_VERBS and words[i - 2] not in _ASIDE_OPENERS
            and not _list_goes_on(words, cue_at, entity_at, i + 1))


def _list_goes_on(words: list[str], cue_at: list[dict[str, Any] | None], entity_at: list[int], start: int) -> bool:
    """Whether the words from ``start`` (right after a comma or parenthesis) go on with a list of
    what a denial names: "such as" / "including" / "specifically" before a finding, or the
    sentence joins an item with "or" / "nor" before it ends or a cue opens a statement of its own
    ("no effusion seen, pneumothorax, consolidation, or edema"; not "no pneumothorax identified
    (blunting ... may represent small effusions or pleural thickening")."""
    if start < len(words) and words[start] in _LIST_OPENERS:
        j = start + 1
        if j < len(words) and words[j] == "as":
            j += 1  # "such as"
        if j < len(words) and entity_at[j] >= 0:
            return True
    for j in range(start, len(words)):
        if words[j] in (".", ";"):
            return False
        if words[j] in _ALTERNATIVE_BREAK:
            return True
        kinds = cue_at[j]
        if kinds and not kinds.keys().isdisjoint(_STATEMENT_KINDS):
            return False
    return False


def _tip_of(words: list[str], cue_at: list[dict[str, Any] | None], m: GappedMatch) -> bool:
    """Whether mention ``m`` names what a tip belongs to: "the tip of the right PICC", "tip of the
    endotracheal tube" (a predicate after it is the tip's)."""
    i = m.start - 1
    while i >= 0 and m.start - i <= 3 and (words[i] == "the" or (cue_at[i] and "sides" in cue_at[i])):
        i -= 1
    return i >= 1 and words[i] == "of" and words[i - 1] in ("tip", "tips")


#: The most words an aside between commas may hold ("pneumothorax, previously seen on the left, is ...").
MAX_ASIDE = 6
#: Words that open an aside about the finding's past or the writer's expectation. Only these:
#: "nodule, seen on the lateral view only, is not seen on the frontal view" states the nodule.
_ASIDE_OPENERS = frozenset({"previously", "as", "formerly", "earlier", "initially"})
#: Cue kinds an aside may hold: attribute words, and phrases that are no cue ("as previously noted").
_ASIDE_KINDS = frozenset({*_VOCAB_KINDS, _NOT_CUE})


def _aside_end(words: list[str], cue_at: list[dict[str, Any] | None], entity_at: list[int], comma: int) -> int | None:
    """Where the aside opened by the comma at ``comma`` closes (its closing comma), when it is one:
    at most ``MAX_ASIDE`` words, the first one of ``_ASIDE_OPENERS``, naming no finding and holding
    no cue but attribute words, closed by a comma that a predicate verb follows ("is no longer
    present"). None otherwise."""
    n = len(words)
    if comma + 1 >= n or words[comma + 1] not in _ASIDE_OPENERS:
        return None
    for j in range(comma + 1, min(n, comma + 2 + MAX_ASIDE)):
        word = words[j]
        if word == ",":
            return j if j + 1 < n and words[j + 1] in _PREDICATE_VERBS else None
        kinds = cue_at[j]
        if entity_at[j] >= 0 or word in _CLAUSE_BREAK or (kinds and not kinds.keys() <= _ASIDE_KINDS):
            return None
    return None


def _sentence_range(words: list[str], start: int, end: int) -> range:
    """The token positions of the sentence (between full stops) holding tokens ``start:end``."""
    lo = start
    while lo > 0 and words[lo - 1] != ".":
        lo -= 1
    hi = end
    while hi < len(words) and words[hi] != ".":
        hi += 1
    return range(lo, hi)


def _scopes(norm: NormalizedText, columns: TokenColumns) -> list[int]:
    """The token index at which each evidence scope starts, ascending (the first is 0).

    A scope is a sentence (up to a full stop, or the section's end) unless the sentence spans more
    than ``MAX_SCOPE_CHARS`` of the original text: then it is cut into pieces that fit (see
    :func:`_cut`), so a report with no full stop does not make every mention's evidence the
    whole report.
    """
    words, t_start, t_end = columns
    n = len(words)
    breaks = [i + 1 for i, w in enumerate(words) if w == "." and i + 1 < n]
    out = [0]
    starts, ends = norm.starts, norm.ends
    for a, b in zip([0, *breaks], [*breaks, n]):
        if a < b and ends[t_end[b - 1]] - starts[t_start[a]] > MAX_SCOPE_CHARS:
            out.extend(_cut(norm, columns, a, b))
        if b < n:
            out.append(b)
    return out


def _cut(norm: NormalizedText, columns: TokenColumns, a: int, b: int) -> list[int]:
    """Where to cut the over-long sentence of tokens ``a:b``: the start of every piece after the first."""
    _, t_start, t_end = columns
    cuts: list[int] = []
    while True:
        limit = norm.starts[t_start[a]] + MAX_SCOPE_CHARS
        j = a + 1  # the first token that does not fit (a piece holds at least one token)
        while j < b and norm.ends[t_end[j]] <= limit:
            j += 1
        if j >= b:
            return cuts
        a = _clause_cut(norm.text, columns, a, j)
        cuts.append(a)


def _clause_cut(folded: str, columns: TokenColumns, a: int, j: int) -> int:
    """The last clause boundary in ``(a, j]``: after ";" / ":" or at a line break, else after a comma, else ``j``."""
    words, t_start, t_end = columns
    for c in range(j, a, -1):
        if words[c - 1] in _STRONG_BREAK or folded.find("\n", t_end[c - 1], t_start[c]) >= 0:
            return c
    for c in range(j, a, -1):
        if words[c - 1] == ",":
            return c
    return j


@lru_cache(maxsize=4)
def default_extractor() -> RuleExtractor:
    """The rule extractor on the packaged ontology, built once per process."""
    return RuleExtractor()
