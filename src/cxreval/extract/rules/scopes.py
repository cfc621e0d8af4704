"""The clauses around a mention: where a cue's scope ends, which words belong to which statement.

Predicates the status steps (``interpreter``) and attribute windows (``attributes``) share, each
reading the sentence's tokens (``words``), the cue covering each token (``cue_at``: category ->
value, or None) and the finding name covering each token (``entity_at``: match index, or -1),
with the word lists of a :class:`Lexicon`. Also the evidence scopes: the sentence (or piece of an
over-long one) a mention's evidence is.
"""

from __future__ import annotations

from typing import Any

from cxreval.extract.rules.lexicon import Lexicon
from cxreval.extract.rules.ruleset import VOCAB_KINDS
from cxreval.extract.rules.scanning import GappedMatch
from cxreval.extract.text import NormalizedText, TokenColumns

#: A cue covering a token: its categories (and attribute kinds) -> value; None where no cue.
Cues = list[dict[str, Any] | None]
#: Attribute kinds of the cue trie: a size, side or zone (a change is read on its own).
ATTRIBUTE_KINDS = frozenset(VOCAB_KINDS) - {"comparison"}
#: Cue categories that open a statement of its own (a hedge, a denial, a verb ending a clause): an
#: "or" after one joins that statement's alternatives, not a list of what an earlier denial names.
STATEMENT_KINDS = frozenset(
    {"negation_pre", "negation_post", "uncertain_pre", "uncertain_post", "terminators", "hypothetical_pre", "historical_pre"}
)
#: Cue kinds an aside may hold: attribute words, and phrases that are no cue ("as previously noted").
_ASIDE_KINDS = frozenset({*VOCAB_KINDS, "not_cues"})
#: The most words an aside between commas may hold ("pneumothorax, previously seen on the left, is ...").
MAX_ASIDE = 6
#: Evidence scopes: a sentence longer than this (characters of the original text) is cut, at the
#: last clause boundary that keeps the piece under it (";", ":" or a line break, else a comma),
#: else at the last token that fits. The longest IU X-ray sentence has 262 characters.
MAX_SCOPE_CHARS = 400


def says_what_it_is_not(lex: Lexicon, words: list[str], cue_at: Cues, entity_at: list[int], j: int) -> bool:
    """Whether the words from ``j``, right after "X is not a", say what X is not, so X is stated: a
    finding named within three words ("the opacity is not a true nodule"), a size ("the effusion is
    not a large one") or a judgement of it ("cardiomegaly is not a new finding")."""
    if words[j] in lex.not_a_judges or is_size(cue_at, j):
        return True
    return any(entity_at[k] >= 0 for k in range(j, min(len(words), j + 3)))


def sized_next(lex: Lexicon, words: list[str], cue_at: Cues, j: int) -> bool:
    """Whether the item from ``j`` (after "or" / "and") opens with a size of its own, an article
    allowed before it: "atelectasis or (a) small effusion" (the size is the effusion's)."""
    if j < len(words) and words[j] in lex.articles:
        j += 1
    return is_size(cue_at, j)


def is_size(cue_at: Cues, j: int) -> bool:
    """Whether token ``j`` (past the end: no) is a size word ("large", "mild")."""
    kinds = cue_at[j] if j < len(cue_at) else None
    return kinds is not None and "severity" in kinds


def copula_keeps(lex: Lexicon, words: list[str], cue_at: Cues, entity_at: list[int], j: int) -> bool:
    """Whether the words from ``j``, right after a finding's bare "is not" / "are not", say what the
    finding is not rather than deny it, so it is stated: a description ("the nodule is not
    calcified", "consolidation is not (as) extensive"), a place ("the ET tube is not in the right
    mainstem bronchus"; "not in evidence" denies) or what it is not ("the opacity is not a nodule",
    see :func:`_says_what_it_is_not`)."""
    n = len(words)
    if j >= n:
        return False
    after = j + 1 if j + 1 < n and words[j] in lex.degree_words else j
    if words[after] in lex.descriptors or is_size(cue_at, after):
        return True
    if j + 1 >= n:
        return False
    if words[j] in lex.where_words:
        return words[j : j + 2] != ["in", "evidence"]
    return words[j] in lex.articles and says_what_it_is_not(lex, words, cue_at, entity_at, j + 1)


def earlier_exam(lex: Lexicon, words: list[str], j: int) -> bool:
    """Whether the words from ``j``, right after "vs", compare with an earlier exam ("vs prior",
    "vs 1/2/2020", "vs. outside films", "vs. two days ago") rather than name another diagnosis."""
    return words[j] in lex.earlier_exam or words[j][:1].isdigit() or not lex.exam_words.isdisjoint(words[j : j + 3])


def in_condition(lex: Lexicon, words: list[str], i: int) -> bool:
    """Whether a condition word opens the clause before position ``i`` ("if this is not a ...")."""
    j = i - 1
    while j >= 0 and words[j] not in lex.clause_break:
        if words[j] in lex.conditions:
            return True
        j -= 1
    return False


def after_prefix(cue_at: Cues, m: GappedMatch) -> bool:
    """Whether a negating prefix (``negation_prefix``: "non") stands right before mention ``m``."""
    kinds = cue_at[m.start - 1] if m.start > 0 else None
    return kinds is not None and "negation_prefix" in kinds


def attribute_only(kinds: dict[str, Any] | None) -> bool:
    """Whether a token's cue kinds are attribute words only (a size, side or zone): "small" in
    "atelectasis or small effusion"."""
    return kinds is not None and bool(kinds) and kinds.keys() <= ATTRIBUTE_KINDS


def own_predicate(lex: Lexicon, words: list[str], cue_at: Cues, m: GappedMatch) -> bool:
    """Whether mention ``m`` is the subject of a verb of its own that states it ("the endotracheal
    tube is in standard position", "the effusions are small"), not one that denies or hedges it."""
    if any(words[j] in lex.own_verbs for j in range(m.start, m.end)):
        return True  # the name holds its verb: "the cardiac silhouette is enlarged"
    j = m.end
    if j >= len(words) or words[j] not in lex.own_verbs:
        return False
    kinds = cue_at[j]
    return not (kinds and ("negation_post" in kinds or "uncertain_post" in kinds))


def denied_word(lex: Lexicon, words: list[str], start: int) -> bool:
    """Whether the attribute word starting at ``start`` is denied by the word before it ("not
    severe", "not a new finding"): the finding has no such size or change then."""
    if start > 1 and (words[start - 1] in lex.degree_words or words[start - 1] in lex.articles):
        start -= 1  # "not as large (as before)", "cardiomegaly is not a new finding"
    return start > 0 and words[start - 1] in lex.size_denials


def stated_later(lex: Lexicon, words: list[str], end: int) -> bool:
    """Whether a verb that states a finding follows its name (``end``) inside the clause."""
    for j in range(end, len(words)):
        if words[j] in lex.clause_break:
            return False
        if words[j] in lex.own_verbs or words[j] in lex.closing_verbs:
            return True
    return False


def closed_clause(lex: Lexicon, words: list[str], cue_at: Cues, entity_at: list[int], i: int) -> bool:
    """Whether the comma or parenthesis at ``i`` follows a denial's clause that its participle
    closed ("no definite pleural effusion seen, left hilar calcifications", "no pneumothorax
    identified (blunting of the costophrenic angles ..."), so the denial reaches no further. Not
    after an aside's participle ("no effusion, as previously noted, or pneumothorax"), nor while a
    list of what is denied goes on ("no effusion present, pneumothorax, consolidation, or edema",
    "no acute abnormality identified, such as consolidation", "no acute process identified
    (pneumonia, edema, or effusion)")."""
    return (
        i > 1
        and words[i - 1] in lex.closing_verbs
        and words[i - 2] not in lex.aside_openers
        and not list_goes_on(lex, words, cue_at, entity_at, i + 1)
    )


def list_goes_on(lex: Lexicon, words: list[str], cue_at: Cues, entity_at: list[int], start: int) -> bool:
    """Whether the words from ``start`` (right after a comma or parenthesis) go on with a list of
    what a denial names: "such as" / "including" / "specifically" before a finding, or the
    sentence joins an item with "or" / "nor" before it ends or a cue opens a statement of its own
    ("no effusion seen, pneumothorax, consolidation, or edema"; not "no pneumothorax identified
    (blunting ... may represent small effusions or pleural thickening")."""
    if start < len(words) and words[start] in lex.list_openers:
        j = start + 1
        if j < len(words) and words[j] == "as":
            j += 1  # "such as"
        if j < len(words) and entity_at[j] >= 0:
            return True
    for j in range(start, len(words)):
        if words[j] in (".", ";"):
            return False
        if words[j] in lex.alternative_break:
            return True
        kinds = cue_at[j]
        if kinds and not kinds.keys().isdisjoint(STATEMENT_KINDS):
            return False
    return False


def tip_of(words: list[str], cue_at: Cues, m: GappedMatch) -> bool:
    """Whether mention ``m`` names what a tip belongs to: "the tip of the right PICC", "tip of the
    endotracheal tube" (a predicate after it is the tip's)."""
    i = m.start - 1
    while i >= 0 and m.start - i <= 3 and (words[i] == "the" or "sides" in (cue_at[i] or ())):
        i -= 1
    return i >= 1 and words[i] == "of" and words[i - 1] in ("tip", "tips")


def aside_end(lex: Lexicon, words: list[str], cue_at: Cues, entity_at: list[int], comma: int) -> int | None:
    """Where the aside opened by the comma at ``comma`` closes (its closing comma), when it is one:
    at most ``MAX_ASIDE`` words, the first one of ``lex.aside_openers``, naming no finding and holding
    no cue but attribute words, closed by a comma that a predicate verb follows ("is no longer
    present"). None otherwise."""
    n = len(words)
    if comma + 1 >= n or words[comma + 1] not in lex.aside_openers:
        return None
    for j in range(comma + 1, min(n, comma + 2 + MAX_ASIDE)):
        word = words[j]
        if word == ",":
            return j if j + 1 < n and words[j + 1] in lex.predicate_verbs else None
        kinds = cue_at[j]
        if entity_at[j] >= 0 or word in lex.clause_break or (kinds and not kinds.keys() <= _ASIDE_KINDS):
            return None
    return None


def sentence_range(words: list[str], start: int, end: int) -> range:
    """The token positions of the sentence (between full stops) holding tokens ``start:end``."""
    lo = start
    while lo > 0 and words[lo - 1] != ".":
        lo -= 1
    hi = end
    while hi < len(words) and words[hi] != ".":
        hi += 1
    return range(lo, hi)


def scopes(lex: Lexicon, norm: NormalizedText, columns: TokenColumns) -> list[int]:
    """The token index at which each evidence scope starts, ascending (the first is 0).

    A scope is a sentence (up to a full stop, or the section's end) unless the sentence spans more
    than ``MAX_SCOPE_CHARS`` of the original text: then it is cut into pieces that fit (see
    :func:`_cut`), so a report with no full stop does not make every mention's evidence the
    whole report.
    """
    words, t_start, t_end = columns
    n = len(words)
    starts, ends = norm.starts, norm.ends
    if n and words.count(".") == (words[-1] == ".") and ends[t_end[n - 1]] - starts[t_start[0]] <= MAX_SCOPE_CHARS:
        return [0]  # one sentence that fits (what the engine reads, sentence by sentence): one scope
    breaks = [i + 1 for i, w in enumerate(words) if w == "." and i + 1 < n]
    out = [0]
    for a, b in zip([0, *breaks], [*breaks, n]):
        if a < b and ends[t_end[b - 1]] - starts[t_start[a]] > MAX_SCOPE_CHARS:
            out.extend(cut(lex, norm, columns, a, b))
        if b < n:
            out.append(b)
    return out


def cut(lex: Lexicon, norm: NormalizedText, columns: TokenColumns, a: int, b: int) -> list[int]:
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
        a = clause_cut(lex, norm.text, columns, a, j)
        cuts.append(a)


def clause_cut(lex: Lexicon, folded: str, columns: TokenColumns, a: int, j: int) -> int:
    """The last clause boundary in ``(a, j]``: after ";" / ":" or at a line break, else after a comma, else ``j``."""
    words, t_start, t_end = columns
    for c in range(j, a, -1):
        if words[c - 1] in lex.strong_break or folded.find("\n", t_end[c - 1], t_start[c]) >= 0:
            return c
    for c in range(j, a, -1):
        if words[c - 1] == ",":
            return c
    return j
