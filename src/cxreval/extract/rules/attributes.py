"""A mention's side, zones, severity and change, and the site rules that may change its entity.

Each is read in a window of tokens around the finding name, inside its clause (the windows are
records of ``data/steps.yaml``: ``attribute.window``, ``attribute.change``, ``attribute.site_window``).
"""

from __future__ import annotations

from collections.abc import Collection

from cxreval.extract.rules import scopes as sc
from cxreval.extract.rules.interpreter import Sentence
from cxreval.extract.rules.lexicon import Lexicon
from cxreval.extract.rules.ruleset import RuleSet, SiteRule
from cxreval.ontology.attributes import attribute_vocabulary


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
        self.rank = attribute_vocabulary().severity_rank
        #: ``attribute.place_list`` (steps.yaml): a list of places after "and" is the finding's.
        self.place_list = "attribute.place_list" in rules.records
        #: Whether the last :meth:`window` read a list of places (set by it, read by place_and_size).
        self._listed = False

    def window(self, s: Sentence, k: int, back: int, forward: int, change: bool = False,
               places: bool = False) -> list[int]:
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
        return (word in lex.clause_break or word in lex.forward_break or word in lex.contrast_break
                or (word in lex.alternative_break and sc.sized_next(lex, s.words, s.cue_at, i + 1)))

    def place_and_size(self, s: Sentence, k: int) -> tuple[str | None, tuple[str, ...], str | None, bool]:
        """The side, zones and severity in the attribute window: left and right together are
        bilateral; the strongest size wins unless a word before it denies it ("not severe"). The
        last value says whether a list of places after "and" was read (``attribute.place_list``)."""
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
            if ("severity" in kinds and (severity is None or rank(kinds["severity"]) > rank(severity))
                    and not sc.denied_word(self.lex, s.words, s.cue_start[i])):
                severity = kinds["severity"]
        return _side(sides), tuple(zones), severity, listed

    def change(self, s: Sentence, k: int) -> str | None:
        """The nearest change word around the finding that no word before it denies."""
        for i in self.window(s, k, self.change_back, self.change_forward, change=True):
            kinds = s.cue_at[i]
            if kinds and "comparison" in kinds and not sc.denied_word(self.lex, s.words, s.cue_start[i]):
                return kinds["comparison"]  # type: ignore[no-any-return]
        return None

    def site(self, s: Sentence, k: int, entity: str) -> SiteRule | None:
        """The first site rule of ``entity`` whose words stand near mention ``k`` (and none of its
        ``unless`` words): then the mention names that rule's entity."""
        for rule in self.sites.get(entity, ()):
            near = self._near_words(s, k, rule)
            if near & rule.words and not near & rule.unless:
                return rule
        return None

    def _near_words(self, s: Sentence, k: int, rule: SiteRule) -> set[str]:
        """The words a site rule looks at for mention ``k``: its clause window or its sentence
        (and adjacent pairs, for two-token words such as "t 12")."""
        m, words = s.matches[k], s.words
        at: Collection[int]
        if rule.reach == "sentence":
            at = sc.sentence_range(words, m.start, m.end)
        else:
            at = {j for i in self.window(s, k, self.site_back, self.site_forward)
                  for j in range(s.cue_start[i], s.cue_end[i])}
        near = {words[j] for j in at}
        if rule.pairs:  # "t12": the tokens "t" "12" side by side
            near.update(f"{words[j]} {words[j + 1]}" for j in at if j + 1 in at)
        return near


#: Words that may close a list of places ("the right upper and left lower lobes").
_PLACE_NOUNS = frozenset({"lobe", "lobes", "lung", "lungs", "zone", "zones"})


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
