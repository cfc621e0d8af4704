"""The status steps: what a mention's status and grade are, and which rule decided.

Each step (``data/steps.yaml``) reads the sentence around one finding name and either decides
(a :data:`Decision`) or passes to the next; the first that decides wins, in the records' order.
A decision names the record that made it: a step's own id ("negation.copula") or, for the two
scope steps, the id of the cue record whose phrase decided ("negation.pre" for "no").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cxreval.extract.rules import scopes as sc
from cxreval.extract.rules.lexicon import Lexicon
from cxreval.extract.rules.ruleset import CUE_CATEGORIES, VOCAB_KINDS, RuleSet
from cxreval.extract.rules.scanning import GappedMatch
from cxreval.extract.rules.scopes import Cues

#: (status, cue phrase, historical, grade, rule id): status None drops the mention (hypothetical).
Decision = tuple[str | None, str | None, bool, str | None, str]
#: The grade of two findings offered as alternatives ("X versus Y").
ALTERNATIVE = "alternative"
#: The grade of a hedge listed without one (a user's cue record with no grade).
UNGRADED = "possible"
STATED: Decision = ("present", None, False, "definite", "finding.stated")
#: What a backward walk's word handler returns to stop the walk (any other int: the next position).
_STOP = -2
#: The cue categories one of which each step needs in a sentence to decide: a step whose
#: categories a sentence lacks cannot decide there, so it is not run (the steps' code says why:
#: each decision reads a cue of these categories; "label.value" needs a ":" token, which the
#: engine adds to a sentence's categories as ":").
TRIGGERS: dict[str, frozenset[str]] = {
    "negation.removal": frozenset({"removal_post"}),
    "negation.prefix": frozenset({"negation_prefix"}),
    "negation.copula": frozenset({"negation_post"}),
    "negation.adjacent": frozenset({"negation_adjacent"}),
    "scope.backward": frozenset({"negation_pre", "uncertain_pre", "historical_pre", "hypothetical_pre"}),
    "label.value": frozenset({":"}),
    "scope.forward": frozenset({"negation_post", "uncertain_post"}),
    "alternative.versus": frozenset({"alternatives"}),
    "alternative.or": frozenset({"alternatives"}),
}


class Sentence:
    """One run of tokens read at once: its words, the cue and finding name covering each token, and
    what a status step's walk from one mention has seen so far (reset by :meth:`begin_back` /
    :meth:`begin_forward`: the walks keep their state here rather than in an object per walk, which
    made the garbage collector run more often; each thread reads its own sentences)."""

    __slots__ = (
        "aside",
        "crossed_comma",
        "cue_at",
        "cue_end",
        "cue_start",
        "entity_at",
        "far_hop",
        "hedge",
        "hedge_grade",
        "hedge_id",
        "item_has_change",
        "item_has_severity",
        "item_joined",
        "joined",
        "listed",
        "matches",
        "n",
        "name_end",
        "steps",
        "words",
    )

    def __init__(
        self,
        words: list[str],
        cue_at: Cues,
        cue_start: list[int],
        cue_end: list[int],
        entity_at: list[int],
        matches: list[GappedMatch],
    ) -> None:
        self.words = words
        self.cue_at = cue_at
        self.cue_start = cue_start
        self.cue_end = cue_end
        self.entity_at = entity_at
        self.matches = matches
        self.n = len(words)

    def phrase(self, i: int) -> str:
        """The cue phrase covering token ``i``."""
        return " ".join(self.words[self.cue_start[i] : self.cue_end[i]])

    def begin_back(self) -> Sentence:
        """Start a backward walk: nothing crossed, no hedge met."""
        self.crossed_comma = False
        self.item_has_severity = False
        self.item_has_change = False  # the mention's item names a change of its own ("stable", "new")
        self.item_joined = False  # the mention's list item is joined by and/or/nor, not a bare comma
        self.hedge: str | None = None
        self.hedge_grade = UNGRADED
        self.hedge_id = ""
        self.far_hop = False  # crossed a finding more than a list's joining words away ("X is limited due to Y")
        return self

    def begin_forward(self, name_end: int) -> Sentence:
        """Start a forward walk from a name ending at ``name_end``."""
        self.listed = False  # crossed a comma into a list of findings that share the predicate
        self.joined = False  # that list joins its last item by and / or
        self.name_end = name_end  # where the last finding name read ends
        self.aside = False  # crossed an aside between commas right after the name
        self.steps = 0
        return self


#: One bit per cue category, attribute kind and the ":" token: a sentence's categories are an int
#: (no set to make per sentence).
BITS: dict[str, int] = {name: 1 << i for i, name in enumerate((*CUE_CATEGORIES, *VOCAB_KINDS, ":"))}


def mask_of(names: Iterable[str]) -> int:
    """The bits of some categories (:data:`BITS`)."""
    mask = 0
    for name in names:
        mask |= BITS.get(name, 0)  # a key no step reads (a landmark's own places) has no bit
    return mask


#: A status step: mention ``k`` of a sentence -> a decision, or None to pass to the next step.
Step = Callable[[Sentence, int], "Decision | None"]


class StatusRules:
    """The status steps of a rule set, applied in its order."""

    def __init__(
        self, rules: RuleSet, lung_entities: frozenset[str], rest_names: Callable[[list[str], GappedMatch], str | None]
    ) -> None:
        self.lex: Lexicon = rules.lexicon
        self.cue_ids = rules.cue_ids
        self.lung_entities = lung_entities
        self.rest_names = rest_names
        self.pre_scope = rules.param("scope.backward", "max_tokens")
        self.max_hops = rules.param("scope.backward", "max_entity_hops")
        self.post_scope = rules.param("scope.forward", "max_tokens")
        self.predicate_scope = rules.param("scope.forward", "predicate_tokens")
        known: dict[str, Step] = {
            "negation.removal": self.removal,
            "negation.prefix": self.prefix,
            "negation.copula": self.copula,
            "negation.adjacent": self.adjacent,
            "scope.backward": self.backward,
            "label.value": self.label,
            "scope.forward": self.forward,
            "alternative.versus": self.versus,
            "alternative.or": self.alternative,
        }
        #: Whether ``alternative.or`` runs: ``versus`` then leaves it the words it reads first.
        self._or_runs = "alternative.or" in rules.steps
        #: Words the backward walk must look at even without a cue (others it reads past).
        self._back_plain = frozenset({"(", ",", "and", "with"}) | self.lex.conjunctions
        #: The enabled steps in order, each with the cue categories one of which it needs in the
        #: sentence to decide anything; ``finding.stated`` is what none deciding means.
        self.steps = tuple((known[s], mask_of(TRIGGERS[s])) for s in rules.steps if s in known)
        #: The steps that can decide in a sentence, by the categories the sentence holds (a mask).
        self._steps_for: dict[int, tuple[Step, ...]] = {}

    def steps_for(self, categories: int) -> tuple[Step, ...]:
        """The steps, in order, that may decide in a sentence holding cues of ``categories`` (a
        :func:`mask_of` the categories): a sentence with no cue ("Small left pleural effusion.")
        runs none."""
        steps = self._steps_for.get(categories)
        if steps is None:
            steps = self._steps_for[categories] = tuple(step for step, needs in self.steps if needs & categories)
        return steps

    @staticmethod
    def decide(steps: tuple[Step, ...], s: Sentence, k: int) -> Decision:
        """The status of mention ``k``: the first step's decision (``steps``: :meth:`steps_for`), else stated."""
        for step in steps:
            got = step(s, k)
            if got is not None:
                return got
        return STATED

    # -- steps that read the words right beside the name ------------------------------------------
    def removal(self, s: Sentence, k: int) -> Decision | None:
        """ "status post chest tube removal": a removal noun right after the name denies it."""
        m = s.matches[k]
        kinds = s.cue_at[m.end] if m.end < s.n else None
        if kinds and "removal_post" in kinds:
            return "absent", s.phrase(m.end), False, "negated", "negation.removal"
        return None

    def prefix(self, s: Sentence, k: int) -> Decision | None:
        """ "non-enlarged cardiac silhouette": a negating prefix right before the word naming the
        finding; not before a word that only describes it, where the rest of the name names a
        finding ("non-loculated effusion", "non-tension pneumothorax") or the word is a descriptor."""
        m = s.matches[k]
        if (
            sc.after_prefix(s.cue_at, m)
            and s.words[m.start] not in self.lex.prefix_descriptors
            and self.rest_names(s.words, m) is None
        ):
            return "absent", s.phrase(m.start - 1), False, "negated", "negation.prefix"
        return None

    def copula(self, s: Sentence, k: int) -> Decision | None:
        """A bare negated copula right before the finding, or before its article: "the lungs are not
        hyperinflated", "this is not a pneumothorax (but a skin fold)"; not "this is not a displaced
        fracture", nor "if this is not a pneumothorax, ..."."""
        m, words, cue_at = s.matches[k], s.words, s.cue_at
        c = m.start - 1 if m.start > 1 and words[m.start - 1] in self.lex.articles else m.start
        if not (c > 0 and cue_at[c - 1] and "negation_post" in cue_at[c - 1]):  # type: ignore[operator]
            return None
        phrase = s.phrase(c - 1)
        if phrase not in self.lex.bare_copula:
            return None
        if c < m.start and (words[m.start] in self.lex.adjectives_only or sc.in_condition(self.lex, words, s.cue_start[c - 1])):
            return None
        return "absent", phrase, False, "negated", "negation.copula"

    def adjacent(self, s: Sentence, k: int) -> Decision | None:
        """A predicate word that denies only what it stands right before: "lungs are clear airspace
        disease" (IU X-ray's dropped "of"). The lungs' predicate ("there is clear consolidation"
        states it), before a lung or pleural finding that is no second adjective of the lungs ("the
        lungs are clear, hyperexpanded"), in no run-on sentence whose finding has a verb of its own."""
        m, words, cue_at = s.matches[k], s.words, s.cue_at
        before = cue_at[m.start - 1] if m.start > 1 else None
        if not (before and "negation_adjacent" in before):
            return None
        opener = s.cue_start[m.start - 1]
        lex = self.lex
        if (
            words[opener - 1] in lex.adjacent_after
            and lex.lungs.intersection(words[max(0, opener - 4) : opener])
            and m.value in self.lung_entities
            and not words[m.start].endswith("ed")
            and not sc.stated_later(lex, words, m.end)
        ):
            return "absent", s.phrase(m.start - 1), False, "negated", "negation.adjacent"
        return None

    # -- backwards: the nearest cue before the mention, inside the clause ---------------------------
    def backward(self, s: Sentence, k: int) -> Decision | None:
        """The nearest cue before the mention inside its clause. A hedge does not end the search
        inside its own list item: "no opacity to suggest pneumonia" is a negation."""
        m = s.matches[k]
        entity_at, matches, cue_at, words, plain = s.entity_at, s.matches, s.cue_at, s.words, self._back_plain
        st = s.begin_back()
        i = m.start - 1
        steps = hops = gap = 0  # gap: words read since the mention or the last finding crossed
        while i >= 0 and steps < self.pre_scope:
            if entity_at[i] >= 0:
                hops += 1
                if hops > self.max_hops:
                    break
                st.far_hop = st.far_hop or gap > 2
                gap = 0
                i = matches[entity_at[i]].start - 1
                continue
            gap += 1
            steps += 1
            if words[i] in plain:
                got = self._back_word(s, m, i, st)
            elif cue_at[i] is None:
                i -= 1  # a word that is no cue, punctuation or joining word: read on
                continue
            else:
                got = self._back_cue(s, m, i, cue_at[i], st)  # type: ignore[arg-type]
            if got.__class__ is not int:
                return got  # type: ignore[return-value]
            if got == _STOP:
                break
            i = got
        if st.hedge is not None:
            return "uncertain", st.hedge, False, st.hedge_grade, st.hedge_id
        return None

    def _back_word(self, s: Sentence, m: GappedMatch, i: int, st: Sentence) -> int | Decision:
        """One word of the backward walk: the next position, :data:`_STOP`, or a decision."""
        words = s.words
        word = words[i]
        if word == "(" and sc.closed_clause(self.lex, words, s.cue_at, s.entity_at, i):
            return _STOP  # "no effusion identified (blunting of the costophrenic recesses ..."
        if word == ",":
            return self._back_comma(s, i, st)
        if word in self.lex.conjunctions and not st.crossed_comma:
            st.item_joined = True
        if word == "and" and words[i + 1] == "the" and sc.own_predicate(self.lex, words, s.cue_at, m):
            return _STOP  # "no pneumothorax and the endotracheal tube is in standard position": a new clause
        if word == "with" and (st.item_has_severity or st.item_has_change or words[i + 1] == "the"):
            # "no focal consolidation with mild bibasilar atelectasis", "no pneumothorax with the chest
            # tube in place": a finding added with its own size, change or article is stated
            return _STOP
        kinds = s.cue_at[i]
        if not kinds:
            return i - 1
        return self._back_cue(s, m, i, kinds, st)

    def _back_comma(self, s: Sentence, i: int, st: Sentence) -> int:
        """A comma met walking back: a list goes on, unless a hedge, a closed clause or an item with
        a size of its own ends the search there."""
        if st.hedge is not None:
            return _STOP
        if sc.closed_clause(self.lex, s.words, s.cue_at, s.entity_at, i):
            return _STOP  # "no definite pleural effusion seen, left hilar calcifications"
        st.crossed_comma = True
        if st.item_has_severity and not st.item_joined:
            return _STOP  # "no pneumothorax, mild cardiomegaly"
        return i - 1

    def _back_cue(self, s: Sentence, m: GappedMatch, i: int, kinds: dict[str, Any], st: Sentence) -> int | Decision:
        """A cue met walking back: note a size or change of the item, or decide, stop or go on."""
        start = s.cue_start[i]
        phrase = " ".join(s.words[start : s.cue_end[i]])
        if not st.crossed_comma:
            if "severity" in kinds and phrase not in self.lex.negated_list_sizes:
                st.item_has_severity = True
            if "comparison" in kinds:
                st.item_has_change = True
        if "terminators" in kinds:
            if "uncertain_pre" in kinds:  # "there may be": a hedge that also opens a new clause
                self._hedge(st, phrase, kinds["uncertain_pre"])
            return _STOP
        if "pseudo_negation" in kinds and not ("uncertain_pre" in kinds or "uncertain_post" in kinds):
            return _STOP
        if "historical_pre" in kinds:
            return "present", phrase, True, "definite", self.cue_ids.get(("historical_pre", phrase), "historical_pre")
        if "hypothetical_pre" in kinds:
            if st.crossed_comma or st.far_hop:
                # "if there is concern for X, consider Y": the condition ends at its comma; and
                # "evaluation for effusion is limited due to the consolidation" states Y
                return _STOP
            return None, phrase, False, None, self.cue_ids.get(("hypothetical_pre", phrase), "hypothetical_pre")
        if "negation_pre" in kinds:
            if phrase == "not" and s.cue_end[i] < m.start and sc.is_size(s.cue_at, s.cue_end[i]):
                # "moderate, not large, effusion": the "not" denies the size only (not a size that
                # begins the name: "not small bowel obstruction")
                return start - 1
            if st.crossed_comma and st.item_has_severity and not st.item_joined:
                return _STOP
            return "absent", phrase, False, "negated", self.cue_ids.get(("negation_pre", phrase), "negation_pre")
        if "uncertain_pre" in kinds:
            return self._back_hedge(s, start, phrase, kinds["uncertain_pre"], st)
        return start - 1

    def _back_hedge(self, s: Sentence, start: int, phrase: str, grade: str, st: Sentence) -> int | Decision:
        """A hedge met walking back: it decides a list item after a comma, else it is noted (the
        nearest wins, see :meth:`_hedge`) and the walk goes on."""
        if st.hedge is None and st.crossed_comma:
            if st.item_has_severity or (start > 0 and s.entity_at[start - 1] >= 0):
                # "cephalization suggesting congestion, and moderate cardiomegaly": a hedge between
                # two findings, or a list item with its own size, is no hedged list
                return _STOP
            return "uncertain", phrase, False, grade, self.cue_ids.get(("uncertain_pre", phrase), "uncertain_pre")
        self._hedge(st, phrase, grade)
        return start - 1

    def _hedge(self, st: Sentence, phrase: str, grade: str) -> None:
        """The hedge of a mention after the hedge cue ``phrase`` is met, looking back from it: the
        nearest hedge wins, except that two findings offered as alternatives ("versus") take a hedge
        before them, at most ``possible`` ("may represent atelectasis versus pneumonia": pneumonia is
        possible too; "probable A versus B" favours A)."""
        if st.hedge is None:
            st.hedge, st.hedge_grade = phrase, grade
        elif st.hedge_grade == ALTERNATIVE != grade:
            st.hedge, st.hedge_grade = phrase, UNGRADED
        else:
            return
        st.hedge_id = self.cue_ids.get(("uncertain_pre", phrase), "uncertain_pre")

    # -- a labelled value, as structured reports write findings -----------------------------------
    def label(self, s: Sentence, k: int) -> Decision | None:
        """ "Pneumothorax: none", "Effusion: not seen", "Pneumonia: possible"."""
        m = s.matches[k]
        if not (m.end + 1 < s.n and s.words[m.end] == ":"):
            return None
        v = m.end + 1
        kinds = s.cue_at[v]
        if not kinds:
            if s.words[v] in self.lex.label_negations:
                return "absent", s.words[v], False, "negated", "label.value"
            return None
        # a cue first: "Pneumonia: no change" is a pseudo-negation, not "no"
        phrase = s.phrase(v)
        for kind in ("uncertain_pre", "uncertain_post"):
            if kind in kinds:
                return "uncertain", phrase, False, kinds[kind], "label.value"
        if ("negation_post" in kinds or "negation_pre" in kinds) and "pseudo_negation" not in kinds:
            return "absent", phrase, False, "negated", "label.value"
        return None

    # -- forwards: a post-cue a few tokens after the mention ---------------------------------------
    def forward(self, s: Sentence, k: int) -> Decision | None:
        """A post-cue a few tokens after the mention ("the tip of the PICC is not seen" denies the
        tip, not the line)."""
        m = s.matches[k]
        n, entity_at, matches, words, cue_at = s.n, s.entity_at, s.matches, s.words, s.cue_at
        i = n if sc.tip_of(words, cue_at, m) else m.end
        hops = steps = 0
        st = s.begin_forward(m.end)
        while i < n and steps < self.predicate_scope:
            if entity_at[i] >= 0:
                hops += 1
                if hops > self.max_hops:
                    break
                i = st.name_end = matches[entity_at[i]].end
                continue
            got: int | Decision
            if words[i] == ",":
                got = self._forward_comma(s, m, i, st)
            else:
                steps += 1
                if words[i] in self.lex.conjunctions:
                    st.joined = True
                if cue_at[i] is None:
                    i += 1
                    continue
                st.steps = steps
                got = self._forward_word(s, i, st)
            if got.__class__ is not int:
                return got  # type: ignore[return-value]
            if got == _STOP:
                break
            i = got
        return None

    def _forward_comma(self, s: Sentence, m: GappedMatch, i: int, st: Sentence) -> int:
        """ "Consolidation, atelectasis, and effusion have resolved": a comma right after a name goes
        on to another finding of the same list, which a plural predicate then denies as a whole
        ("Mild cardiomegaly, effusion has resolved" stays two statements)."""
        words, n = s.words, s.n
        j = i + 1
        if j < n and words[j] in self.lex.conjunctions:
            j += 1
            st.joined = True
        if (
            i == st.name_end
            and j < n
            and s.entity_at[j] >= 0
            and s.matches[s.entity_at[j]].start == j
            and not _item_has_attributes(self.lex, words, s.cue_at, m)
        ):
            st.listed = True
            return j
        if i == m.end and not st.listed:
            close = sc.aside_end(self.lex, words, s.cue_at, s.entity_at, i)
            if close is not None:
                # "Pneumothorax, previously seen on the left, is no longer present": an aside
                # between commas; the predicate after it still denies the finding
                st.aside = True
                return close + 1
        return _STOP

    def _forward_word(self, s: Sentence, i: int, st: Sentence) -> int | Decision:
        """A cue met walking forward (its word counted in ``st.steps``): decide, stop or go on."""
        kinds: dict[str, Any] = s.cue_at[i]  # type: ignore[assignment]
        phrase = " ".join(s.words[s.cue_start[i] : s.cue_end[i]])
        near = st.steps <= self.post_scope and not st.listed and not st.aside
        if "negation_post" in kinds and (near or self._far_predicate(s, i, phrase, st)):
            if phrase in self.lex.bare_copula and sc.copula_keeps(self.lex, s.words, s.cue_at, s.entity_at, s.cue_end[i]):
                return _STOP  # "the nodule is not calcified", "the ET tube is not in the right mainstem"
            return "absent", phrase, False, "negated", self.cue_ids.get(("negation_post", phrase), "negation_post")
        if "uncertain_post" in kinds and near:
            return (
                "uncertain",
                phrase,
                False,
                kinds["uncertain_post"],
                self.cue_ids.get(("uncertain_post", phrase), "uncertain_post"),
            )
        if "terminators" in kinds or "pseudo_negation" in kinds:
            return _STOP
        return s.cue_end[i]

    def _far_predicate(self, s: Sentence, i: int, phrase: str, st: Sentence) -> bool:
        """Whether a post-negation beyond the near scope still denies: the finding's predicate
        ("pneumonia seen on the prior CT is not seen on this study"), plural after a joined list."""
        verb = s.words[s.cue_start[i]]
        lex = self.lex
        return (
            verb in lex.predicate_verbs
            and phrase not in lex.bare_copula
            and (not st.listed or (st.joined and verb in lex.plural_verbs))
        )

    # -- alternatives ------------------------------------------------------------------------------
    def _beside(self, s: Sentence, m: GappedMatch) -> tuple[int, ...]:
        """Where an alternatives word may stand: before the name (past an article or its own
        attribute words: "atelectasis or a small effusion") and right after it."""
        before = m.start - 1
        while (
            before >= 0
            and m.start - before <= 2
            and (sc.attribute_only(s.cue_at[before]) or s.words[before] in self.lex.articles)
        ):
            before -= 1
        return before, m.end

    def versus(self, s: Sentence, k: int) -> Decision | None:
        """A differential names what else the finding may be, a finding or not: "small left
        pneumothorax vs. skin fold", "nodule versus nipple shadow"; right beside the name ("small
        vs moderate effusion" doubts the size only), and not "vs prior"."""
        m = s.matches[k]
        for j in self._beside(s, m):
            if not (0 <= j < s.n and s.cue_at[j] and "alternatives" in s.cue_at[j]):  # type: ignore[operator]
                continue
            phrase = s.phrase(j)
            other = s.cue_start[j] - 1 if j < m.start else s.cue_end[j]
            if (
                phrase in self.lex.versus
                and j in (m.start - 1, m.end)
                and 0 <= other < s.n
                and not sc.attribute_only(s.cue_at[other])
                and not (j >= m.end and sc.earlier_exam(self.lex, s.words, other))
            ):
                return "uncertain", phrase, False, ALTERNATIVE, "alternative.versus"
            if self._or_runs and self._other_finding(s, m, j, other):
                return None  # an alternative nearer the name's start: "A or B vs C" is alternative.or's
        return None

    def alternative(self, s: Sentence, k: int) -> Decision | None:
        """ "atelectasis or pneumonia", "atelectasis or small effusion": another finding on the other
        side of the word (its own size or side words may stand between)."""
        m = s.matches[k]
        for j in self._beside(s, m):
            if 0 <= j < s.n and s.cue_at[j] and "alternatives" in s.cue_at[j]:  # type: ignore[operator]
                other = s.cue_start[j] - 1 if j < m.start else s.cue_end[j]
                if self._other_finding(s, m, j, other):
                    return "uncertain", s.phrase(j), False, ALTERNATIVE, "alternative.or"
        return None

    def _other_finding(self, s: Sentence, m: GappedMatch, j: int, other: int) -> bool:
        """Whether a finding's name stands on the other side of the alternatives word at ``j``
        (``other``: the first token there), past up to two size, side or article words."""
        step = -1 if j < m.start else 1
        for _ in range(2):
            if (
                0 <= other < s.n
                and s.entity_at[other] < 0
                and (sc.attribute_only(s.cue_at[other]) or s.words[other] in self.lex.articles)
            ):
                other += step
        return 0 <= other < s.n and s.entity_at[other] >= 0


def _item_has_attributes(lex: Lexicon, words: list[str], cue_at: Cues, m: GappedMatch) -> bool:
    """Whether the list item of mention ``m`` (back to the previous clause break) names a severity
    or a change of its own: "Small left effusion, pneumothorax and consolidation are not seen" and
    "Stable cardiomegaly, ..." are a finding followed by a list, not one list (a site alone does
    not tell: "Left lower lobe consolidation, atelectasis and effusion have resolved")."""
    i = m.start - 1
    while i >= 0 and words[i] not in lex.clause_break:
        i -= 1
    for j in range(i + 1, m.end):
        kinds = cue_at[j]
        if kinds and ("severity" in kinds or "comparison" in kinds):
            return True
    return False
