"""A seeded perturbation suite: reference reports -> (reference, candidate) pairs with a known verdict.

Clinically *significant* variants change what the report says about one finding (the target
entity): omit it, add a false one, negate it, flip its side, change its severity, or claim a
change from a prior study that the reference does not make. Clinically *insignificant* variants
change only the wording or the layout: sentence order, ontology synonyms, paraphrased normal
statements, case, punctuation, line breaks, merged or split sentences, section titles.

The significant variants come in two labelled *target variants* (``PerturbedPair.targets``):

- ``mesh``: the targets are the findings the human coders coded (the report's MeSH field, mapped
  to entities with the ontology's ``mesh`` patterns, as :func:`cxreval.datasets.iu_xray.load_iu_gold`
  does), and the sentences edited are found **without the rule engine**: a plain case-insensitive
  word search (report tokens, a final ``s`` ignored) for any ontology name of the entity or the
  code's MeSH heading; a name counts as stated unless its clause (split at , ; : but however
  although ...) denies it: a negation word before it (no, without, negative, free ...) or after
  it (not, resolved, removed, normal, clear ...). See :class:`_MeshReport`.
- ``engine``: the targets and their sentences are the rule engine's own mentions (character spans).

The insignificant types do not depend on targets: they are made once and labelled ``shared``
(``synonym_swap`` locates the names it swaps with the rule engine). Synonyms come from the
ontology; every variant records what changed (``before`` -> ``after``) and the judgement a correct
metric should give. The random choices are seeded per (seed, report, type[, variant]), so a suite
is reproducible and a report's variants do not depend on which other reports are in it. Report
text is never stored in the repository: suites are generated at run time.

Known limits: with ``engine`` targets a finding the engine does not read cannot be targeted; with
``mesh`` targets a finding the coders coded but the word search does not find (a paraphrase with
no ontology name) cannot be. Both refuse, by a plain lexical check, an omission or negation that
leaves any name of the target in the candidate.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from cxreval.extract.models import Extraction, Mention
from cxreval.extract.rules import RuleExtractor, build_entity_trie
from cxreval.extract.text import SECTION_TITLES, term_tokens, tokenize
from cxreval.io import (
    Record,
    RecordTable,
    Uniqueness,
    bool_value,
    check_columns,
    load_table,
    raise_problems,
    record_id,
    require_records,
    table_format,
    text_value,
)
from cxreval.io.writers import atomic_writer, write_csv
from cxreval.ontology import Ontology, load_ontology
from cxreval.ontology.attributes import attribute_vocabulary
from cxreval.ontology.mesh import MeshMapper

SUITE_VERSION = "4"

#: How the significant variants pick their targets (see the module docstring); ``shared`` labels
#: the insignificant variants, which do not depend on targets.
TargetVariant = Literal["mesh", "engine"]
TARGET_VARIANTS: tuple[TargetVariant, ...] = ("mesh", "engine")
TargetsLabel = Literal["mesh", "engine", "shared"]
SHARED = "shared"

#: Perturbations that change what the report says (a correct metric penalises them).
SignificantType = Literal[
    "omit_finding",
    "add_finding",
    "negate_finding",
    "flip_laterality",
    "change_severity",
    "false_change",
    "generalise",
    "over_specify",
    "move_tip",
    "resize",
    "drop_place",
]
#: Perturbations that keep the meaning (a correct metric forgives them).
InsignificantType = Literal[
    "reorder_sentences",
    "synonym_swap",
    "paraphrase_normal",
    "change_case",
    "punctuation",
    "line_breaks",
    "merge_split",
    "section_headers",
]
PerturbationType = Literal[SignificantType, InsignificantType]
SIGNIFICANT: tuple[PerturbationType, ...] = get_args(SignificantType)
INSIGNIFICANT: tuple[PerturbationType, ...] = get_args(InsignificantType)
ALL_TYPES: tuple[PerturbationType, ...] = SIGNIFICANT + INSIGNIFICANT

#: What a correct entity-level judge says about the target entity, per significant type.
EXPECTED: dict[str, str] = {
    "omit_finding": "FN",
    "add_finding": "FP",
    "negate_finding": "FN",
    "flip_laterality": "location not-aligned",
    "change_severity": "severity not-aligned",
    "false_change": "adding-unmentioned-comparison",
    "generalise": "less-specific",
    "over_specify": "more-specific",
    "move_tip": "location not-aligned",
    "resize": "severity not-aligned",
    "drop_place": "location not-aligned",
}
NO_ERROR = "no error"


class PerturbedPair(BaseModel):
    """One labelled pair of the suite."""

    model_config = ConfigDict(frozen=True)

    pair_id: str
    source_uid: str
    perturbation: PerturbationType
    significant: bool
    targets: TargetsLabel = "engine"
    """``mesh`` or ``engine``: how the target was found (significant types); ``shared``: no target."""
    target_entity: str | None = None
    expected: str
    description: str
    before: str = ""
    after: str = ""
    reference: str
    candidate: str


# ------------------------------------------------------------------------------------------
# Reading a report into sections and sentences
# ------------------------------------------------------------------------------------------

_HEADER_RE = re.compile(
    r"(?:^|(?<=[\s.;]))(" + "|".join(sorted((re.escape(t) for t in SECTION_TITLES), key=len, reverse=True)) + r")\s*:\s*",
    re.IGNORECASE,
)
# A sentence ends at . ! ? followed by white space or the end; "1." list markers do not end one.
_END_RE = re.compile(r"[.!?]+(?=\s|$)")
_MARKER_RE = re.compile(r"^\s*\d{1,2}[.)]\s+")
_ANAPHORA = (
    "this ",
    "these ",
    "it ",
    "they ",
    "again ",
    "otherwise",
    "specifically",
    "also ",
    "however",
    "there has been no change",
    "unchanged",
    "stable",
)


@dataclass(frozen=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True)
class Sentence(Span):
    section: int
    marker: str = ""  # a list marker such as "1. " at its start (part of the span)


@dataclass(frozen=True)
class Header(Span):
    title: str  # as written, e.g. "Impression"


class Layout:
    """Section titles and sentence spans of one report (the text itself is not changed)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.headers: list[Header] = []
        self.sentences: list[Sentence] = []
        bounds: list[tuple[int, int]] = []
        pos = 0
        for m in _HEADER_RE.finditer(text):
            bounds.append((pos, m.start()))
            self.headers.append(Header(m.start(), m.end(), m.group(1)))
            pos = m.end()
        bounds.append((pos, len(text)))
        for section, (a, b) in enumerate(bounds):
            self._split(a, b, section)

    def _split(self, a: int, b: int, section: int) -> None:
        chunk = self.text[a:b]
        start = 0
        for m in _END_RE.finditer(chunk):
            piece = chunk[start : m.end()]
            if _MARKER_RE.fullmatch(piece + " ") or not re.search(r"[A-Za-z]", piece):
                continue  # "1." alone: a list marker, stays with the next sentence
            self._add(a + start, a + m.end(), section)
            start = m.end()
        if chunk[start:].strip():
            self._add(a + start, b, section)

    def _add(self, s: int, e: int, section: int) -> None:
        while s < e and self.text[s].isspace():
            s += 1
        while e > s and self.text[e - 1].isspace():
            e -= 1
        if s < e:
            mk = _MARKER_RE.match(self.text[s:e])
            self.sentences.append(Sentence(s, e, section, mk.group(0) if mk else ""))

    def sentence_of(self, pos: int) -> Sentence | None:
        return next((s for s in self.sentences if s.start <= pos < s.end), None)

    def section_sentences(self) -> dict[int, list[Sentence]]:
        out: dict[int, list[Sentence]] = {}
        for s in self.sentences:
            out.setdefault(s.section, []).append(s)
        return out

    def body(self, s: Sentence) -> str:
        """The sentence without its list marker."""
        return self.text[s.start + len(s.marker) : s.end]


def replace_spans(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    """Apply non-overlapping (start, end, replacement) edits; whitespace left doubled is collapsed."""
    out, pos = [], 0
    for a, b, rep in sorted(edits):
        if a < pos:
            raise ValueError("overlapping edits")
        out.append(text[pos:a])
        out.append(rep)
        pos = b
    out.append(text[pos:])
    joined = "".join(out)
    return re.sub(r"[ \t]{2,}", " ", joined).strip()


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _wording_pattern(wording: str) -> re.Pattern[str]:
    """A wording as whole words, any case, a space or a hyphen between its words; a hyphen ends no
    word ("atelectasis-like" is no atelectasis)."""
    words = r"[\s-]+".join(re.escape(w) for w in wording.split())
    return re.compile(rf"(?<![\w-]){words}(?![\w-])", re.I)


def _same_case(new: str, like: str) -> str:
    """``new`` in the case of ``like``: all capitals, a capital first letter, or as written."""
    if like.isupper() and len(like) > 1:
        return new.upper()
    return _cap(new) if like[:1].isupper() else new


def _lower_first(s: str) -> str:
    first = s.split(" ", 1)[0]
    if len(first) > 1 and first.isupper():  # an acronym or XXXX stays as written
        return s
    return s[:1].lower() + s[1:]


# ------------------------------------------------------------------------------------------
# Word lists (tuned on IU X-ray train references only)
# ------------------------------------------------------------------------------------------

#: False findings to add: entity -> sentences that state it (present, unhedged).
FALSE_FINDINGS: dict[str, tuple[str, ...]] = {
    "pleural_effusion": ("There is a small right pleural effusion.", "Moderate left pleural effusion."),
    "pneumothorax": ("There is a small left apical pneumothorax.", "Small right pneumothorax."),
    "consolidation": ("There is right lower lobe consolidation.", "Consolidation in the left lower lobe."),
    "pulmonary_edema": ("There is mild pulmonary edema.", "Moderate interstitial pulmonary edema."),
    "atelectasis": ("There is left basilar atelectasis.", "Right lower lobe atelectasis."),
    "lung_nodule": ("There is a 1 cm nodule in the right upper lobe.", "A pulmonary nodule projects over the left midlung."),
    "lung_mass": ("There is a 3 cm mass in the left upper lobe.", "A right hilar mass is present."),
    "cardiomegaly": ("The heart is enlarged.", "Moderate cardiomegaly."),
    "rib_fracture": ("There is a displaced fracture of the right 6th rib.", "Acute left rib fracture."),
    "pneumoperitoneum": ("There is free air under the right hemidiaphragm.",),
    "hiatal_hernia": ("There is a large hiatal hernia.",),
    "emphysema": ("There is emphysema.", "The lungs show emphysema."),
    "widened_mediastinum": ("The mediastinum is widened.",),
    "lymphadenopathy": ("There is right hilar lymphadenopathy.",),
}

#: Severity word -> replacement in another bucket (adjectives to adjectives, adverbs to adverbs).
SEVERITY_SWAP: dict[str, str] = {
    "small": "large",
    "tiny": "large",
    "trace": "large",
    "minimal": "marked",
    "mild": "severe",
    "slight": "marked",
    "subtle": "marked",
    "borderline": "marked",
    "mildly": "markedly",
    "minimally": "markedly",
    "slightly": "markedly",
    "moderate": "mild",
    "moderately": "mildly",
    "medium": "small",
    "large": "small",
    "severe": "mild",
    "marked": "mild",
    "extensive": "minimal",
    "massive": "small",
    "markedly": "mildly",
    "severely": "mildly",
    "huge": "small",
}


@dataclass(frozen=True)
class Wording:
    """A parent/child pair of wordings: a radiologist reads ``child`` as one kind of ``parent``."""

    child: str
    parent: str
    source: str
    #: Words of a noun phrase that the child contradicts: ``over_specify`` does not name the child
    #: there ("patchy" opacity is no rounded nodule).
    not_with: tuple[str, ...] = ()


#: Words that describe an opacity no nodule or mass is (Fleischner: a nodule is a rounded opacity).
_NOT_ROUNDED = (
    "patchy",
    "streaky",
    "linear",
    "bandlike",
    "platelike",
    "hazy",
    "diffuse",
    "interstitial",
    "reticular",
    "bibasilar",
    "bilateral",
    "multifocal",
    "airspace",
)

#: The wordings of ``generalise`` (child -> parent) and ``over_specify`` (parent -> child), written
#: from the field's own hierarchies, not read off cxreval's ontology: a judge is tested against
#: wordings it was not built from. Singular, lower case, as a report writes them.
SPECIFICITY_WORDINGS: tuple[Wording, ...] = (
    Wording("cardiomegaly", "enlarged cardiomediastinal silhouette", "CheXpert: Enlarged Cardiomediastinum above Cardiomegaly"),
    Wording(
        "widened mediastinum", "enlarged cardiomediastinal silhouette", "CheXpert labeler: Enlarged Cardiomediastinum phrases"
    ),
    Wording("pneumonia", "consolidation", "CheXpert: Consolidation above Pneumonia"),
    Wording("consolidation", "airspace opacity", "CheXpert: Lung Opacity above Consolidation"),
    Wording("atelectasis", "opacity", "CheXpert: Lung Opacity above Atelectasis"),
    Wording("pulmonary edema", "pulmonary opacity", "CheXpert: Lung Opacity above Edema"),
    Wording("nodule", "opacity", "Fleischner glossary: a nodule is a rounded opacity", _NOT_ROUNDED),
    Wording("mass", "opacity", "Fleischner glossary: a mass is an opacity larger than 3 cm", _NOT_ROUNDED),
    Wording("ground glass opacity", "opacity", "Fleischner glossary: ground-glass opacity"),
    Wording("granuloma", "nodule", "Fleischner glossary: granuloma, a nodule"),
    Wording("calcified granuloma", "granuloma", "Fleischner glossary: granuloma, calcified or not"),
    Wording("tension pneumothorax", "pneumothorax", "Fleischner glossary: tension pneumothorax"),
    Wording("hydropneumothorax", "pneumothorax", "CheXpert labeler: Pneumothorax phrases"),
    Wording("honeycombing", "fibrosis", "Fleischner glossary: honeycombing, a sign of fibrosis"),
    Wording("pleural plaque", "pleural thickening", "Fleischner glossary: pleural plaque"),
    Wording("rib fracture", "fracture", "CheXpert labeler: Fracture phrases"),
    Wording("compression fracture", "fracture", "CheXpert labeler: Fracture phrases"),
)

#: Words that end the noun phrase before a wording (determiners, prepositions, verbs): the phrase's
#: other words, back to one of them, must only place, grade, date or hedge the finding.
_PHRASE_STOP = frozenset(
    "a an the of with and or for to is are was were be been as by in on at from there this these that which "
    "suggest suggests suggesting represent represents representing consistent compatible concerning "
    "worrisome suspicious may could has have noted seen again within".split()
)
#: Words that may stand in the noun phrase of a wording beside the attribute vocabulary's.
_PHRASE_MODIFIERS = frozenset(
    "likely possible probable possibly probably early new old acute chronic healing healed focal patchy".split()
)

#: Clauses that claim a change from a prior study (appended to the target's sentence).
FALSE_CHANGES: tuple[tuple[str, str], ...] = (
    ("new", "new since the prior examination"),
    ("increased", "increased compared with the prior study"),
    ("decreased", "decreased compared with the prior study"),
    ("increased", "worse than on the prior radiograph"),
)

#: Categories whose entities do not get a false change claim (devices, post-treatment, exam quality).
_NO_CHANGE = frozenset({"devices", "post_treatment", "exam_quality"})

#: Groups of normal statements that say the same thing; one is swapped for another.
NORMAL_PARAPHRASES: tuple[tuple[str, ...], ...] = (
    (
        "No acute cardiopulmonary abnormality",
        "No acute cardiopulmonary process",
        "No acute cardiopulmonary disease",
        "No acute cardiopulmonary findings",
        "No acute cardiopulmonary abnormalities",
        "No acute cardiopulmonary abnormality identified",
        "No acute radiographic cardiopulmonary process",
    ),
    ("The lungs are clear", "Lungs are clear", "Clear lungs", "The lungs are clear bilaterally"),
    (
        "Heart size normal",
        "The heart is normal in size",
        "Heart size is normal",
        "Heart size within normal limits",
        "Normal heart size",
        "The heart size is normal",
    ),
    (
        "No pneumothorax or pleural effusion",
        "No pleural effusion or pneumothorax",
        "There is no pleural effusion or pneumothorax",
        "There is no pneumothorax or pleural effusion",
        "No pleural effusion or pneumothorax is seen",
        "No pleural effusions or pneumothoraces",
    ),
    ("The mediastinum is unremarkable", "The mediastinal contour is normal", "Mediastinal contour within normal limits"),
    (
        "The cardiomediastinal silhouette is normal in size and contour",
        "Cardiomediastinal silhouette is within normal limits",
        "The cardiomediastinal silhouette is within normal limits",
        "Normal cardiomediastinal silhouette",
        "Cardio mediastinal silhouette is unremarkable",
    ),
    (
        "No acute bony abnormality",
        "No acute bony abnormalities",
        "There are no acute bony findings",
        "No acute osseous abnormality",
    ),
    ("No active disease", "No evidence of active disease", "No acute disease"),
    ("Pulmonary vascularity is within normal limits", "Pulmonary vascularity is normal", "The pulmonary vasculature is normal"),
    ("No pneumothorax", "There is no pneumothorax", "No evidence of pneumothorax", "No pneumothorax is seen"),
    ("No pleural effusion", "There is no pleural effusion", "No pleural effusions", "No evidence of pleural effusion"),
    (
        "No focal consolidation",
        "There is no focal consolidation",
        "No focal airspace consolidation",
        "No focal air space consolidation",
    ),
)

# Words that make a synonym more specific than the plain name (never swapped in or out).
_QUALIFIERS = frozenset(
    "healed healing old remote chronic acute subsegmental platelike plate like discoid linear layering tension "
    "calcified noncalcified non interstitial focal diffuse patchy streaky nodular cavitary cystic apical basilar "
    "bibasilar central peripheral apparent possible probable no normal not without is are appears seen "
    "of the in with and or a an hilar perihilar parenchymal thoracic cervical lumbar spine spinal lung lungs "
    "pulmonary alveolar air airspace space bilateral right left upper lower middle lobe".split()
)
_VERB_RE = re.compile(r"\b(is|are|was|were|appears?|seen|noted|has|have)\b")


def _norm_text(text: str) -> str:
    return " " + " ".join(t.text for t in tokenize(text)) + " "


# ------------------------------------------------------------------------------------------
# The generator
# ------------------------------------------------------------------------------------------


@dataclass
class _Variant:
    candidate: str
    description: str
    target: str | None = None
    before: str = ""
    after: str = ""


Generator = Callable[["_Report | _MeshReport", random.Random], list[_Variant]]
#: The insignificant types' generators: they edit the engine-read report only (shared by every target variant).
SharedGenerator = Callable[["_Report", random.Random], list[_Variant]]


class _Report:
    """One reference with its layout and rule-engine mentions (``engine`` targets)."""

    variant: TargetVariant = "engine"

    def __init__(self, uid: str, text: str, extraction: Extraction) -> None:
        self.uid = uid
        self.text = text
        self.layout = Layout(text)
        self.mentions = [m for m in extraction.mentions if m.start >= 0]
        self.states = extraction.states()

    @cached_property
    def positives(self) -> list[str]:
        """Entities the report states as present (no hedge), in order of first mention."""
        seen: dict[str, None] = {}
        for m in self.mentions:
            if m.status == "present" and not m.historical and not m.implied:
                st = self.states.get(m.entity)
                if st is not None and st.status == "present":
                    seen.setdefault(m.entity, None)
        return list(seen)

    def mentions_of(self, entity: str, positive_only: bool = True) -> list[Mention]:
        return [
            m
            for m in self.mentions
            if m.entity == entity and not m.implied and (not positive_only or m.status in ("present", "uncertain"))
        ]

    def target_sentences(self, entity: str) -> list[Sentence] | None:
        """Sentences with a positive mention of ``entity``, if none of them affirms another entity."""
        sents: dict[int, Sentence] = {}
        for m in self.mentions_of(entity):
            s = self.layout.sentence_of(m.start)
            if s is None:
                return None
            sents[s.start] = s
        if not sents:
            return None
        for m in self.mentions:
            if m.entity != entity and m.status in ("present", "uncertain") and not m.implied:
                if any(s.start <= m.start < s.end for s in sents.values()):
                    return None
        return [sents[k] for k in sorted(sents)]

    def stating_sentences(self, entity: str) -> list[Sentence] | None:
        """The sentences to edit for a side, degree or change: the same as :meth:`target_sentences`."""
        return self.target_sentences(entity)

    @cached_property
    def mentioned(self) -> set[str]:
        return {m.entity for m in self.mentions}

    def surface(self, entity: str) -> str:
        return next((self.text[m.start : m.end] for m in self.mentions_of(entity)), "")

    def extra_names(self, entity: str) -> tuple[tuple[str, ...], ...]:
        return ()

    def stated_spans(self, entity: str) -> list[tuple[int, int]] | None:
        """The character spans naming ``entity`` where the report states it; None when a mention
        of it is denied or hedged (a wording change would then read two ways)."""
        mentions = self.mentions_of(entity, positive_only=False)
        if any(m.status != "present" for m in mentions):
            return None
        return [(m.start, m.end) for m in mentions]


#: Words that deny a name later in their clause ("no effusion", "without effusion") and words that
#: deny one earlier in it ("effusion is not seen", "effusion has resolved") (mesh targets).
_NEGATION_BEFORE = frozenset("no not without negative free none nor resolution".split())
_NEGATION_AFTER = frozenset("not resolved removed normal unremarkable clear cleared excluded absent".split())
#: Tokens that end a clause (mesh targets).
_CLAUSE_BREAKS = frozenset(", ; : but however although though whereas except".split())


def _word_key(word: str) -> str:
    """A token's key for the plain word search: lower case (the tokeniser's), a final ``s`` dropped."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _name_keys(name: str) -> tuple[str, ...]:
    return tuple(_word_key(t) for t in term_tokens(name))


@dataclass(frozen=True)
class _Occurrence:
    entity: str
    first: int  # token indices [first, last)
    last: int
    start: int  # character span
    end: int
    stated: bool  # no negation word in its clause


class _Lexicon:
    """Every ontology name, as token keys, for the plain word search (no rule engine)."""

    def __init__(self, ontology: Ontology) -> None:
        self.by_first: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for e in ontology.entities:
            for t in dict.fromkeys(_name_keys(t) for t in e.terms):
                if t:
                    self.by_first.setdefault(t[0], []).append((t, e.id))


class _MeshReport:
    """One reference with its human MeSH codes; targets and sentences found by plain word search.

    Targets are the coded entities. An entity is *named* where any of its ontology terms or the
    heading of one of its codes occurs as a run of whole words (case-insensitive, a final ``s``
    ignored); a name is *stated* unless a negation word of its clause denies it (one of
    ``_NEGATION_BEFORE`` before it, or of ``_NEGATION_AFTER`` after it). Sentences to remove or
    negate are every sentence naming the target; sentences to edit (side, degree, change) are the
    ones stating it. A target is refused when it is stated nowhere, or when a sentence naming it
    states another entity (another coded one anywhere in it, or any other ontology name that does
    not overlap the target's own words).
    """

    variant: TargetVariant = "mesh"

    def __init__(
        self, uid: str, text: str, coded: dict[str, tuple[tuple[tuple[str, ...], ...], str | None]], lexicon: _Lexicon
    ) -> None:
        self.uid = uid
        self.text = text
        self.layout = Layout(text)
        self.coded = coded  # entity -> (heading keys..., coded side)
        toks = tokenize(text)
        keys = [_word_key(t.text) for t in toks]
        # the clause of each token: a new one at a break token or a new sentence
        sent_of = [self._sentence_index(t.start) for t in toks]
        clause, c = [], 0
        for i, k in enumerate(keys):
            if i and (k in _CLAUSE_BREAKS or sent_of[i] != sent_of[i - 1]):
                c += 1
            clause.append(c)
        before = [i for i, k in enumerate(keys) if k in _NEGATION_BEFORE]
        after = [i for i, k in enumerate(keys) if k in _NEGATION_AFTER]

        def occ(entity: str, i: int, n: int) -> _Occurrence:
            denied = any(j < i and clause[j] == clause[i] for j in before) or any(
                j >= i + n and clause[j] == clause[i] for j in after
            )
            return _Occurrence(entity, i, i + n, toks[i].start, toks[i + n - 1].end, not denied)

        found: list[_Occurrence] = []
        for i, k in enumerate(keys):
            for name, entity in lexicon.by_first.get(k, ()):
                if tuple(keys[i : i + len(name)]) == name:
                    found.append(occ(entity, i, len(name)))
            for entity, (headings, _) in coded.items():
                for name in headings:
                    if name and tuple(keys[i : i + len(name)]) == name:
                        found.append(occ(entity, i, len(name)))
        self.occurrences = list(dict.fromkeys(found))
        self.sent_of = {o: self._sentence_index(o.start) for o in found}

    def _sentence_index(self, pos: int) -> int:
        return next((k for k, s in enumerate(self.layout.sentences) if s.start <= pos < s.end), -1)

    @cached_property
    def positives(self) -> list[str]:
        """Coded entities stated somewhere (in the order they were coded)."""
        return [e for e in self.coded if any(o.entity == e and o.stated for o in self.occurrences)]

    @cached_property
    def mentioned(self) -> set[str]:
        """Coded entities and every entity one of whose names occurs (stated or not)."""
        return set(self.coded) | {o.entity for o in self.occurrences}

    def _clean(self, entity: str, k: int) -> bool:
        own = [o for o in self.occurrences if o.entity == entity and self.sent_of[o] == k]
        for o in self.occurrences:
            if o.entity == entity or self.sent_of[o] != k or not o.stated:
                continue
            if o.entity in self.coded or not any(o.first < x.last and x.first < o.last for x in own):
                return False
        return True

    def target_sentences(self, entity: str) -> list[Sentence] | None:
        """Every sentence naming ``entity``, if one states it and none states another entity."""
        ks = sorted({self.sent_of[o] for o in self.occurrences if o.entity == entity})
        if -1 in ks or not any(o.entity == entity and o.stated for o in self.occurrences):
            return None
        if not all(self._clean(entity, k) for k in ks):
            return None
        return [self.layout.sentences[k] for k in ks]

    def stating_sentences(self, entity: str) -> list[Sentence] | None:
        """The sentences stating ``entity`` (None when :meth:`target_sentences` refuses it)."""
        if self.target_sentences(entity) is None:
            return None
        ks = sorted({self.sent_of[o] for o in self.occurrences if o.entity == entity and o.stated})
        return [self.layout.sentences[k] for k in ks]

    def surface(self, entity: str) -> str:
        o = next((o for o in self.occurrences if o.entity == entity and o.stated), None)
        return self.text[o.start : o.end] if o else ""

    def extra_names(self, entity: str) -> tuple[tuple[str, ...], ...]:
        return self.coded.get(entity, ((), None))[0]

    def stated_spans(self, entity: str) -> list[tuple[int, int]] | None:
        """The character spans naming ``entity`` (the longest occurrence where several overlap);
        None when one of them is denied."""
        own = [o for o in self.occurrences if o.entity == entity]
        if any(not o.stated for o in own):
            return None
        longest = [
            o
            for o in own
            if not any(
                x is not o and x.first <= o.first and o.last <= x.last and x.last - x.first > o.last - o.first for x in own
            )
        ]
        return sorted({(o.start, o.end) for o in longest})


class PerturbationSuite:
    """Builds labelled pairs from reference reports.

        >>> suite = PerturbationSuite(seed=0)
        >>> pairs = suite.perturb("r1", "Findings: Small left pleural effusion. Impression: No pneumothorax.")
        >>> sorted({p.perturbation for p in pairs if p.significant})[:3]
        ['add_finding', 'change_severity', 'false_change']

    ``targets`` names the target variants made for the significant types (both by default);
    ``mesh`` targets need the report's MeSH field (``perturb(uid, text, mesh)``): a report given
    without one gets ``engine`` targets only.
    """

    def __init__(
        self,
        ontology: Ontology | None = None,
        *,
        seed: int = 0,
        per_type: int = 1,
        types: Sequence[PerturbationType] = ALL_TYPES,
        targets: Sequence[TargetVariant] = TARGET_VARIANTS,
    ) -> None:
        self.ontology = ontology or load_ontology()
        self.extractor = RuleExtractor(self.ontology)
        self.seed = seed
        self.per_type = per_type
        unknown = set(types) - set(ALL_TYPES)
        if unknown:
            raise ValueError(f"unknown perturbation types {sorted(unknown)}; known: {', '.join(ALL_TYPES)}")
        self.types = tuple(types)
        bad = set(targets) - set(TARGET_VARIANTS)
        if bad or not targets:
            raise ValueError(f"unknown target variants {sorted(bad)}; known: {', '.join(TARGET_VARIANTS)}")
        self.targets: tuple[TargetVariant, ...] = tuple(t for t in TARGET_VARIANTS if t in targets)
        self._mapper = MeshMapper(self.ontology)
        self._lexicon = _Lexicon(self.ontology)
        vocab = attribute_vocabulary()
        phrases = [term_tokens(p) for kind in ("sides", "zones", "severity", "comparison") for p in getattr(vocab, kind)]
        self._attr_words = {p[0] for p in phrases if len(p) == 1}
        self._attr_phrases = [" ".join(p) for p in phrases if len(p) > 1]
        negation = {"no", "not", "without", "none"}
        self._modifiers = frozenset({t for p in phrases for t in p} - negation) | _PHRASE_MODIFIERS
        self._severity_words = {p for p in vocab.severity if len(term_tokens(p)) == 1}
        self._severity_bucket = dict(vocab.severity)
        self._multi_severity = [p for p in vocab.severity if len(term_tokens(p)) > 1]
        self._comparison_phrases = [" ".join(term_tokens(p)) for p in vocab.comparison] + ["prior", "previous"]
        trie = build_entity_trie(self.ontology)
        # term -> the entity that owns it after the ontology's precedence rules
        self._owner = {t: trie.get(term_tokens(t)) for e in self.ontology.entities for t in e.terms}
        self._generators: dict[str, Generator] = {
            "omit_finding": self._omit,
            "add_finding": self._add,
            "negate_finding": self._negate,
            "flip_laterality": self._flip,
            "change_severity": self._severity,
            "false_change": self._change,
            "generalise": self._generalise,
            "over_specify": self._over_specify,
            "move_tip": self._move_tip,
            "resize": self._resize,
            "drop_place": self._drop_place,
        }
        self._shared_generators: dict[str, SharedGenerator] = {
            "reorder_sentences": self._reorder,
            "synonym_swap": self._synonym,
            "paraphrase_normal": self._paraphrase,
            "change_case": self._case,
            "punctuation": self._punctuation,
            "line_breaks": self._line_breaks,
            "merge_split": self._merge_split,
            "section_headers": self._headers,
        }

    @property
    def signature(self) -> str:
        return (
            f"perturb@{SUITE_VERSION}|seed:{self.seed}|per_type:{self.per_type}|targets:{'+'.join(self.targets)}"
            f"|ontology:{self.ontology.signature}"
        )

    # -- public ----------------------------------------------------------------------------
    def coded_entities(self, mesh: str) -> dict[str, tuple[tuple[tuple[str, ...], ...], str | None]]:
        """Entity -> (its codes' headings as word keys, its coded side) of a MeSH field, in code order.

        Codes are mapped with the ontology's ``mesh`` patterns (:class:`~cxreval.ontology.mesh.MeshMapper`,
        as the IU X-ray gold standard does); ``normal`` and unmapped codes give nothing; two sides
        make ``bilateral``.
        """
        matched, _ = self._mapper.map_field(mesh)
        heads: dict[str, dict[tuple[str, ...], None]] = {}
        sides: dict[str, set[str]] = {}
        for m in matched:
            heads.setdefault(m.entity_id, {}).setdefault(_name_keys(m.code.heading), None)
            sides.setdefault(m.entity_id, set()).update(m.sides)
        out = {}
        for e, hs in heads.items():
            sd = sides[e]
            side = "bilateral" if "bilateral" in sd or {"left", "right"} <= sd else next(iter(sd), None)
            out[e] = (tuple(hs), side)
        return out

    def perturb(self, uid: str, text: str, mesh: str | None = None) -> list[PerturbedPair]:
        """Every variant of one reference report (at most ``per_type`` of each type and target variant).

        ``mesh``: the report's MeSH field (``;``-separated codes such as ``Pleural Effusion/left/small``);
        without it the report gets no ``mesh``-target variants.
        """
        engine = _Report(uid, text, self.extractor.extract(text))
        reports: dict[str, _Report | _MeshReport] = {}
        for t in self.targets:
            if t == "engine":
                reports[t] = engine
            elif mesh is not None:
                reports[t] = _MeshReport(uid, text, self.coded_entities(mesh), self._lexicon)
        out: list[PerturbedPair] = []
        for ptype in self.types:
            significant = ptype in SIGNIFICANT
            runs: list[tuple[str, _Report | _MeshReport]] = list(reports.items()) if significant else [(SHARED, engine)]
            for label, report in runs:
                # engine and shared draws keep the seed string of suite version 1
                rng = random.Random(f"{self.seed}:{uid}:{ptype}" + (":mesh" if label == "mesh" else ""))
                if significant:
                    variants = self._generators[ptype](report, rng)
                else:  # the one run: the engine-read report
                    variants = self._shared_generators[ptype](engine, rng)
                seen: set[str] = set()
                k = 0
                for v in variants:
                    if k >= self.per_type:
                        break
                    cand = v.candidate
                    if cand == text or cand in seen or not cand.strip():
                        continue
                    seen.add(cand)
                    k += 1
                    out.append(
                        PerturbedPair(
                            pair_id=f"{uid}:{ptype}:{label}:{k}" if significant else f"{uid}:{ptype}:{k}",
                            source_uid=uid,
                            perturbation=ptype,
                            significant=significant,
                            targets=label,
                            target_entity=v.target if significant else None,
                            expected=EXPECTED[ptype] if significant else NO_ERROR,
                            description=v.description,
                            before=v.before,
                            after=v.after,
                            reference=text,
                            candidate=cand,
                        )
                    )
        return out

    def build(self, reports: Iterable[tuple[str, str] | tuple[str, str, str | None]]) -> list[PerturbedPair]:
        """The suite for (uid, text) or (uid, text, MeSH field) references, in input order."""
        return [p for r in reports for p in self.perturb(*r)]

    # -- helpers ---------------------------------------------------------------------------
    def phrase(self, entity: str, surface: str = "") -> str:
        """A plain noun phrase naming ``entity``: the mention's own words when they are a bare term."""
        terms = self.ontology.entity(entity).terms
        norm = " ".join(term_tokens(surface))
        if norm in terms and self._bare(norm):
            return surface.lower()
        for t in terms:
            if self._bare(t):
                return t
        return terms[0]

    def _bare(self, term: str) -> bool:
        toks = term_tokens(term)
        padded = f" {' '.join(toks)} "
        return (
            bool(toks)
            and not _VERB_RE.search(term)
            and not (set(toks) & self._attr_words)
            and not any(f" {p} " in padded for p in self._attr_phrases)
            and not (set(toks) & {"no", "not", "without", "normal"})
        )

    def _names_remaining(self, entity: str, candidate: str, extra: Sequence[tuple[str, ...]] = ()) -> bool:
        hay = _norm_text(candidate)
        if any(f" {' '.join(term_tokens(t))} " in hay for t in self.ontology.entity(entity).terms):
            return True
        if extra:  # mesh targets: also the codes' headings, in the word search's own keys
            keyed = " " + " ".join(_word_key(w) for w in hay.split()) + " "
            return any(f" {' '.join(x)} " in keyed for x in extra if x)
        return False

    def _remove_sentences(self, report: _Report | _MeshReport, sents: Sequence[Sentence]) -> str:
        edits = [(s.start, s.end, "") for s in sents]
        # A section left with no sentence loses its title too.
        by_section = report.layout.section_sentences()
        gone = {(s.start, s.end) for s in sents}
        for sec, members in by_section.items():
            if sec > 0 and all((m.start, m.end) in gone for m in members):
                h = report.layout.headers[sec - 1]
                edits.append((h.start, h.end, ""))
        return replace_spans(report.text, edits)

    # -- significant ----------------------------------------------------------------------
    def _targets(self, report: _Report | _MeshReport, rng: random.Random) -> list[str]:
        ents = list(report.positives)
        rng.shuffle(ents)
        return ents

    def _omit(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        out = []
        for e in self._targets(report, rng):
            sents = report.target_sentences(e)
            if not sents:
                continue
            cand = self._remove_sentences(report, sents)
            if not Layout(cand).sentences or self._names_remaining(e, cand, report.extra_names(e)):
                continue
            removed = " ".join(report.text[s.start : s.end] for s in sents)
            out.append(_Variant(cand, f"removed the {len(sents)} sentence(s) stating {e}", e, removed, ""))
        return out

    def _negate(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        out = []
        for e in self._targets(report, rng):
            sents = report.target_sentences(e)
            if not sents:
                continue
            negation = f"No {self.phrase(e, report.surface(e))}."
            edits = [(s.start, s.end, s.marker + negation) for s in sents]
            cand = replace_spans(report.text, edits)
            rest = replace_spans(report.text, [(s.start, s.end, "") for s in sents])
            if self._names_remaining(e, rest, report.extra_names(e)):
                continue
            before = " ".join(report.text[s.start : s.end] for s in sents)
            out.append(_Variant(cand, f"replaced the {len(sents)} sentence(s) stating {e} by '{negation}'", e, before, negation))
        return out

    def _add(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        mentioned = report.mentioned
        options = [e for e in FALSE_FINDINGS if e not in mentioned and e in self.ontology.entity_ids]
        rng.shuffle(options)
        out = []
        sections = report.layout.section_sentences()
        for e in options:
            sentence = rng.choice(FALSE_FINDINGS[e])
            first = min(sections) if sections else 0
            members = sections.get(first, [])
            pos = members[-1].end if members else len(report.text)
            cand = replace_spans(report.text, [(pos, pos, " " + sentence + (" " if pos < len(report.text) else ""))])
            out.append(_Variant(cand, f"added the false finding '{sentence}'", e, "", sentence))
        return out

    def _flip(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        out = []
        for e in self._targets(report, rng):
            if isinstance(report, _MeshReport):  # the coded side, if any, must be the one written
                side = report.coded[e][1]
                if side == "bilateral":
                    continue
            else:
                side = report.states[e].side
                if side not in ("left", "right"):
                    continue
            if "location" not in self.ontology.entity(e).attributes:
                continue
            sents = report.stating_sentences(e)
            if not sents:
                continue
            edits: list[tuple[int, int, str]] = []
            words = set()
            for s in sents:
                seg = report.text[s.start : s.end]
                if re.search(r"\b(bilateral(ly)?|both|bibasilar|bibasal|biapical)\b", seg, re.I):
                    edits = []
                    break
                for m in re.finditer(r"\b(left|right)\b", seg, re.I):
                    words.add(m.group(1).lower())
                    new = "right" if m.group(1).lower() == "left" else "left"
                    edits.append((s.start + m.start(), s.start + m.end(), _same_case(new, m.group(1))))
            if not edits or len(words) != 1 or (isinstance(report, _MeshReport) and side is not None and words != {side}):
                continue
            cand = replace_spans(report.text, edits)
            side = side or next(iter(words))
            flipped = "right" if side == "left" else "left"
            out.append(_Variant(cand, f"{e}: side {side} -> {flipped}", e, side, flipped))
        return out

    def _severity(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        out = []
        for e in self._targets(report, rng):
            # engine targets: the engine read a degree; mesh targets: the degree words below decide
            if (
                not isinstance(report, _MeshReport) and report.states[e].severity is None
            ) or "severity" not in self.ontology.entity(e).attributes:
                continue
            sents = report.stating_sentences(e)
            if not sents:
                continue
            edits: list[tuple[int, int, str]] = []
            found: list[str] = []
            for s in sents:
                seg = report.text[s.start : s.end]
                norm = _norm_text(seg)
                if any(f" {' '.join(term_tokens(p))} " in norm for p in self._multi_severity):
                    found = []
                    break
                for m in re.finditer(r"[A-Za-z]+", seg):
                    w = m.group().lower()
                    if w in self._severity_words and w in SEVERITY_SWAP:
                        if re.match(r"\s*([.,;:]|$)", seg[m.end() :]):
                            found = []  # predicative ("the heart is large"): a new degree word would misread
                            break
                        found.append(w)
                        edits.append((s.start + m.start(), s.start + m.end(), _same_case(SEVERITY_SWAP[w], m.group())))
                else:
                    continue
                break
            # every degree word of the finding must move to the same new bucket
            if not found or len({self._severity_bucket[SEVERITY_SWAP[w]] for w in found}) != 1:
                continue
            cand = replace_spans(report.text, edits)
            news = [SEVERITY_SWAP[w] for w in found]
            old = self._severity_bucket[found[0]] if isinstance(report, _MeshReport) else report.states[e].severity
            out.append(
                _Variant(
                    cand,
                    f"{e}: severity {old} -> {self._severity_bucket[news[0]]} "
                    f"({', '.join(f'{a} -> {b}' for a, b in zip(found, news))})",
                    e,
                    ", ".join(found),
                    ", ".join(news),
                )
            )
        return out

    def _change(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        out = []
        for e in self._targets(report, rng):
            ent = self.ontology.entity(e)
            # a device or a post-operative change does not "worsen": only findings get a false change
            compared = None if isinstance(report, _MeshReport) else report.states[e].comparison
            if compared is not None or "comparison" not in ent.attributes or ent.category in _NO_CHANGE:
                continue
            sents = report.stating_sentences(e)
            if not sents:
                continue
            if any(f" {c} " in _norm_text(report.text[s.start : s.end]) for s in sents for c in self._comparison_phrases):
                continue
            _, clause = rng.choice(FALSE_CHANGES)
            surface = report.surface(e)
            clause_form = rng.random() < 0.5 and not any(
                re.search(r"\b(but|however|although|with)\b|;", report.text[s.start : s.end], re.I) for s in sents
            )
            if clause_form:  # "..., increased compared with the prior study."
                edits = [(s.start, s.end, f"{report.text[s.start : s.end].rstrip('.!? ')}, {clause}.") for s in sents]
                how = f"appended ', {clause}' to its sentence(s)"
                added = clause
            else:  # a sentence of its own after the first one: "The effusion is new since ..."
                added = f"The {self.phrase(e, surface)} is {clause}."
                edits = [(sents[0].end, sents[0].end, " " + added)]
                how = f"added the sentence '{added}'"
            cand = replace_spans(report.text, edits)
            out.append(_Variant(cand, f"{e}: false change from a prior, {how}", e, "", added))
        return out

    def _generalise(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        return self._respecify(report, rng, up=True)

    def _over_specify(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        return self._respecify(report, rng, up=False)

    def _move_tip(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        """A device's tip moved to another place (:data:`TIP_MOVES`): its landmark's words in the
        sentence that states it replaced, the device still named by other words."""
        out: list[_Variant] = []
        for e in self._targets(report, rng):
            sents = report.stating_sentences(e)
            spans = report.stated_spans(e) or []
            if not sents or len(sents) != 1:
                continue
            s = sents[0]
            seg = report.text[s.start : s.end]
            places = {
                (h.start(), h.end()) for devices, pattern, _ in TIP_MOVES if e in devices for h in re.finditer(pattern, seg, re.I)
            }
            places |= {h.span() for h in _OTHER_TIP_PLACES.finditer(seg) if not any(a <= h.start() < b for a, b in places)}
            if len(places) != 1:
                continue  # two places named ("below the diaphragm ... in the stomach"): moving one reads two ways
            for devices, pattern, moved in TIP_MOVES:
                m = re.search(pattern, seg, re.I) if e in devices else None
                if m is None:
                    continue
                a, b = s.start + m.start(), s.start + m.end()
                if not any(y <= a or x >= b for x, y in spans):
                    break  # the landmark is inside the device's only name ("tip in the SVC")
                new = moved(m) if callable(moved) else moved
                cand = replace_spans(report.text, [(a, b, new)])
                out.append(
                    _Variant(cand, f"{e}: tip moved '{m.group()}' -> '{new}' (Godoy 2012, Goodman 1976)", e, m.group(), new)
                )
                break
        return out

    def _resize(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        """A finding's stated size moved across 3 cm (the Fleischner glossary's nodule and mass) and
        by a factor of at least 3: the one size written in the sentence that states it."""
        out: list[_Variant] = []
        for e in self._targets(report, rng):
            ent = self.ontology.entity(e)
            if "severity" not in ent.attributes or ent.category == "devices":
                continue
            if isinstance(report, _Report) and report.states[e].size_mm is None:
                continue
            sents = report.stating_sentences(e)
            if not sents:
                continue
            hits = [(s, m) for s in sents for m in _SIZE_RE.finditer(report.text[s.start : s.end])]
            if len(hits) != 1:
                continue
            s, m = hits[0]
            a, b = s.start + m.start(), s.start + m.end()
            if not any(_same_phrase(report.text, a, b, x, y) for x, y in report.stated_spans(e) or ()):
                continue  # the size is another's ("fracture, with 5 mm displacement")
            if re.search(r"\d\s*[-–]\s*$", report.text[:a]) or not _one_unit(m.group()):
                continue  # a range ("2-3 mm") or mixed units ("1.2 cm x 8 mm"): one edit would read two ways
            new = _resized(m.group())
            if new is None:
                continue
            cand = replace_spans(report.text, [(s.start + m.start(), s.start + m.end(), new)])
            out.append(_Variant(cand, f"{e}: size '{m.group()}' -> '{new}'", e, m.group(), new))
        return out

    def _drop_place(self, report: _Report | _MeshReport, rng: random.Random) -> list[_Variant]:
        """One place of a list of two places on two sides dropped ("the right upper and left lower
        lobes" -> "the right upper lobe"; "right and left" -> "right"): the finding stays at the
        first place only, on one side."""
        out: list[_Variant] = []
        for e in self._targets(report, rng):
            if "location" not in self.ontology.entity(e).attributes:
                continue
            if isinstance(report, _Report) and report.states[e].side != "bilateral":
                continue
            sents = report.stating_sentences(e)
            if not sents:
                continue
            hits = [
                (s, m)
                for s in sents
                for m in _PLACE_LIST_RE.finditer(report.text[s.start : s.end])
                if m["side"].lower() != m["other"].lower()
            ]
            if len(hits) != 1:
                continue
            s, m = hits[0]
            noun = m["own"] or _SINGULAR.get((m["noun"] or "").lower(), "")
            zone = m["zone"] or ("" if m["own"] else m["other_zone"] or "")  # "right and left lower lobes": both lower
            new = f"{m['side']}{zone}{noun}"
            cand = replace_spans(report.text, [(s.start + m.start(), s.start + m.end(), new)])
            out.append(_Variant(cand, f"{e}: place dropped '{m.group()}' -> '{new}'", e, m.group(), new))
        return out

    def _respecify(self, report: _Report | _MeshReport, rng: random.Random, *, up: bool) -> list[_Variant]:
        """``generalise`` (``up``: the finding named by its parent's wording) or ``over_specify``
        (by a child's wording), for a target that every statement names with one wording of
        :data:`SPECIFICITY_WORDINGS`; every statement is changed, so no other names the finding."""
        out: list[_Variant] = []
        for e in self._targets(report, rng):
            sents = report.target_sentences(e)
            spans = report.stated_spans(e) if sents else None
            if not sents or not spans:
                continue
            found = self._wording_in(report.text, spans, up)
            if found is None:
                continue
            name, spans = found
            wording = self._choose_wording(report.text, name, spans, up, rng)
            if wording is None:
                continue
            new = wording.parent if up else wording.child
            rest = replace_spans(report.text, [(a, b, "") for a, b in spans])
            if not self._respecify_fits(report, spans, sents, wording, up) or self._names_remaining(
                e, rest, report.extra_names(e)
            ):
                continue
            cand = replace_spans(report.text, [(a, b, _same_case(new, report.text[a:b])) for a, b in spans])
            if up and isinstance(report, _Report) and self._still_read(e, cand):
                continue  # "Compression fracture of T12." -> "Fracture of T12.": still read as the child
            how = "generalised" if up else "over-specified"
            out.append(_Variant(cand, f"{e}: {how} '{name}' -> '{new}' ({wording.source})", e, name, new))
        return out

    def _choose_wording(
        self, text: str, name: str, spans: Sequence[tuple[int, int]], up: bool, rng: random.Random
    ) -> Wording | None:
        """The wording pair to use for ``name`` (a child's parent, or one of a parent's children,
        drawn with the seed): over-specifying, not a child the report names already (saying it
        again adds no specificity) nor one its noun phrase contradicts (``Wording.not_with``)."""
        options = [w for w in SPECIFICITY_WORDINGS if (w.child if up else w.parent) == name]
        if not up:
            phrase = {w for a, _ in spans for w in self._phrase_before(text, a)}
            options = [w for w in options if not _wording_pattern(w.child).search(text) and not phrase & set(w.not_with)]
        return rng.choice(options) if options else None

    def _still_read(self, entity: str, candidate: str) -> bool:
        """Whether the rule engine still reads ``entity`` as stated in ``candidate`` (engine targets)."""
        state = self.extractor.extract(candidate).states().get(entity)
        return state is not None and state.status == "present"

    def _phrase_before(self, text: str, start: int) -> list[str]:
        """The words of the noun phrase before ``start``, back to a determiner, preposition or verb."""
        sent = Layout(text).sentence_of(start)
        out = []
        for word in reversed(term_tokens(text[sent.start if sent else 0 : start])):
            if word in _PHRASE_STOP:
                break
            out.append(word)
        return out

    def _wording_in(self, text: str, spans: Sequence[tuple[int, int]], up: bool) -> tuple[str, list[tuple[int, int]]] | None:
        """The longest wording (a child's when ``up``, else a parent's) that every span names once
        as the finding's whole name (:meth:`_whole_name`), with its place in each span."""
        names = sorted({w.child if up else w.parent for w in SPECIFICITY_WORDINGS}, key=len, reverse=True)
        for name in names:
            pattern = _wording_pattern(name)
            # searched in the whole text, so that the look-arounds see past the span ("atelectasis-like")
            hits = [[m for m in pattern.finditer(text, a) if m.end() <= b] for a, b in spans]
            if all(len(h) == 1 and self._whole_name(text, span, h[0].span()) for h, span in zip(hits, spans)):
                places = sorted({(h[0].start(), h[0].end()) for h in hits})
                if all(b <= c for (_, b), (c, _) in zip(places, places[1:])):
                    return name, places
                return None
        return None

    def _respecify_fits(
        self,
        report: _Report | _MeshReport,
        spans: Sequence[tuple[int, int]],
        sents: Sequence[Sentence],
        wording: Wording,
        up: bool,
    ) -> bool:
        """A generalised sentence must not keep the detail it drops ("healing fracture of the 4th
        rib" still names a rib fracture); an over-specified one must not say it already ("old
        fracture of the 6th rib" is a rib fracture: "compression" would name another finding)."""
        if up:
            detail = set(term_tokens(wording.child)) - set(term_tokens(wording.parent))
        else:
            detail = {t for w in SPECIFICITY_WORDINGS if w.parent == wording.parent for t in term_tokens(w.child)} - set(
                term_tokens(wording.parent)
            )
        for sent in sents:
            inner = [(a - sent.start, b - sent.start, " ") for a, b in spans if sent.start <= a < sent.end]
            if detail & set(term_tokens(replace_spans(report.text[sent.start : sent.end], inner))):
                return False
        return True

    def _whole_name(self, text: str, mention: tuple[int, int], wording: tuple[int, int]) -> bool:
        """The wording is the finding's whole name: the other words of its mention and of its noun
        phrase (back to a determiner, preposition or verb) only place, grade, date or hedge it
        ("left basilar opacity"); none qualifies it ("calcified lingular granuloma" is no plain
        "granuloma" to generalise, "clavicle fracture" no "fracture" to over-specify)."""
        if any(word not in self._modifiers for word in self._phrase_before(text, wording[0])):
            return False
        after = term_tokens(text[wording[1] : max(mention[1], wording[1])])
        return all(w in self._modifiers or w in _PHRASE_STOP for w in after)

    # -- insignificant --------------------------------------------------------------------
    def _reorder(self, report: _Report, rng: random.Random) -> list[_Variant]:
        edits = []
        for _sec, members in report.layout.section_sentences().items():
            if len(members) < 2 or any(m.marker for m in members):
                continue
            if any(report.text[m.start : m.end].lower().startswith(_ANAPHORA) for m in members):
                continue
            order = list(range(len(members)))
            for _ in range(10):
                rng.shuffle(order)
                if order != sorted(order):
                    break
            if order == sorted(order):
                continue
            for slot, src in zip(members, order):
                edits.append((slot.start, slot.end, report.text[members[src].start : members[src].end]))
        if not edits:
            return []
        return [_Variant(replace_spans(report.text, edits), "sentences reordered within their sections")]

    def _synonym(self, report: _Report, rng: random.Random) -> list[_Variant]:
        out = []
        mentions = [m for m in report.mentions if not m.implied]
        rng.shuffle(mentions)
        for m in mentions:
            surface = report.text[m.start : m.end]
            norm = " ".join(term_tokens(surface))
            terms = self.ontology.entity(m.entity).terms
            if norm not in terms or not self._swappable(norm):
                continue
            options = [
                t
                for t in terms
                if t != norm
                and self._swappable(t)
                and self._owner.get(t) == m.entity
                and len(t) > 3
                and _plural(t) == _plural(norm)
            ]
            if not options:
                continue
            new = _same_case(rng.choice(options), surface)
            cand = replace_spans(report.text, [(m.start, m.end, new)])
            out.append(_Variant(cand, f"{m.entity}: '{surface}' -> '{new}' (ontology synonym)", None, surface, new))
        return out

    def _swappable(self, term: str) -> bool:
        toks = term_tokens(term)
        # short noun phrases only: "pleural fluid", "heart enlargement"; not adjectival heads
        # ("tortuous aortic") nor descriptions ("enlarged heart size")
        return (
            self._bare(term)
            and not (set(toks) & _QUALIFIERS)
            and len(toks) <= 2
            and not (len(toks) > 1 and toks[-1].endswith(("ic", "al", "ed", "ous")))
        )

    def _paraphrase(self, report: _Report, rng: random.Random) -> list[_Variant]:
        out = []
        sents = list(report.layout.sentences)
        rng.shuffle(sents)
        for s in sents:
            body = report.layout.body(s)
            key = body.rstrip(". ").strip().lower()
            for group in NORMAL_PARAPHRASES:
                lowered = [g.lower() for g in group]
                if key in lowered:
                    new = rng.choice([g for g in group if g.lower() != key])
                    cand = replace_spans(report.text, [(s.start, s.end, s.marker + new + ".")])
                    out.append(_Variant(cand, f"normal statement '{body}' -> '{new}.'", None, body, new + "."))
                    break
        return out

    def _case(self, report: _Report, rng: random.Random) -> list[_Variant]:
        ops = [("lower", report.text.lower()), ("upper", report.text.upper())]
        rng.shuffle(ops)
        return [_Variant(c, f"whole report in {name} case", None, "", name) for name, c in ops]

    def _punctuation(self, report: _Report, rng: random.Random) -> list[_Variant]:
        spaced = re.sub(r"\s*([.,;:])(?=\s|$)", r" \1", report.text)  # tokenised style: "effusion ."
        no_final = re.sub(r"[.!?]+\s*$", "", report.text)
        doubled = re.sub(r"([.,])(?=\s|$)", r"\1\1", report.text).replace(",,", ",")
        ops = [("space before punctuation", spaced), ("no final full stop", no_final), ("doubled full stops", doubled)]
        rng.shuffle(ops)
        return [_Variant(c, name, None, "", name) for name, c in ops]

    def _line_breaks(self, report: _Report, rng: random.Random) -> list[_Variant]:
        edits = []
        text = report.text
        for a in report.layout.sentences[:-1]:
            gap = re.match(r"\s*", text[a.end :])
            edits.append((a.end, a.end + (gap.end() if gap else 0), "\n"))
        for h in report.layout.headers:
            if h.start > 0:
                edits.append((h.start, h.start, "\n"))
        edits = _merge_insertions(report.text, edits)
        if not edits:
            return []
        cand = _apply_raw(report.text, edits)
        return [_Variant(cand, "one sentence per line, a blank line before each section title", None, "", "\\n")]

    def _merge_split(self, report: _Report, rng: random.Random) -> list[_Variant]:
        out = []
        # split at a semicolon that joins two clauses
        for s in report.layout.sentences:
            seg = report.text[s.start : s.end]
            m = re.search(r";\s+(?=[A-Za-z])", seg)
            if m:
                rest = seg[m.end() :]
                new = seg[: m.start()] + ". " + _cap(rest)
                out.append(
                    _Variant(
                        replace_spans(report.text, [(s.start, s.end, new)]), "split a sentence at its semicolon", None, seg, new
                    )
                )
        pairs = []
        for _sec, members in report.layout.section_sentences().items():
            for a, b in zip(members, members[1:]):
                if not a.marker and not b.marker and report.text[a.end - 1] == ".":
                    pairs.append((a, b))
        rng.shuffle(pairs)
        for a, b in pairs:
            first = report.text[a.start : a.end - 1]
            second = _lower_first(report.text[b.start : b.end])
            new = f"{first}; {second}"
            out.append(
                _Variant(
                    replace_spans(report.text, [(a.start, b.end, new)]),
                    "merged two sentences with a semicolon",
                    None,
                    report.text[a.start : b.end],
                    new,
                )
            )
        return out

    def _headers(self, report: _Report, rng: random.Random) -> list[_Variant]:
        heads = report.layout.headers
        out: list[_Variant] = []
        if heads:
            ops = []
            for h in heads:
                title = report.text[h.start : h.end].strip()
                ops.append((f"dropped '{title}'", title, [(h.start, h.end, "")]))
            if len(heads) > 1:
                ops.append(
                    (
                        "dropped every section title",
                        " ".join(report.text[h.start : h.end].strip() for h in heads),
                        [(h.start, h.end, "") for h in heads],
                    )
                )
            rng.shuffle(ops)
            out.extend(_Variant(replace_spans(report.text, e), d, None, before, "") for d, before, e in ops)
        by_sec = report.layout.section_sentences()
        if len(by_sec) == 1:
            # one section: add the other title (findings before its last sentence, or a leading one)
            members = next(iter(by_sec.values()))
            titles = {h.title.lower() for h in heads}
            if not heads:
                out.append(_Variant("Findings: " + report.text, "added 'Findings:'", None, "", "Findings:"))
            elif len(members) >= 2 and titles <= {"impression", "impressions"}:
                h = heads[0]
                cand = replace_spans(
                    report.text, [(h.start, h.end, "Findings: "), (members[-1].start, members[-1].start, "Impression: ")]
                )
                out.append(_Variant(cand, "added 'Findings:' (all but the last sentence)", None, "", "Findings:"))
            elif len(members) >= 2 and titles <= {"findings", "finding"}:
                cand = replace_spans(report.text, [(members[-1].start, members[-1].start, "Impression: ")])
                out.append(_Variant(cand, "added 'Impression:' before the last sentence", None, "", "Impression:"))
        rng.shuffle(out)
        return out


def _moved_distance(m: re.Match[str]) -> str:
    """An endotracheal tube's distance above the carina moved out of Goodman's 5 +/- 2 cm, or into it."""
    cm = float(m["cm"])
    return "5 cm above the carina" if not 3 <= cm <= 7 else "1 cm above the carina"


_LINES = ("central_venous_catheter", "picc", "port_catheter")
_SVC_QUALIFIER = r"(?:(?:low|lower|mid|upper|high|distal|proximal)\s+)?"
#: Where ``move_tip`` moves a tip: (the devices, a pattern of a landmark's words, the words of another
#: place, or a function of the match), first match wins. Written from Godoy et al., Chest
#: radiography in the ICU (AJR 2012, parts 1 and 2): a central line's tip belongs in the lower SVC or
#: at the cavoatrial junction and the right atrium lies beyond them; an enteric tube's belongs in the
#: stomach and the distal oesophagus falls short; and Goodman et al. (AJR 1976): an endotracheal tube's
#: tip lies 5 +/- 2 cm above the carina. Not read off cxreval's ontology.
TIP_MOVES: tuple[tuple[tuple[str, ...], str, str | Callable[[re.Match[str]], str]], ...] = (
    (_LINES, r"\bcavo-?\s?atrial junction\b|\bcaval[- ]atrial junction\b", "right atrium"),
    (_LINES, _SVC_QUALIFIER + r"\b(?:superior vena cava|svc)\b", "right atrium"),
    (_LINES, r"\bright atrium\b", "superior vena cava"),
    (("enteric_tube",), r"\b(?:gastric body|stomach)\b", "distal esophagus"),
    (("enteric_tube",), r"\b(?:(?:distal|mid|proximal|upper|lower)\s+)?esophagus\b", "stomach"),
    (("endotracheal_tube",), r"\b(?P<cm>\d+(?:\.\d+)?)\s?cm above the carina\b", _moved_distance),
)

#: A size with its unit: "6 mm", "1.2 x 0.8 cm", "22 x 14 mm" (one expression, every dimension).
_SIZE_RE = re.compile(r"\b\d+(?:\.\d+)?(?:\s?(?:mm|cm))?(?:\s?(?:x|by)\s?\d+(?:\.\d+)?(?:\s?(?:mm|cm))?)*\s?(?:mm|cm)\b", re.I)
#: A list of two places of one finding on two sides: "right upper and left lower lobes", "left apex
#: and right base", "right and left" (``drop_place`` keeps the first place, with its own noun or the
#: list's in the singular).
_PLACE_LIST_RE = re.compile(
    r"\b(?P<side>right|left)(?P<zone> (?:upper|middle|lower))?(?P<own> (?:lobe|lung|base|apex))?"
    r" and (?:the )?(?P<other>right|left)(?P<other_zone> (?:upper|middle|lower))?"
    r"(?: (?P<noun>lobes?|lungs?|bases?|apex|apices))?\b",
    re.I,
)
_SINGULAR = {
    "lobes": " lobe",
    "lobe": " lobe",
    "lungs": " lung",
    "lung": " lung",
    "bases": " base",
    "base": " base",
    "apices": " apex",
    "apex": " apex",
}


#: Other words for where a tip lies: a sentence that names one beside the landmark moved reads two ways.
_OTHER_TIP_PLACES = re.compile(
    r"\b(?:below|beneath|under) the (?:left )?(?:hemi)?diaphragm\b|\bcarina\b"
    r"|\b(?:brachiocephalic|innominate|jugular|subclavian|azygos) vein\b",
    re.I,
)


def _same_phrase(text: str, a: int, b: int, x: int, y: int) -> bool:
    """Whether the size at ``a:b`` and the name at ``x:y`` stand in one phrase: nothing but words
    between them (no comma, semicolon, colon or "with")."""
    between = text[b:x] if b <= x else text[y:a]
    return not re.search(r"[,;:()]|\bwith\b", between, re.I) and len(between) <= 40


def _one_unit(size: str) -> bool:
    """Whether every dimension of ``size`` is in one unit."""
    return len({u.lower() for u in re.findall(r"(mm|cm)\b", size, re.I)}) == 1


def _resized(size: str) -> str | None:
    """``size`` (a :data:`_SIZE_RE` match in one unit) with every dimension scaled so that the
    largest crosses 30 mm by a factor of 3 or more: up to 40 mm or more if it was 30 mm or less,
    else down to 15 mm or less. None for a size of 0."""
    numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", size)]
    mm = max(numbers) * (10.0 if re.search(r"cm\b", size, re.I) else 1.0)
    if mm <= 0:
        return None
    factor = max(40.0, 3 * mm) / mm if mm <= 30 else min(15.0, mm / 3) / mm
    return re.sub(r"\d+(?:\.\d+)?", lambda n: f"{round(float(n.group()) * factor, 1):g}", size)


def _plural(term: str) -> bool:
    last = term.split()[-1]
    return last.endswith("s") and not last.endswith(("ss", "is", "us"))


def _merge_insertions(text: str, edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    merged: dict[tuple[int, int], str] = {}
    for a, b, rep in edits:
        merged[(a, b)] = merged.get((a, b), "") + rep
    return [(a, b, r) for (a, b), r in sorted(merged.items())]


def _apply_raw(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Like :func:`replace_spans` but keeps white space as given (for line breaks)."""
    out, pos = [], 0
    for a, b, rep in sorted(edits):
        if a < pos:
            a = pos
        out.append(text[pos:a])
        out.append(rep)
        pos = max(b, a)
    out.append(text[pos:])
    return re.sub(r"[ \t]*\n[ \t]*", "\n", "".join(out)).strip()


# ------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------


def write_suite(pairs: Sequence[PerturbedPair], path: str | Path) -> Path:
    """Write a suite as JSONL (``.jsonl``) or CSV (anything else; cells never start a spreadsheet
    formula, see :func:`cxreval.io.writers.write_csv`)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".jsonl":
        with out.open("w", encoding="utf-8") as fh:
            for p in pairs:
                fh.write(p.model_dump_json() + "\n")
        return out
    fields = list(PerturbedPair.model_fields)
    with atomic_writer(out, newline="") as fh:
        write_csv(fh, [fields, *(list(p.model_dump().values()) for p in pairs)])
    return out


def _suite_format(path: Path, format: str | None) -> str:
    """The suite's format: named, else JSONL for ``.jsonl`` and CSV for any other suffix (as written)."""
    if format is not None:
        return format
    return "jsonl" if path.suffix == ".jsonl" else "csv"


#: Suite columns that may be left out (their model default applies); every other one is needed.
_OPTIONAL_SUITE_COLUMNS = ("targets", "target_entity", "before", "after")


def read_suite(path: str | Path, *, format: str | None = None) -> list[PerturbedPair]:
    """Read a suite written by :func:`write_suite` (JSONL for ``.jsonl``, else CSV; ``format`` overrides).

    Every value is checked: unique ``pair_id``, a known ``perturbation``, ``significant`` true /
    false, non-empty ``reference`` and ``candidate``; an empty ``target_entity`` means none; a
    missing or empty ``targets`` means ``engine`` (suites of version 1).
    Raises :class:`~cxreval.io.InputError` listing every problem (file, line, field).
    """
    p = Path(path)
    fields = list(PerturbedPair.model_fields)
    table = load_table(p, _suite_format(p, format), fields, keyed_ok=False, formula_guards=True)
    if not table.records:  # an empty suite (nothing to perturb) is written as an empty file
        raise_problems(table)
        return []
    optional = [c for c in _OPTIONAL_SUITE_COLUMNS if c in table.columns]
    present = check_columns(table, [c for c in fields if c not in _OPTIONAL_SUITE_COLUMNS]) | set(optional)
    unique = Uniqueness(table)
    out: list[PerturbedPair] = []
    for rec in table.records:
        ident = rec.ident = record_id(table, rec, "pair_id", present)
        fresh = ident is not None and unique.is_new(ident, rec, "pair_id")
        values = _suite_values(table, rec, present, optional)
        if not fresh or values is None:
            continue
        try:
            out.append(PerturbedPair.model_validate({**values, "pair_id": ident}))
        except ValidationError as exc:
            for err in exc.errors():
                loc = str(err["loc"][0]) if err["loc"] else None
                table.problems.append(table.problem(err["msg"], rec, loc))
    raise_problems(table)
    return out


def _suite_values(table: RecordTable, rec: Record, present: set[str], optional: Sequence[str]) -> dict | None:
    """A suite record's fields (but ``pair_id``) as the model takes them, or None after reporting problems."""
    known = len(table.problems)
    values: dict = {
        "source_uid": text_value(table, rec, "source_uid", present, numbers_ok=True, what="id"),
        "perturbation": text_value(table, rec, "perturbation", present, what="perturbation type"),
        "significant": bool_value(table, rec, "significant", present, true=("true", "1"), false=("false", "0")),
        "expected": text_value(table, rec, "expected", present, what="verdict"),
        "description": text_value(table, rec, "description", present, empty_ok=True),
        "reference": text_value(table, rec, "reference", present, what="report"),
        "candidate": text_value(table, rec, "candidate", present, what="report"),
    }
    for col in optional:
        values[col] = text_value(table, rec, col, present, empty_ok=True)
    if values.get("target_entity") == "":
        values["target_entity"] = None
    if values.get("targets") == "":  # a suite of version 1 (no column): engine targets
        del values["targets"]
    if values.get("targets") not in (None, *TARGET_VARIANTS, SHARED):
        table.problems.append(
            table.problem(
                f"unknown targets {values['targets']!r}; known: {', '.join((*TARGET_VARIANTS, SHARED))}", rec, "targets"
            )
        )
    if values["perturbation"] is not None and values["perturbation"] not in ALL_TYPES:
        known_types = ", ".join(ALL_TYPES)
        table.problems.append(
            table.problem(f"unknown perturbation type {values['perturbation']!r}; known: {known_types}", rec, "perturbation")
        )
    if len(table.problems) > known:
        return None
    return values


def read_references(
    path: str | Path,
    *,
    id_col: str = "id",
    reference_col: str = "reference",
    format: str | None = None,
    mesh_col: str | None = None,
) -> list[tuple[str, str]] | list[tuple[str, str, str]]:
    """(id, reference) pairs to build a suite from, in file order; (id, reference, MeSH) with ``mesh_col``.

    ``mesh_col`` names a column of IU-style MeSH fields (``;``-separated codes, may be empty) for
    ``mesh``-target variants.

    CSV (also for suffixes cxreval does not know), TSV, JSONL, a JSON list or a ReXrank-layout
    JSON (ids are the keys; name the field with ``reference_col``), or Parquet. Ids must be
    unique and references non-empty; the text is kept exactly as written. Raises
    :class:`~cxreval.io.InputError` listing every problem (file, line, field).
    """
    extra = [mesh_col] if mesh_col else []
    table = load_table(path, table_format(path, format), [id_col, reference_col, *extra], keyed_ok=True)
    present = check_columns(table, ([reference_col] if table.keyed else [id_col, reference_col]) + extra)
    unique = Uniqueness(table)
    out: list = []
    for rec in table.records:
        ident = rec.ident = record_id(table, rec, id_col, present)
        text = text_value(table, rec, reference_col, present, what="report")
        mesh = text_value(table, rec, mesh_col, present, empty_ok=True) if mesh_col else ""
        if (
            ident is not None
            and unique.is_new(ident, rec, None if table.keyed else id_col)
            and text is not None
            and mesh is not None
        ):
            out.append((ident, text, mesh) if mesh_col else (ident, text))
    require_records(table)
    raise_problems(table)
    return out


def suite_summary(pairs: Sequence[PerturbedPair]) -> dict[str, int]:
    """Number of pairs per perturbation type."""
    counts: dict[str, int] = {t: 0 for t in ALL_TYPES}
    for p in pairs:
        counts[p.perturbation] += 1
    return counts


def suite_summary_by_targets(pairs: Sequence[PerturbedPair]) -> dict[str, dict[str, int]]:
    """Number of pairs per perturbation type and ``targets`` label (``mesh``, ``engine``, ``shared``)."""
    out: dict[str, dict[str, int]] = {t: {} for t in ALL_TYPES}
    for p in pairs:
        out[p.perturbation][p.targets] = out[p.perturbation].get(p.targets, 0) + 1
    return out


def gold_references(gold: Iterable) -> list[tuple[str, str, str]]:
    """(uid, text, MeSH codes) of IU X-ray gold reports (:func:`cxreval.datasets.iu_xray.load_iu_gold`).

    The codes are the report's mapped codes joined by ``;`` (``normal`` and unmapped codes give no
    target anyway), ready for :meth:`PerturbationSuite.build`.
    """
    return [(g.uid, g.text, ";".join(c for e in g.entities.values() for c in e.codes)) for g in gold]


__all__ = [
    "ALL_TYPES",
    "EXPECTED",
    "INSIGNIFICANT",
    "SHARED",
    "SIGNIFICANT",
    "TARGET_VARIANTS",
    "Layout",
    "PerturbationSuite",
    "PerturbationType",
    "PerturbedPair",
    "TargetVariant",
    "gold_references",
    "read_references",
    "read_suite",
    "suite_summary",
    "suite_summary_by_targets",
    "write_suite",
]
