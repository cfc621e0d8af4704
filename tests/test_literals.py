"""The shared names of :mod:`cxreval.literals` (issue 30): what is built from them at run time
agrees with them, and the module stays a leaf every layer may import."""

from __future__ import annotations

import json
import subprocess
import sys
from enum import Enum
from typing import get_args

from cxreval import io, literals
from cxreval.bench.config import EngineConfig
from cxreval.cli import (
    Engine,
    Executor,
    InputFormat,
    Section,
    Uncertain,
)
from cxreval.cli.agree import TieChoice, UncertainChoice
from cxreval.cli.extract import TableFormat
from cxreval.cli.llm_options import option_type
from cxreval.engines import ENGINES, engine_names
from cxreval.extract.models import CERTAINTY_POLICIES
from cxreval.llm.config import LLMConfig


def _values(choice: type[Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in choice)


def test_engine_registry_is_the_shared_names() -> None:
    assert engine_names() == literals.ENGINES
    assert set(literals.LLM_PAIRWISE_ENGINES) <= set(ENGINES)
    assert not any(ENGINES[n].extracts for n in literals.LLM_PAIRWISE_ENGINES)
    assert set(get_args(literals.BenchEngineName)) <= set(ENGINES)


def test_keyed_tables_follow_the_shared_order() -> None:
    assert tuple(CERTAINTY_POLICIES) == literals.UNCERTAIN_POLICIES
    assert set(literals.UNGRADED_POLICIES) <= set(literals.UNCERTAIN_POLICIES)
    assert tuple(io.FORMATS) == literals.INPUT_FORMATS
    assert set(io.STREAM_FORMATS) <= set(literals.INPUT_FORMATS)
    assert tuple(io.SECTIONS) == literals.REPORT_SECTIONS
    assert literals.PRESENCE_VALUES[:3] == literals.COUNTED_PRESENCE


def test_cli_choices_are_built_from_the_shared_names() -> None:
    assert _values(Uncertain) == literals.UNCERTAIN_POLICIES
    assert _values(Engine) == literals.ENGINES
    assert _values(Section) == literals.REPORT_SECTIONS
    assert _values(InputFormat) == _values(TableFormat) == literals.INPUT_FORMATS
    assert _values(Executor) == literals.EXECUTORS
    # the LLM options' choices come from LLMConfig's fields (cxreval.cli.llm_options)
    assert set(_values(option_type("provider"))) == set(literals.PROVIDERS)
    assert set(_values(option_type("response_format"))) == set(literals.RESPONSE_FORMATS)
    assert _values(option_type("schema_style"))[0] == "sparse"  # the default first, as --help always listed them
    assert set(_values(option_type("schema_style"))) == set(literals.SCHEMA_STYLES)
    assert _values(UncertainChoice) == literals.UNCERTAIN_LABELS
    assert _values(TieChoice) == literals.TIES


def test_models_take_every_shared_value() -> None:
    for name in get_args(literals.BenchEngineName):
        assert EngineConfig(name=name).name == name
    for policy in literals.UNCERTAIN_POLICIES:
        assert EngineConfig(uncertain=policy).uncertain == policy
    for style in literals.SCHEMA_STYLES:
        assert LLMConfig(model="m", schema_style=style).schema_style == style


def test_literals_imports_nothing_of_cxreval() -> None:
    probe = "import sys, json, cxreval.literals; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=600).stdout
    loaded = {m for m in json.loads(out) if m.startswith("cxreval")}
    assert loaded == {"cxreval", "cxreval._version", "cxreval.literals"}
