"""A mention's side, zones, severity and change, and the site rules that may change its entity.

Each is read in a window of tokens around the finding name, inside its clause (the windows are
records of ``data/steps.yaml``: ``attribute.window``, ``attribute.change``, ``attribute.site_window``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from cxreval.extract.rules import scopes as sc
from cxreval.extract.rules.interpreter import Sentence
from cxreval.extract.rules.lexicon import Lexicon
from cxreval.extract.rules.ruleset import LANDMARK_PLACES, RuleSet, SiteRule
from cxreval.ontology.attributes import UNIT_MM, attribute_vocabulary


class TipReading(NamedTuple):
    """What the tip reading needs of a device's position: its landmarks, the landmark its tip is
    measured from, and the landmarks above and beyond that one."""

    landmarks: frozenset[str]
    distance_landmark: str | None
    above: str | None
    beyond: str | None


class Place(NamedTuple):
    """What the attribute window says of a finding: side, zones, severity (``listed``: a list of
    places after "and" gave them, ``attribute.place_list``), its size and a prior size (mm), and
    the size of each side where a list gives them apart."""

    side: str | None
    zones: tuple[str, ...]
    severity: str | None
    listed: bool
    size_mm: float | None
    prior_mm: float | None
    #: (side, severity) of each side of a list that sizes its sides apart ("small right and large
    #: left"), in text order; () otherwise (``attribute.side_severity``).
    by_side: tuple[tuple[str, str], ...]


#: The largest size read (mm): a chest is about 300 mm wide, so a number beyond this is no size.
MAX_SIZE_MM = 500.0
#: Words a size before a finding's name is not read across: the size is another finding's.
_SIZE_BREAKS = frozenset({"with", "and"})
#: A number as the tokenizer keeps it ("6", "2.5").
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


class AttributeRules:
    """The attribute windows of a rule set."""

    def __init__(self, rules: RuleSet) -> None:
        self.lex = rules.lexicon
        self.sites = rules.sites
        self.back = rules.param("attribute.window", "back")
        self.forward = rules.param("attribute.window", "forward")
        self.change_back = rules.param("attribute.change", "back")
        self.change_forward = rules.param("attribute.change", "forward")
        self.site_back = rules.param("attribute.site_window", "back")
        self.site_forward = rules.param("attribute.site_window", "forward")
        self.size_forward = rules.param("attribute.size", "forward")
        self.tip_back = rules.param("attribute.tip", "back")
        self.tip_forward = rules.param("attribute.tip", "forward")
        self.rank = attribute_vocabulary().severity_rank
        #: ``attribute.place_list`` (steps.yaml): a list of places after "and" is the finding's.
        self.place_list = "attribute.place_list" in rules.records
        #: ``attribute.side_severity`` (steps.yaml): each side of a list keeps its own size.
        self.side_severity = "attribute.side_severity" in rules.records
        #: Whether the last :meth:`window` read a list of places (set by it, read by place_and_size).
        self._listed = False

    def window(self, s: Sentence, k: int, back: int, forward: int, change: bool = False, places: bool = False) -> list[int]:
        """Token positions around mention ``k`` inside its clause, nearest first.

        A multi-token cue counts as one step and is listed once, at its first token. ``change``:
        the window of a change word, which reaches into a next clause opened by a comma ("effusion,
        new since prior") but not back across "and there" (another clause's subject). The words
        inside the entity name itself come last ("right pneumothorax" as a synonym).
        """
        words, entity_at, cue_start, lex = s.words, s.entity_at, s.cue_start, self.lex
        m = s.matches[k]
        self._listed = False
        positions: list[int] = []
        i, steps = m.start - 1, 0
        added = False  # crossed "with": the finding was added to another ("X with small effusion")
        while i >= 0 and steps < back:
            if (entity_at[i] >= 0 and entity_at[i] != k) or words[i] in lex.clause_break or words[i] in lex.contrast_break:
                break
            if change and words[i] == "and" and words[i + 1] == "there":
                break  # "heart size is not changed and there is no effusion": a change of another clause
            if steps >= self.back and added:
                break  # the longer reach of a change word does not cross "with"
            added = added or words[i] == "with"
            positions.append(cue_start[i])
            i = cue_start[i] - 1
            steps += 1
        n = s.n
        i, steps = m.end, 0
        # "Effusion: small, left": a value after the name's colon is read to the sentence's end
        labelled = i < n and words[i] == ":"
        while i < n and steps < forward:
            if labelled and words[i] in (":", ","):
                if words[i] == "," and _clause_has_entity(self.lex, s, k, i + 1):
                    break  # "Effusion: resolved, left lower lobe atelectasis"
                i += 1
                continue
            if entity_at[i] >= 0 and entity_at[i] != k:
                break
            end = self._place_list(s, i) if places and words[i] == "and" else None
            if end is not None:  # "right upper and left lower lobes": the list's places are the finding's
                positions.extend(range(i + 1, end))
                self._listed = True
                break
            if self._ends_forward(s, i):
                # "Pneumothorax, new since prior": a change phrase opening the next clause still
                # counts, unless that clause names another finding it can belong to
                if change and words[i] == "," and i + 1 < n and not _clause_has_entity(self.lex, s, k, i + 1):
                    positions.append(i + 1)
                break
            positions.append(cue_start[i])
            i = s.cue_end[i]
            steps += 1
        positions.extend(range(m.start, m.end))  # words inside the name itself ("right pneumothorax")
        return positions

    def _place_list(self, s: Sentence, i: int) -> int | None:
        """Where a list of places that goes on after "and" (token ``i``) ends, or None
        (``attribute.place_list``): the words after it must open with "left" or "right" (or a lobe
        abbreviation) and be only side and zone words, "lobe(s)" or "lung(s)", to the clause's end.
        "Right effusion and left basilar atelectasis" (a finding follows), "hilar and right
        paratracheal lymph nodes" (a noun follows) and "both tips" are no list of places."""
        if not self.place_list or i + 1 >= s.n:
            return None
        first = s.cue_at[i + 1]
        if not first or first.get("sides") not in ("left", "right"):
            return None
        j = i + 1
        while j < s.n and s.words[j] not in self.lex.clause_break:
            kinds = s.cue_at[j]
            if not (kinds and ("sides" in kinds or "zones" in kinds)) and s.words[j] not in _PLACE_NOUNS:
                return None
            j += 1
        return j

    def _ends_forward(self, s: Sentence, i: int) -> bool:
        """Whether token ``i`` ends the forward window: a clause break, "and" / "with", a contrast,
        or "or" / "nor" before a size of another finding ("or large effusion")."""
        word, lex = s.words[i], self.lex
        return (
            word in lex.clause_break
            or word in lex.forward_break
            or word in lex.contrast_break
            or (word in lex.alternative_break and sc.sized_next(lex, s.words, s.cue_at, i + 1))
        )

    def place_and_size(self, s: Sentence, k: int, device: bool = False, units: bool = False) -> Place:
        """The side, zones and severity in the attribute window: left and right together are
        bilateral; the strongest size word wins unless a word before it denies it ("not severe").
        For a finding that is no ``device``, also the side and zones inside a landmark's words
        ("left upper lobe bronchus") and the size written with a unit (``attribute.size``) and a
        prior one, where the sentence holds a unit (``units``); a device's landmark gives it no
        side (its tip: :meth:`tip`)."""
        sides: list[str] = []
        zones: dict[str, None] = {}
        severity: str | None = None
        rank = self.rank
        window = self.window(s, k, self.back, self.forward, places=True)
        listed = self._listed
        for i in window:
            kinds = s.cue_at[i]
            if not kinds:
                continue
            if "sides" in kinds:
                sides.append(kinds["sides"])
            if "zones" in kinds:
                zones.setdefault(kinds["zones"], None)
            if not device and LANDMARK_PLACES in kinds:
                sides.extend(kinds[LANDMARK_PLACES][0])
                zones.update(dict.fromkeys(kinds[LANDMARK_PLACES][1]))
            if (
                "severity" in kinds
                and (severity is None or rank(kinds["severity"]) > rank(severity))
                and not sc.denied_word(self.lex, s.words, s.cue_start[i])
            ):
                severity = kinds["severity"]
        size = prior = None
        if not device and units:
            size, prior = self._sizes(s, k, window)
        by_side = self._by_side(s, window) if self.side_severity and len(set(sides)) > 1 and severity else ()
        return Place(_side(sides), tuple(zones), severity, listed, size, prior, by_side)

    def _by_side(self, s: Sentence, window: list[int]) -> tuple[tuple[str, str], ...]:
        """Each side's own size where a list gives them apart ("small right and large left pleural
        effusions"): the window's side and size words in text order, in parts split by "and" or a
        comma; () unless each of two or more parts names one side (left or right, not twice) and a
        size, and the sizes differ."""
        parts: list[dict[str, str]] = [{}]
        last = -1
        for i in sorted(j for j in window if s.cue_at[j]):
            kinds = s.cue_at[i]
            assert kinds is not None
            if last >= 0 and any(s.words[j] in _PART_BREAKS for j in range(last + 1, i)):
                parts.append({})
            if "sides" in kinds:
                parts[-1].setdefault("side", str(kinds["sides"]))
            if "severity" in kinds and not sc.denied_word(self.lex, s.words, s.cue_start[i]):
                parts[-1].setdefault("severity", str(kinds["severity"]))
            last = s.cue_end[i] - 1
        pairs = [(p["side"], p["severity"]) for p in parts if "side" in p and "severity" in p]
        named = [side for side, _ in pairs]
        if (
            len(pairs) < 2
            or len(pairs) != len(parts)
            or len(set(named)) != len(named)
            or not set(named) <= {"left", "right"}
            or len({sev for _, sev in pairs}) < 2
        ):
            return ()
        return tuple(pairs)

    def _sizes(self, s: Sentence, k: int, window: list[int]) -> tuple[float | None, float | None]:
        """The nearest size of the finding and a prior size (``attribute.size``): a size written
        with its unit in the window before the name, not across "with" or "and" (a size there is
        another finding's: "mass measuring 3 cm with a satellite nodule"), or after it up to
        ``size_forward`` tokens in its clause ("nodule in the right upper lobe measuring 8 mm").
        A size after "by" is an amount of change, one before "from" or "above" a distance; one
        marked as prior (:func:`_is_prior`) is the prior, else the first so marked after the size
        up to the sentence's end ("now 3 cm, previously 2 cm")."""
        m = s.matches[k]
        size = prior = None
        after = -1
        for i in self._size_units(s, k, window):
            found = _measure(self.lex, s.words, s.cue_at, i)
            if found is None or (found[1] > 0 and s.words[found[1] - 1] in self.lex.size_amounts):
                continue
            if self._distance_only(s, found[1], i + 1):
                continue  # "2 cm from the hilum": a distance
            if _is_prior(self.lex, s.words, found[1], i + 1):
                prior = prior if prior is not None else found[0]
            elif size is None:
                size, after = found[0], i + 1
        if size is not None and prior is None:
            prior = self._prior_after(s, k, max(after, m.end))
        return size, prior

    def _distance_only(self, s: Sentence, first: int, after: int) -> bool:
        """Whether the size from token ``first`` to ``after`` is a distance from a landmark ("2 cm
        from the hilum"): a direction word (``tip_above``, ``tip_below``) after it and no measure
        verb before it ("measuring 1.8 cm from the apex" is a pneumothorax's size)."""
        words, lex = s.words, self.lex
        if after >= s.n or not (words[after] in lex.tip_above or words[after] in lex.tip_below):
            return False
        i = first - 1
        while i >= 0 and words[i] in lex.size_fillers and words[i] not in lex.measure_verbs:
            i -= 1
        return not (i >= 0 and words[i] in lex.measure_verbs)

    def _size_units(self, s: Sentence, k: int, window: list[int]) -> list[int]:
        """The unit tokens a size of mention ``k`` may end at, nearest first: in the window before
        its name with no "with" or "and" between, then after its name to ``size_forward`` tokens
        (stopping at a clause break, "with", "and", a contrast or another finding)."""
        m, words = s.matches[k], s.words
        out = [
            i
            for i in window
            if i < m.start
            and s.cue_at[i]
            and "units" in s.cue_at[i]  # type: ignore[operator]
            and not any(w in _SIZE_BREAKS for w in words[i + 1 : m.start])
        ]
        i = m.end
        while i < s.n and i - m.end < self.size_forward:
            if (s.entity_at[i] >= 0 and s.entity_at[i] != k) or self._ends_forward(s, i):
                break
            kinds = s.cue_at[i]
            if kinds and "units" in kinds:
                out.append(i)
            i += 1
        return out

    def _prior_after(self, s: Sentence, k: int, start: int) -> float | None:
        """The first size marked as prior from token ``start`` to the sentence's end, not past
        another finding ("3 cm, previously 2 cm", "3 cm (2 cm previously)")."""
        for i in range(start, s.n):
            if s.words[i] in (".", ";") or (s.entity_at[i] >= 0 and s.entity_at[i] != k):
                return None
            kinds = s.cue_at[i]
            if kinds and "units" in kinds:
                found = _measure(self.lex, s.words, s.cue_at, i)
                if found is not None and _is_prior(self.lex, s.words, found[1], i + 1):
                    return found[0]
        return None

    def tip(self, s: Sentence, k: int, position: TipReading) -> tuple[str | None, float | None]:
        """Where a device's tip lies (``attribute.tip``): of its landmarks (or words saying the tip
        is where it belongs), the last one named after the device (a course is told to its end:
        "through the esophagus into the stomach"), else the last in its name, else the nearest
        before it; not one that ``tip_elsewhere`` words put elsewhere ("not in", "previously in",
        "should be advanced into"). For the measured landmark, a distance written before it ("4 cm
        above the carina": 40.0); "above the carina" with no distance is the landmark above it
        (the trachea), "below" it the one beyond (a bronchus), "just above" it the landmark
        itself. (None, None) when no landmark is named."""
        name, forward, back = self._tip_window(s, k)
        for positions, last in ((forward, True), (name, True), (back, False)):
            found = [i for i in positions if self._landmark_here(s, i, position.landmarks)]
            if found:
                i = found[-1] if last else found[0]
                return self._tip_at(s, i, s.cue_at[i]["landmarks"], position)  # type: ignore[index]
        return None, None

    def _landmark_here(self, s: Sentence, i: int, landmarks: Collection[str]) -> bool:
        """Whether token ``i`` starts a landmark of the device that no ``tip_elsewhere`` word in the
        five tokens before it puts elsewhere ("should be advanced into the stomach")."""
        kinds = s.cue_at[i]
        landmark = kinds.get("landmarks") if kinds else None
        if landmark is None or s.cue_start[i] != i or not (landmark in landmarks or landmark == "expected_position"):
            return False
        return not any(s.words[j] in self.lex.tip_elsewhere for j in range(max(0, i - 5), i))

    def _tip_at(self, s: Sentence, at: int, landmark: str, position: TipReading) -> tuple[str | None, float | None]:
        """The tip reading of ``landmark`` starting at token ``at`` (see :meth:`tip`)."""
        if landmark != position.distance_landmark:
            return landmark, None
        direction, mm = self._distance(s, at)
        if mm is None and direction > 0 and position.above is not None:
            return position.above, None
        if direction < 0 and position.beyond is not None:
            return position.beyond, None
        return landmark, mm

    def _tip_window(self, s: Sentence, k: int) -> tuple[list[int], list[int], list[int]]:
        """Mention ``k``'s name, then ``tip_forward`` tokens after it (in order) and ``tip_back``
        before it (nearest first). Unlike the attribute window it goes on across "with", "and" and
        a comma ("PICC, with tip in the SVC"); it stops at another finding and at ".", ";" or ":"."""
        m, n = s.matches[k], s.n
        reach: list[list[int]] = [[], []]
        for side, (step, start, most) in enumerate(((1, m.end, self.tip_forward), (-1, m.start - 1, self.tip_back))):
            i = start
            while 0 <= i < n and abs(i - start) < most:
                if (s.entity_at[i] >= 0 and s.entity_at[i] != k) or s.words[i] in _TIP_STOPS:
                    break
                reach[side].append(i)
                i += step
        return list(range(m.start, m.end)), reach[0], reach[1]

    def _distance(self, s: Sentence, at: int) -> tuple[int, float | None]:
        """The direction (1 above, -1 below, 0 none said) and distance written before the landmark
        starting at token ``at``: a size, a direction word (``tip_above`` / ``tip_below``), then
        "to", "the", "level" or "of" ("2 cm above the level of the carina": (1, 20.0); "above the
        carina": (1, None); "just above the carina": (1, 0.0))."""
        words, lex = s.words, self.lex
        i = at - 1
        while i >= 0 and words[i] in ("the", "to", "of", "level"):
            i -= 1
        if i < 0 or not (words[i] in lex.tip_above or words[i] in lex.tip_below):
            return 0, None
        sign = 1 if words[i] in lex.tip_above else -1
        if i > 0 and words[i - 1] in lex.tip_close:
            return sign, 0.0
        kinds = s.cue_at[i - 1] if i > 0 else None
        found = _measure(lex, words, s.cue_at, i - 1) if kinds and "units" in kinds else None
        return sign, None if found is None else sign * found[0]

    def change(self, s: Sentence, k: int) -> str | None:
        """The nearest change word around the finding that no word before it denies."""
        for i in self.window(s, k, self.change_back, self.change_forward, change=True):
            kinds = s.cue_at[i]
            if kinds and "comparison" in kinds and not sc.denied_word(self.lex, s.words, s.cue_start[i]):
                return kinds["comparison"]
        return None

    def site(self, s: Sentence, k: int, entity: str) -> SiteRule | None:
        """The first site rule of ``entity`` whose words stand near mention ``k`` (and none of its
        ``unless`` words): then the mention names that rule's entity."""
        for rule in self.sites.get(entity, ()):
            if self.holds(s, k, rule):
                return rule
        return None

    def holds(self, s: Sentence, k: int, rule: SiteRule) -> bool:
        """Whether a word of ``rule`` stands near mention ``k`` and none of its ``unless`` words does."""
        near = self._near_words(s, k, rule)
        return bool(near & rule.words) and not near & rule.unless

    def _near_words(self, s: Sentence, k: int, rule: SiteRule) -> set[str]:
        """The words a site rule looks at for mention ``k``: its clause window or its sentence
        (and adjacent pairs, for two-token words such as "t 12")."""
        m, words = s.matches[k], s.words
        at: Collection[int]
        if rule.reach == "sentence":
            at = sc.sentence_range(words, m.start, m.end)
        else:
            at = {j for i in self.window(s, k, self.site_back, self.site_forward) for j in range(s.cue_start[i], s.cue_end[i])}
        near = {words[j] for j in at}
        if rule.pairs:  # "t12": the tokens "t" "12" side by side
            near.update(f"{words[j]} {words[j + 1]}" for j in at if j + 1 in at)
        return near


#: Tokens that split the parts of a list whose sides are sized apart (:meth:`AttributeRules._by_side`).
_PART_BREAKS = frozenset({"and", ","})
#: Tokens that end the tip window (:meth:`AttributeRules._tip_window`).
_TIP_STOPS = frozenset({".", ";", ":"})

#: Words that may close a list of places ("the right upper and left lower lobes").
_PLACE_NOUNS = frozenset({"lobe", "lobes", "lung", "lungs", "zone", "zones"})


def _measure(lex: Lexicon, words: list[str], cue_at: list[dict[str, object] | None], unit_at: int) -> tuple[float, int] | None:
    """The size whose unit is token ``unit_at``, in millimetres, and the index of its first token:
    the largest of its dimensions or range ends ("1.2 x 0.8 cm": 12.0; "2-3 mm": 3.0). None for a
    number that is no size: over :data:`MAX_SIZE_MM` or zero, or after a comma that follows a
    number ("1,5 cm" may be a decimal comma). A number before another, larger than it, is no range
    end ("12/14/2019 5 mm": 5.0)."""
    unit = cue_at[unit_at]
    factor = UNIT_MM[str(unit["units"])] if unit else 1.0
    values: list[float] = []
    last: float | None = None  # the number just read in this dimension (a range end before it is smaller)
    i = unit_at - 1
    first = unit_at
    while i >= 0:
        if _NUMBER.match(words[i]) and (last is None or float(words[i]) * factor <= last):
            last = float(words[i]) * factor
            values.append(last)
            first = i
            i -= 1
        elif values and words[i] in lex.size_joiners and i > 0:
            i -= 1
            own = cue_at[i]
            if own and "units" in own:  # "1.2 cm x 0.8 cm": each dimension with its unit
                factor = UNIT_MM[str(own["units"])]
                i -= 1
            last = None  # a new dimension: any size may come before it
        else:
            break
    if not values or (first >= 2 and words[first - 1] == "," and _NUMBER.match(words[first - 2])):
        return None
    largest = max(values)
    return (largest, first) if 0 < largest <= MAX_SIZE_MM else None


def _is_prior(lex: Lexicon, words: list[str], first: int, after: int) -> bool:
    """Whether the size from token ``first`` to ``after`` is a prior study's: a ``prior_before``
    word before it (across ``size_fillers``) or a ``prior_after`` word right after it."""
    if after < len(words) and words[after] in lex.prior_after:
        return True
    i = first - 1
    while i >= 0 and words[i] in lex.size_fillers:
        i -= 1
    return i >= 0 and words[i] in lex.prior_before


def _side(sides: list[str]) -> str | None:
    """The side of a mention from the side words met: left and right together are bilateral."""
    distinct = set(sides)
    if "bilateral" in distinct or {"left", "right"} <= distinct:
        return "bilateral"
    return sides[0] if distinct else None


def _clause_has_entity(lex: Lexicon, s: Sentence, k: int, start: int) -> bool:
    """Whether another finding is named from ``start`` to the clause's end."""
    for j in range(start, s.n):
        if s.words[j] in lex.clause_break:
            return False
        if s.entity_at[j] >= 0 and s.entity_at[j] != k:
            return True
    return False
