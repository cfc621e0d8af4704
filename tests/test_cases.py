"""The case corpus: hand-written sentences and what the rule engine must read in them.

Each file of ``tests/cases/`` holds the cases of one phenomenon (negation scope, hedges, devices,
...), in groups that share a one-line ``why``; a case gives a text and, per entity, the expected
reading. Controls (cases that guard against over-fixing) say so in their ``why``. One runner
checks them all; a failure names the file, the why, the text and the whole reading.

Expectation keys (all optional; only those given are checked):

- ``read``: true / false, whether the entity is read at all;
- ``status``, ``status_in`` (any of a list), ``not_status`` (an entity not read passes);
- ``grade`` (the certainty grade), ``side``, ``zones``, ``severity``, ``change`` (the comparison
  with a prior) and ``evidence``; ``null`` expects no value.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from cxreval.extract.models import (
    Certainty,
    ComparisonChange,
    EntityState,
    Severity,
    Side,
    Status,
)
from cxreval.extract.rules import RuleExtractor
from cxreval.extract.text import normalize
from cxreval.ontology import load_ontology

CASES = Path(__file__).parent / "cases"

#: Expectation key -> the EntityState field it checks, where the names differ.
_FIELD = {"grade": "certainty", "change": "comparison"}


class Expectation(BaseModel):
    """What one entity's reading must be; keys left out are not checked."""

    model_config = ConfigDict(extra="forbid")

    read: bool | None = None
    status: Status | None = None
    status_in: list[Status] | None = None
    not_status: Status | None = None
    grade: Certainty | None = None
    side: Side | None = None
    zones: list[str] | None = None
    severity: Severity | None = None
    change: ComparisonChange | None = None
    tip: str | None = None
    tip_mm: float | None = None
    size_mm: float | None = None
    #: Each side's size where the mentions size the sides apart (EntityState.side_severity).
    side_severity: dict[str, Severity] | None = None
    evidence: str | None = None


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    expect: dict[str, Expectation]


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid")

    why: str
    cases: list[Case]


class CaseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phenomenon: str
    about: str
    groups: list[Group]


def _slug(text: str, words: int = 8) -> str:
    """The first words of ``text`` as the engine reads them (look-alike letters folded)."""
    return "-".join(re.findall(r"[a-z0-9]+", normalize(text).text)[:words])


@cache
def load_cases() -> tuple[tuple[str, str, Case], ...]:
    """(pytest id, why, case) of every case of every file, in file order."""
    out: list[tuple[str, str, Case]] = []
    seen: set[str] = set()
    for path in sorted(CASES.glob("*.yaml")):
        doc = CaseFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        for group in doc.groups:
            for case in group.cases:
                ident = f"{path.stem}/{_slug(case.text)}"
                n = 2
                while ident in seen:
                    ident = f"{path.stem}/{_slug(case.text)}-{n}"
                    n += 1
                seen.add(ident)
                out.append((ident, group.why, case))
    return tuple(out)


def mismatches(state: EntityState | None, want: Expectation) -> list[str]:
    """What in ``state`` (None: the entity is not read) breaks ``want``; empty when it holds."""
    given = want.model_fields_set
    problems = []
    if "read" in given and (state is not None) != want.read:
        problems.append(f"read: expected {want.read}")
    if "not_status" in given and state is not None and state.status == want.not_status:
        problems.append(f"status: expected anything but {want.not_status}")
    if "status_in" in given and (state is None or state.status not in (want.status_in or ())):
        problems.append(f"status: expected one of {want.status_in}")
    for key in sorted(given - {"read", "not_status", "status_in"}):
        expected: Any = getattr(want, key)
        if key == "zones":
            expected = tuple(expected or ())
        got = None if state is None else getattr(state, _FIELD.get(key, key))
        if key == "side_severity" and state is not None:
            got = dict(state.side_severity)
        if state is None or got != expected:
            problems.append(f"{key}: expected {expected!r}, got {'(not read)' if state is None else repr(got)}")
    return problems


@pytest.fixture(scope="module")
def ex() -> RuleExtractor:
    return RuleExtractor(load_ontology())


@pytest.mark.parametrize(("why", "case"), [c[1:] for c in load_cases()], ids=[c[0] for c in load_cases()])
def test_case(ex: RuleExtractor, why: str, case: Case) -> None:
    states = ex.extract(case.text).states()
    failed = {entity: p for entity, want in case.expect.items() if (p := mismatches(states.get(entity), want))}
    assert not failed, f"{case.text!r} ({why})\n  {failed}\n  read: {states}"


def test_cases_name_known_entities_and_say_why() -> None:
    """A misspelled entity would pass ``read: false`` silently: every name must be the ontology's."""
    known = {e.id for e in load_ontology().entities}
    cases = load_cases()
    assert len(cases) >= 398
    unknown = {(ident, e) for ident, _, case in cases for e in case.expect if e not in known}
    assert not unknown, unknown
    assert all(why.strip() and "\n" not in why.strip() for _, why, _ in cases)
    assert all(case.expect for _, _, case in cases)
    assert all(want.model_fields_set for _, _, case in cases for want in case.expect.values())
