"""The LLM settings a command offers as options, generated from :class:`~cxreval.llm.config.LLMConfig`.

Each option's type (and, for a ``Literal`` field, its choices) comes from the config model's field,
so a setting added to the model needs one line here (its flag and help) and no change to any
command. :func:`with_llm_options` adds the options to a command and hands it the ones given as
one ``llm_options`` dict of field name -> value, ready for :meth:`LLMConfig.load`.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

from cxreval.cli.common import LLM_PANEL, choice_members

R = TypeVar("R")

#: The settings offered, in --help order: LLMConfig field -> (flag, help).
LLM_FLAGS: dict[str, tuple[str, str]] = {
    "provider": ("--provider", "openai (any OpenAI-compatible server) or anthropic."),
    "base_url": ("--base-url", "Endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, llama.cpp, Ollama)."),
    "model": ("--model", "Model name as the server knows it."),
    "api_key_env": (
        "--api-key-env",
        "Name of the environment variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).",
    ),
    "temperature": ("--temperature", "Sampling temperature [default: 0]."),
    "max_tokens": (
        "--max-tokens",
        "Max output tokens per call [default: sized from the answer schema, so the longest answer it allows fits].",
    ),
    "timeout": ("--timeout", "Seconds per request: a deadline for connecting and reading the whole answer."),
    "concurrency": ("--concurrency", "Calls in flight at once."),
    "retries": ("--retries", "Retries per call on 429 / 5xx / timeouts (Retry-After is honoured)."),
    "rate_limit": ("--rate-limit", "Max requests per second."),
    "response_format": (
        "--response-format",
        "Structured-output variant; auto tries json_schema, then json_object, then none.",
    ),
    "schema_style": ("--schema", "sparse: list of mentioned entities; dense: one field per entity (SPEC-CXR)."),
    "price_input": ("--price-input", "USD per million input tokens."),
    "price_output": ("--price-output", "USD per million output tokens."),
    "max_cost": ("--max-cost", "USD; start no call once this much is spent (needs prices)."),
    "local_only": ("--local-only", "Refuse any endpoint not on loopback."),
    "cache_path": ("--cache", "SQLite answer store (default ~/.cache/cxreval/llm-answers.sqlite)."),
}

_PREFIX = "llm_option_"


def option_type(field: str) -> Any:
    """The option's Python type from the config field: its type without None; a ``Literal`` as an
    Enum of its values, the field's default first (as --help has always listed them)."""
    from cxreval.llm.config import LLMConfig

    info = LLMConfig.model_fields[field]
    kind = info.annotation
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if typing.get_origin(kind) is Literal:
        values = list(typing.get_args(kind))
        if info.default in values:
            values.remove(info.default)
            values.insert(0, info.default)
        return Enum(field.title().replace("_", ""), choice_members(values), type=str)
    return Path if kind is Path else kind


def _parameter(field: str) -> inspect.Parameter:
    flag, help_text = LLM_FLAGS[field]
    option = typer.Option(flag, help=help_text, rich_help_panel=LLM_PANEL)
    annotation: Any = Annotated[option_type(field) | None, option]
    return inspect.Parameter(_PREFIX + field, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def with_llm_options(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` with one option per :data:`LLM_FLAGS` entry; it receives those given as
    ``llm_options`` (field -> value, choices as their string values; options not given left out)."""
    signature = inspect.signature(command, eval_str=True)  # typer reads the types, not their strings
    kept = [p for p in signature.parameters.values() if p.name != "llm_options"]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        given = {field: kwargs.pop(_PREFIX + field, None) for field in LLM_FLAGS}
        options = {k: (v.value if isinstance(v, Enum) else v) for k, v in given.items() if v is not None}
        return command(*args, llm_options=options, **kwargs)

    parameters = [*kept, *(_parameter(field) for field in LLM_FLAGS)]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    del wrapper.__wrapped__  # the signature above is the command's, not the wrapped one's
    return wrapper
