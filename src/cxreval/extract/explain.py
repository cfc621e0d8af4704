"""Why the rule engine read a mention as it did, in words: one function per form, used everywhere.

A rule-engine :class:`~cxreval.extract.models.Mention` (and the
:class:`~cxreval.extract.models.EntityState` made from it) carries the ids of the rules behind its
reading (:class:`~cxreval.extract.models.ReadingRules`) and the cue phrase that decided its
status. Two forms show them:

- :func:`rules_line`, one line: ``finding.name; negation.pre 'no'`` (the rule that named the
  entity, the rule that set the status with its cue, then the attribute rules). The
  ``reference_rules`` / ``candidate_rules`` fields of ``judgements.jsonl``, the HTML report's
  drill-down and the review page show it beside the evidence.
- :func:`explain_mention`, one line per reading with the rule's one-line doc, for
  ``cxreval extract --explain``.

The cue is quoted from the report; :func:`without_cues` gives a line's rule ids alone, for the
outputs written with ``--no-text`` (the page, a review export) that must hold no report text.

:func:`mention_line` is the summary line ``cxreval extract`` prints for each mention.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cxreval.extract.models import RULE_READINGS, Mention, ReadingRules

if TYPE_CHECKING:
    from cxreval.extract.rules import RuleSet

#: (rule ids, cue) -> their line: readings repeat (a corpus has a few hundred kinds), so each line
#: is made once; cleared when it holds :data:`_MOST_LINES` (never reached in practice).
_LINES: dict[tuple[str, str | None], str] = {}
_MOST_LINES = 4096
_STATUS = RULE_READINGS.index("status")


def rules_line(rules: str | ReadingRules | None, cue: str | None = None) -> str:
    """The rules of a reading on one line, ``finding.name; negation.pre 'no'`` ("" without rules).

    ``rules``: the rule ids as :attr:`Mention.rule_ids <cxreval.extract.models.Mention.rule_ids>`
    holds them (or the named :class:`ReadingRules`). The entity's rule comes first, then the
    status rule with the cue phrase, then the attributes' rules; a rule that set several readings
    (a normal statement names the entity and sets its status) is named once.
    """
    if rules is None:
        return ""
    line = _LINES.get((rules, cue)) if type(rules) is str else None  # judging: a row's rules, seen before
    return line if line is not None else _new_line(rules, cue)


def _new_line(rules: str | ReadingRules, cue: str | None) -> str:
    ids = rules.ids() if isinstance(rules, ReadingRules) else rules
    line = _LINES.get((ids, cue))
    if line is None:
        parts = ids.split("|")
        status = parts[_STATUS] if len(parts) > _STATUS else None
        line = "; ".join(_with_cue(rule, rule == status, cue) for rule in dict.fromkeys(parts) if rule)
        if len(_LINES) >= _MOST_LINES:
            _LINES.clear()
        _LINES[(ids, cue)] = line
    return line


def _with_cue(rule: str, is_status: bool, cue: str | None) -> str:
    return f"{rule} {cue!r}" if is_status and cue else rule


#: One part of a :func:`rules_line`: a rule id, maybe a cue as ``repr`` quotes it, then ``"; "`` or the end.
_LINE_PART = re.compile(r"""([A-Za-z0-9_.:@-]+)(?: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))?(?:; |$)""")


def without_cues(line: str) -> str:
    """The rule ids of a :func:`rules_line` without the cue phrase (``finding.name; negation.pre``):
    the cue is the report's own words. A line that cannot be read as :func:`rules_line` writes it
    gives "" rather than risk keeping a piece of report text."""
    ids: list[str] = []
    pos = 0
    while pos < len(line):
        part = _LINE_PART.match(line, pos)
        if part is None or part.end() == pos:
            return ""
        ids.append(part.group(1))
        pos = part.end()
    return "; ".join(ids)


def mention_line(m: Mention) -> str:
    """``pleural_effusion  absent/negated  side=left  'No pleural effusion.'``: the entity, its
    status and grade, the attributes that are set (a size in mm, a device's tip with its distance
    above the landmark: ``tip=carina(+20mm)``), flags (implied, history, a section other than
    the body) and the evidence."""
    parts = [m.entity, f"{m.status}/{m.certainty}"]
    attributes = (
        ("side", m.side),
        ("zones", ",".join(m.zones)),
        ("severity", m.severity),
        ("change", m.comparison),
        ("size", f"{m.size_mm:g}mm" if m.size_mm is not None else None),
        ("tip", m.tip if m.tip_mm is None else f"{m.tip}({m.tip_mm:+g}mm)"),
    )
    parts += [f"{name}={value}" for name, value in attributes if value]
    parts += [flag for flag, on in (("implied", m.implied), ("history", m.historical)) if on]
    if m.section != "body":
        parts.append(f"section={m.section}")
    parts.append(repr(m.sentence))
    return "  ".join(parts)


def explain_mention(m: Mention, rules: RuleSet | None = None) -> list[str]:
    """One line per rule behind the reading, the status first: ``status: negation.pre 'no' —
    <the rule's doc>``, then ``entity: finding.name — ...`` and the attributes' (the doc from
    ``rules``, when given and the rule has one). A rule that set several readings is one line
    (``entity, status: normal.clear-lungs 'lungs are clear' — ...``). Empty for a mention without
    rules (an LLM's)."""
    if m.rules is None:
        return []
    readings: dict[str, list[str]] = {}
    for reading, rule in sorted(m.rules.items(), key=lambda item: item[0] != "status"):
        readings.setdefault(rule, []).append(reading)
    lines = []
    for rule, names in readings.items():
        line = f"{', '.join(sorted(names, key=RULE_READINGS.index))}: {_with_cue(rule, rule == m.rules.status, m.cue)}"
        doc = rules.doc(rule) if rules is not None else ""
        lines.append(f"{line} \u2014 {doc}" if doc else line)
    return lines
