"""The rule engine's reader: a report -> sections -> sentences -> entity mentions, with caches.

How a sentence is read (docs/engine.md tells it with examples; each step names its rule ids):
1. Finding names are found as whole token sequences, longest first, with a few modifier words
   inside (``finding.name``; ``scanning``); cue phrases and attribute words by one trie scan.
2. Each name's status and grade come from the status steps (``interpreter``), in their order.
3. Side, zones, severity and change come from windows around the name (``attributes``); a site
   rule may make the name another entity.
4. Normal statements ("no acute cardiopulmonary process") imply absences (``normal.*`` rules).

The text is read normalised (``text.normalize``: NFKC, invisible characters removed, case-folded)
and every offset is mapped back, so a mention's evidence is the original text. A mention stores
offsets, not text; its evidence is the sentence around it (``scopes.scopes``: a sentence longer
than ``MAX_SCOPE_CHARS`` is cut at a clause boundary), so memory stays linear in the report.
Each mention names the rules that made it (``Mention.rules``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from functools import lru_cache
from operator import itemgetter
from typing import Any

from cxreval.caches import (
    ENTRY_BYTES,
    EXTRACTOR_MIB,
    EXTRACTOR_SHARES,
    MOVED_MENTION_BYTES,
    BoundedCache,
    mib,
    text_weight,
)
from cxreval.extract.models import Extraction, Mention, ReadingRules, constructed
from cxreval.extract.rules import scopes as sc
from cxreval.extract.rules.attributes import AttributeRules, Place, TipReading
from cxreval.extract.rules.interpreter import BITS, Sentence, StatusRules, mask_of
from cxreval.extract.rules.ruleset import (
    CUE_CATEGORIES,
    LANDMARK_PLACES,
    NAME_SCAN,
    PREFIX_REST,
    VOCAB_KINDS,
    DerivedRecord,
    NormalStatement,
    RulesError,
    RuleSet,
    load_rules,
)
from cxreval.extract.rules.scanning import (
    GappedMatch,
    NameGrammar,
    PhraseTrie,
    plural_variants,
    prefix_variants,
    scan_gapped,
)
from cxreval.extract.rules.scopes import ATTRIBUTE_KINDS, MAX_SCOPE_CHARS
from cxreval.extract.rules.spelling import Speller
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

__all__ = [
    "MAX_SCOPE_CHARS",
    "RULES_VERSION",
    "RuleExtractor",
    "RuleSet",
    "RulesError",
    "build_entity_trie",
    "default_extractor",
    "load_rules",
]

RULES_VERSION = "32"  # what each version changed: CHANGELOG.md, "Rule engine history"

#: The rule that reads a slip in a long finding-name word (``names.yaml``).
SPELLING = "finding.spelling"
#: The value of a ``not_findings`` name in the entity trie: no entity id (ids are non-empty).
_NOT_A_FINDING = ""
#: Cue categories (not attribute kinds): a cue inside a finding name only lends it attributes.
_CUE_CATEGORIES = frozenset(CUE_CATEGORIES)
#: What a cue inside a finding name keeps: the attribute kinds, and a landmark's own places.
_VOCAB_KINDS = frozenset((*VOCAB_KINDS, LANDMARK_PLACES))
_ATTRIBUTE_BITS = mask_of(ATTRIBUTE_KINDS)
_CHANGE_BIT = BITS["comparison"]
_UNITS_BIT = BITS["units"]
_COLON_BIT = BITS[":"]
#: The rule that gives each side of a list its own size (``steps.yaml``).
SIDE_SEVERITY = "attribute.side_severity"
#: The rule that derives a malpositioned device from a device's tip (``names.yaml``).
MALPOSITION = "device.malposition"


#: The place of a mention in a sentence without attribute words.
_NO_PLACE = Place(None, (), None, False, None, None, ())


def _size_change(size_mm: float, prior_mm: float) -> str:
    """The change a size and a prior size give (``attribute.size_change``)."""
    return "increased" if size_mm > prior_mm else "decreased" if size_mm < prior_mm else "unchanged"


def _cached_weight(key: tuple[str, str], value: _Cached) -> int:
    """Estimated bytes of a cached sentence or section: its text and its mentions."""
    return text_weight(key[1], len(value[1]))


def _piece_weight(key: str, value: tuple[tuple[int, int, int, str], ...]) -> int:
    """Estimated bytes of a cached piece between full stops: its text and its statement matches."""
    return text_weight(key, len(value), ENTRY_BYTES)


def _report_weight(key: str, value: Extraction) -> int:
    """Estimated bytes of a cached report: its text and its mentions (copies moved from the
    section cache, sharing their values with it)."""
    return text_weight(key, len(value.mentions), MOVED_MENTION_BYTES)


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

    def __init__(
        self,
        ontology: Ontology | None = None,
        rules: RuleSet | None = None,
        *,
        cache_mib: float = EXTRACTOR_MIB,
        report_cache: bool = True,
    ) -> None:
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
        budget = mib(cache_mib)
        share = {name: int(budget * part) for name, part in EXTRACTOR_SHARES.items()}
        self._sentences: BoundedCache[tuple[str, str], _Cached] = BoundedCache(share["sentences"], _cached_weight, "sentences")
        #: The same for whole sections (section name, section text): sentences and normal statements.
        self._sections: BoundedCache[tuple[str, str], _Cached] = BoundedCache(share["sections"], _cached_weight, "sections")
        #: Normal statement matches of a piece of text between full stops (``_normal_hits``).
        self._pieces: BoundedCache[str, tuple[tuple[int, int, int, str], ...]] = BoundedCache(
            share["pieces"], _piece_weight, "pieces"
        )
        self._nonlocal_statements = any(not r.local for r in self.rules.normal_statements)
        #: (index, rule, search for any of its ``requires`` words or None) of each normal
        #: statement that implies something: one C search in place of a test per word.
        self._statement_checks = [
            (k, r, re.compile("|".join(map(re.escape, r.requires))).search if r.requires else None)
            for k, r in enumerate(self.rules.normal_statements)
            if r.entities
        ]
        #: One search for a word of any statement: a text holding none (most pieces between full
        #: stops: "No pneumothorax") skips every statement's own check. None: a statement needs none.
        needed = [r.requires for _, r, _ in self._statement_checks]
        self._any_statement_word = (
            re.compile("|".join(map(re.escape, sorted({w for ws in needed for w in ws})))).search
            if needed and all(needed)
            else None
        )
        self._lex = self.rules.lexicon
        self._grammar = NameGrammar(
            self.rules.modifiers,
            self._lex.joiners,
            self._lex.copulas,
            self._lex.subject_breaks,
            self.rules.param(NAME_SCAN, "max_skipped"),
        )
        #: A user's finding names (and their regular plurals) -> (entity, rule id).
        self._user_names: dict[tuple[str, ...], tuple[str, str]] = {}
        for toks, named in self.rules.names.items():
            for form in (toks, *plural_variants(toks)):
                if form == toks or self._entities.get(form) is None:
                    self._entities.add(form, named[0])
                    self._user_names[form] = named
        self._speller = self._build_speller()
        self._status = StatusRules(self.rules, self._lung_entities, self._rest_names)
        self._attributes = AttributeRules(self.rules)
        #: Device entity -> where its tip belongs (the ontology's ``device_positions``).
        self._positions = {
            p.device: TipReading(
                frozenset(p.landmarks),
                p.distance.landmark if p.distance else None,
                p.distance.above if p.distance else None,
                p.distance.beyond if p.distance else None,
            )
            for p in self.ontology.device_positions
        }
        #: Device entity -> the landmarks where its tip is malpositioned.
        self._malpositioned = {p.device: frozenset(p.malpositioned) for p in self.ontology.device_positions}
        derived = self.rules.records.get(MALPOSITION)
        #: ``device.malposition`` when it is on and names an entity of the ontology.
        self._malposition: DerivedRecord | None = (
            derived
            if isinstance(derived, DerivedRecord) and derived.enabled and derived.to in set(self.ontology.entity_ids)
            else None
        )
        #: The category bits (:func:`mask_of`) of each cue trie value, by its id: the values live as
        #: long as the extractor's rule set, so an id names one value.
        self._masks: dict[int, int] = {}
        #: The rule trail of each distinct reading (``_trail``): shared by every mention read so.
        self._trails: dict[tuple[Any, ...], str] = {}
        #: A validated mention per kind (see ``_mention``): new ones of that kind copy it.
        self._templates: dict[object, Mention] = {}
        #: Whether the sentence, section and piece caches are on (``cache_mib`` > 0).
        self._caching = budget > 0
        #: Whole reports: text -> its extraction (frozen, so one object serves every repeat). A
        #: reward or a benchmark reads the same references again and again; a repeat is one lookup.
        self._reports: BoundedCache[str, Extraction] = BoundedCache(
            share["reports"] if report_cache else 0, _report_weight, "reports"
        )

    def _build_speller(self) -> Speller | None:
        """The reader of slips in long finding-name words (``finding.spelling``), None when it is
        off: its targets are the words of finding names, and a word the engine knows anywhere (a
        cue, a word list, an attribute phrase, the rule's own list) is never a slip."""
        if self.rules.spelling is None:
            return None
        min_length, not_slips = self.rules.spelling
        targets: set[str] = set()
        for e in self.ontology.entities:
            for term in e.terms:
                toks = term_tokens(term)
                for form in (toks, *plural_variants(toks)):
                    targets.update(form)
        for toks in self.rules.names:
            targets.update(toks)
        known = set(targets) | not_slips | set(self.rules.modifiers)
        known.update(w for toks in self.rules.not_findings for w in toks)
        known.update(w for phrase in self.rules.cue_ids for w in term_tokens(phrase[1]))
        known.update(w for name in self._lex.names() for w in getattr(self._lex, name))
        return Speller(targets, known, min_length)

    @property
    def signature(self) -> str:
        """``rules@<code version>.<rule data versions>`` (and ``.u<hash>`` with a user's rule file)."""
        return f"rules@{RULES_VERSION}.{self.rules.version}"

    def extract(self, text: str) -> Extraction:
        """Find every entity mention in one report (a report read before: from the report cache)."""
        if self._reports.budget:
            hit = self._reports.get(text)
            return hit if hit is not None else self._reports.put(text, self._extract(text))
        return self._extract(text)

    def _extract(self, text: str) -> Extraction:
        """:meth:`extract` without the report cache: each section from the section cache or read."""
        norm = normalize(text)
        mentions: list[Mention] = []
        for section in split_sections(norm.text):
            if self._caching and section.start < section.end:
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
            return _moved(hit, lo, norm.original)
        read = [*self._read_sentences(norm, section), *self._normal_statements(norm, section)]
        self._sections.put(key, (lo, tuple(read)))
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
                cache.put(key, (lo, tuple(read)))
                out.extend(read)
            else:
                out.extend(_moved(hit, lo, original))
        return out

    # -- one section ---------------------------------------------------------------------
    def _read_section(self, norm: NormalizedText, columns: TokenColumns, section: str) -> list[Mention]:
        """The mentions of a run of tokens (``token_columns``: their texts, starts and ends)."""
        words = columns[0]
        slips = self._speller.correct(words) if self._speller is not None else None
        if slips is not None:  # "cardiomeagly" is read as "cardiomegaly" (finding.spelling)
            words = slips[0]
        matches: list[GappedMatch] = scan_gapped(self._entities, words, self._grammar)
        if self.rules.not_findings and any(m.value is _NOT_A_FINDING for m in matches):
            matches = [m for m in matches if m.value is not _NOT_A_FINDING]  # "thoracic cavity": plain words
        if not matches:
            return []
        s, categories = self._sentence(words, matches)
        if self.rules.name_conditions:
            named = [m for k, m in enumerate(matches) if self._named_here(s, k)]
            if len(named) < len(matches):  # the words name no finding here: plain words for the rest
                if not named:
                    return []
                matches = named
                s, categories = self._sentence(words, matches)
        steps = self._status.steps_for(categories)
        scopes = sc.scopes(self._lex, norm, columns)
        out: list[Mention] = []
        decide = self._status.decide
        cue_at, sites, user_names = s.cue_at, self.rules.sites, self._user_names
        for k, m in enumerate(matches):
            status, cue, historical, grade, status_rule = decide(steps, s, k)
            if status is None:
                continue  # hypothetical ("CT is more sensitive to identify a small nodule"): no finding
            if m.start and cue_at[m.start - 1] or m.value in sites or user_names:
                entity, entity_rule = self._entity(s, k)
            else:
                entity, entity_rule = m.value, NAME_SCAN  # type: ignore[assignment]
            if slips is not None and entity_rule == NAME_SCAN and not slips[1].isdisjoint(m.used):
                entity_rule = SPELLING
            out.extend(
                self._readings(
                    norm,
                    columns,
                    scopes,
                    s,
                    k,
                    section,
                    entity,
                    cue,
                    (status, grade, historical, entity_rule, status_rule),
                    categories,
                )
            )
        return out

    def _readings(
        self,
        norm: NormalizedText,
        columns: TokenColumns,
        scopes: list[int],
        s: Sentence,
        k: int,
        section: str,
        entity: str,
        cue: str | None,
        decided: tuple[Any, ...],
        categories: int,
    ) -> list[Mention]:
        """The mentions of match ``k`` once its entity and status are decided: its place, size, change
        and tip; one mention per side where a list gives each side its own size ("small right and
        large left effusions", ``attribute.side_severity``), and the malposition a tip implies."""
        status, grade, historical, entity_rule, status_rule = decided
        has_attributes, has_change, has_units = (
            categories & _ATTRIBUTE_BITS,
            categories & _CHANGE_BIT,
            bool(categories & _UNITS_BIT),
        )
        position = self._positions.get(entity)
        place = (
            self._attributes.place_and_size(s, k, device=position is not None, units=has_units) if has_attributes else _NO_PLACE
        )
        comparison = self._attributes.change(s, k) if has_change else None
        size_change = comparison is None and place.prior_mm is not None and place.size_mm is not None
        if size_change:  # "now 3 cm, previously 2 cm" (attribute.size_change)
            comparison = _size_change(place.size_mm, place.prior_mm)  # type: ignore[arg-type]
        tip, tip_mm = self._attributes.tip(s, k, position) if position is not None and has_attributes else (None, None)
        sides: list[tuple[str | None, str | None, str]] = [(side, severity, SIDE_SEVERITY) for side, severity in place.by_side]
        sides = sides or [(place.side, place.severity, "attribute.place_list" if place.listed else "attribute.side")]
        out = [
            self._mention(
                norm,
                columns,
                scopes,
                s.matches[k],
                section,
                entity,
                cue,
                (
                    status,
                    grade,
                    side,
                    place.zones,
                    severity,
                    comparison,
                    historical,
                    entity_rule,
                    status_rule,
                    side_rule,
                    tip,
                    tip_mm,
                    place.size_mm,
                    size_change,
                ),
            )
            for side, severity, side_rule in sides
        ]
        if (
            tip is not None
            and tip in self._malpositioned.get(entity, ())
            and self._malposition is not None
            and status != "absent"
            and not historical
        ):
            out.append(self._derived(out[0], self._malposition))
        return out

    def _derived(self, made: Mention, rule: DerivedRecord) -> Mention:
        """The mention ``rule`` derives from a device mention ``made`` (``device.malposition``): the
        same words, status and attributes, naming ``rule.to``, with ``rule`` as its entity rule,
        ``implied`` (no words of its own name it, so a mention in words leads the entity's state)."""
        named = made.rules
        assert named is not None
        fields = made.__dict__.copy()
        fields["entity"] = rule.to
        fields["implied"] = True  # no words of its own: a malposition stated in words leads its state
        fields["rule_ids"] = named.model_copy(update={"entity": rule.id}).ids()
        return constructed(Mention, fields, made.__pydantic_fields_set__)

    def _sentence(self, words: list[str], matches: list[GappedMatch]) -> tuple[Sentence, int]:
        """The cue and name covering each token, and the cue categories and attribute kinds the
        sentence holds: most sentences name no side, size or change ("No pneumothorax."), and then
        no window is walked; a status step needing a category the sentence lacks is not run."""
        n = len(words)
        # cue_at[i]: the cue covering token i (multi-token cues are seen from either end);
        # cue_start / cue_end: that cue's token span.
        cue_at: list[dict[str, Any] | None] = [None] * n
        cue_start: list[int] = list(range(n))
        cue_end: list[int] = list(range(1, n + 1))
        categories = _COLON_BIT if ":" in words else 0  # a labelled value may follow a name ("Pneumothorax: none")
        masks = self._masks
        for a, b, kinds in self.rules.cues.scan(words):
            for i in range(a, b):
                cue_at[i] = kinds
                cue_start[i] = a
                cue_end[i] = b
            mask = masks.get(id(kinds))
            if mask is None:  # each cue trie value (one dict for the extractor's life) once
                mask = masks[id(kinds)] = mask_of(kinds)
            categories |= mask
        entity_at: list[int] = [-1] * n
        for k, m in enumerate(matches):
            for i in m.used:
                if entity_at[i] < 0:
                    entity_at[i] = k
                # Cues hidden inside an entity name only lend it attributes ("right middle lobe ...").
                hidden = cue_at[i]
                if hidden and not hidden.keys().isdisjoint(_CUE_CATEGORIES):
                    cue_at[i] = {c: v for c, v in hidden.items() if c in _VOCAB_KINDS} or None
        return Sentence(words, cue_at, cue_start, cue_end, entity_at, matches), categories

    def _entity(self, s: Sentence, k: int) -> tuple[str, str]:
        """The entity mention ``k`` names and the rule that says so: its name (a packaged synonym or
        a user's name), the rest of its name after a negating prefix, or a site rule."""
        m = s.matches[k]
        entity: str = m.value  # type: ignore[assignment]
        rule = self._name_rule(s.words, m) if self._user_names else NAME_SCAN
        if m.start and s.cue_at[m.start - 1] and sc.after_prefix(s.cue_at, m):
            # "non-tension pneumothorax", "non-compression fracture": the prefix denies the kind,
            # and the rest of the name names the finding there is
            rest = self._rest_names(s.words, m)
            if rest is not None:
                entity, rule = rest, PREFIX_REST
        site = self._attributes.site(s, k, entity) if entity in self.rules.sites else None
        if site is not None:
            return site.to, site.id
        return entity, rule

    def _named_here(self, s: Sentence, k: int) -> bool:
        """Whether match ``k`` names its entity here: a name rule with ``near`` words names it only
        beside one of them ("lucency" beside a lung place, not in a rib or under the diaphragm)."""
        where = self.rules.name_conditions.get(self._name_rule(s.words, s.matches[k]))
        return where is None or self._attributes.holds(s, k, where)

    def _name_rule(self, words: list[str], m: GappedMatch) -> str:
        """The id of the user's name rule a match's words are, else the packaged name scan's."""
        hit = self._user_names.get(tuple(words[j] for j in m.used))
        return hit[1] if hit is not None else NAME_SCAN

    def _trail(self, reading: tuple[Any, ...]) -> str:
        """The rule ids behind a reading (see ``_readings``), one shared object per distinct
        combination: ``side_rule``, the rule that gave the side (``attribute.side``,
        ``attribute.place_list`` or ``attribute.side_severity``); ``size_change``, sizes gave the
        change (``attribute.size_change``)."""
        (_, _, side, zones, severity, comparison, _, entity, status, side_rule, tip, _, size_mm, size_change) = reading
        key = (
            entity,
            status,
            side is not None,
            bool(zones),
            severity is not None,
            comparison is not None,
            side_rule,
            tip is not None,
            size_mm is not None,
            size_change,
        )
        trail = self._trails.get(key)
        if trail is None:
            change = ("attribute.size_change" if size_change else "attribute.change") if comparison else None
            trail = self._trails[key] = ReadingRules(
                entity=entity,
                status=status,
                side=side_rule if side else None,
                zones="attribute.zone" if zones else None,
                severity="attribute.severity" if severity else None,
                change=change,
                tip="attribute.tip" if tip else None,
                size="attribute.size" if size_mm is not None else None,
            ).ids()
        return trail

    def _mention(
        self,
        norm: NormalizedText,
        columns: TokenColumns,
        scopes: list[int],
        m: GappedMatch,
        section: str,
        entity: str,
        cue: str | None,
        reading: tuple[Any, ...],
    ) -> Mention:
        """A mention at ``m`` with its evidence, the scope(s) holding its first and last token.

        Validated once per kind of mention (status, grade, attributes, rules); the rest are copies of
        that one with the fields that validation passes unchanged (strings, offsets)."""
        _, t_start, t_end = columns
        starts, ends = norm.starts, norm.ends
        s_start = scopes[bisect_right(scopes, m.start) - 1]
        last = bisect_right(scopes, m.end - 1)
        s_end = scopes[last] if last < len(scopes) else len(columns[0])
        start, end = starts[t_start[m.start]], ends[t_end[m.end - 1]]
        s_lo, s_hi = starts[t_start[s_start]], ends[t_end[s_end - 1]]
        like = self._templates.get(reading)
        if like is not None:
            return _stamp(like, entity, section, start, end, s_lo, s_hi, cue, norm.original)
        status, grade, side, zones, severity, comparison, historical, _, _, _, tip, tip_mm, size_mm, _ = reading
        made = Mention(
            entity=entity,
            status=status,
            certainty=grade,
            side=side,
            zones=zones,
            severity=severity,
            comparison=comparison,
            tip=tip,
            tip_mm=tip_mm,
            size_mm=size_mm,
            historical=historical,
            section=section,
            start=start,
            end=end,
            sentence_start=s_lo,
            sentence_end=s_hi,
            cue=cue,
            rule_ids=self._trail(reading),
            source=norm.original,
        )
        if len(self._templates) < _TEMPLATES:
            self._templates[reading] = made
        return made

    def _rest_names(self, words: list[str], m: GappedMatch) -> str | None:
        """The entity that mention ``m``'s name names without its first word(s), the longest rest
        first: "effusion" in "loculated effusion", "pneumothorax" in "tension pneumothorax". None
        when no rest names one ("enlarged heart"). A negating prefix before such a first word
        denies the description only."""
        used = m.used
        for k in range(1, len(used)):
            entity = self._entities.get([words[j] for j in used[k:]])
            if entity is not None and entity is not _NOT_A_FINDING:
                return entity
        return None

    def _normal_statements(self, norm: NormalizedText, section: Section) -> list[Mention]:
        """The absences the section's normal statements imply: rule by rule, match by match."""
        out: list[Mention] = []
        statements = self.rules.normal_statements
        original = norm.original
        for k, start, end, cue in self._normal_hits(norm.text, section):
            statement = statements[k]
            entities = statement.entities
            start, end = norm.span(start, end)
            # One mention validated per statement for the extractor's life; the others are copies
            # of it with their own entity, section, offsets and cue (strings and offsets: nothing to check).
            like = self._templates.get((_IMPLIED, k))
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
                    rule_ids=ReadingRules(entity=statement.id, status=statement.id).ids(),
                    source=original,
                )
                if _TEMPLATES:
                    self._templates[(_IMPLIED, k)] = first
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
        if not self._caching or (lo > 0 and _WORD_CHAR.match(folded, lo - 1)):
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
                cache.put(piece, hits)
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
                hits: Iterable[re.Match[str]] = _hits_between_stops(rule, folded, text, lo, stops)
            else:
                hits = rule.pattern.finditer(folded, lo, hi)
            for hit in hits:
                out.append((k, hit.start(), hit.end(), hit.group(0)))
        return out


_RULE = itemgetter(0)

_WORD_CHAR = re.compile(r"\w")
_FULL_STOP = re.compile(r"\.")


def _hits_between_stops(rule: NormalStatement, folded: str, text: str, offset: int, stops: list[int]) -> list[re.Match[str]]:
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


def _stamp(
    like: Mention,
    entity: str,
    section: str,
    start: int,
    end: int,
    sentence_start: int,
    sentence_end: int,
    cue: str | None,
    source: str,
) -> Mention:
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


@lru_cache(maxsize=4)
def default_extractor() -> RuleExtractor:
    """The rule extractor on the packaged ontology, built once per process."""
    return RuleExtractor()
