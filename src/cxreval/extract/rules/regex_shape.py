"""Whether a normal statement's pattern can only match between two full stops.

Then the engine searches only the pieces of a section between full stops that hold one of the
statement's words, and caches each piece's matches (``engine.RuleExtractor._normal_hits``).
"""

from __future__ import annotations

import re
from typing import Any

try:
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - an internal module of the standard library: if it moved, search whole sections
    _c = _parser = None

_DOT = ord(".")


def within_full_stops(pattern: re.Pattern[str]) -> bool:
    """Whether every match of ``pattern`` lies between two full stops, whatever the text around it.

    True when no part of the pattern can match a "." (no ``.``, ``\\W``, negated class or class
    holding "."), it asserts nothing but word boundaries (no lookaround, no ``^``/``$``) and it
    never matches the empty string: then searching the pieces between full stops one by one
    finds the very matches a search of the whole text finds (a ``\\b`` at a piece's end sees the
    "." either way). Anything it cannot tell is False (search the whole section).
    """
    if _parser is None:
        return False
    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an internal parser: if it disagrees, search the whole section
        return False
    return bool(parsed.getwidth()[0] > 0 and _local(parsed))


def _class_has_dot(items: list[Any]) -> bool:
    """Whether a character class (``[...]``) may match a "."."""
    hit, negate = False, False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            hit |= av == _DOT
        elif op is _c.RANGE:
            hit |= av[0] <= _DOT <= av[1]
        elif op is not _c.CATEGORY or av not in _SAFE_CATEGORIES:
            return True  # \D, \S, \W, ...: may match "."
    return hit != negate


def _local(items: Any) -> bool:
    """Whether no item of a parsed pattern can match a "." or look past one."""
    return all(_item_local(op, av) for op, av in items)


def _item_local(op: Any, av: Any) -> bool:
    check = _CHECKS.get(op)
    return False if check is None else check(av)  # ANY, lookaround, back-reference, conditional: may reach a "."


_SAFE_CATEGORIES = (
    frozenset() if _c is None else frozenset({_c.CATEGORY_DIGIT, _c.CATEGORY_SPACE, _c.CATEGORY_WORD, _c.CATEGORY_LINEBREAK})
)
_CHECKS: dict[Any, Any] = (
    {}
    if _c is None
    else {
        _c.LITERAL: lambda av: av != _DOT,
        _c.NOT_LITERAL: lambda av: av == _DOT,
        _c.IN: lambda av: not _class_has_dot(av),
        _c.AT: lambda av: av in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY),
        _c.BRANCH: lambda av: all(_local(alt) for alt in av[1]),
        _c.SUBPATTERN: lambda av: _local(av[3]),
        _c.MAX_REPEAT: lambda av: _local(av[2]),
        _c.MIN_REPEAT: lambda av: _local(av[2]),
        _c.POSSESSIVE_REPEAT: lambda av: _local(av[2]),
        _c.ATOMIC_GROUP: lambda av: _local(av),
    }
)
