"""The models the README and docs name in their examples, kept in one place (issue 28, item 4).

A model a provider has retired makes a copied example fail (404, exit 3): when one is retired,
change it here and in the docs together. The list was checked against the providers' model lists
of 2026-11; Qwen/Qwen2.5-7B-Instruct is an open model a user serves locally (vLLM).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Every model an example names, by the provider that answers for it.
EXAMPLE_MODELS = {
    "Qwen/Qwen2.5-7B-Instruct": "openai-compatible (local vLLM, SGLang, llama.cpp)",
    "gpt-4.1-mini": "openai",
    "claude-sonnet-4-5": "anthropic",
}
#: Names that no longer answer (404): never in an example again.
RETIRED = {"claude-3-5-sonnet-latest", "claude-3-5-sonnet-20240620", "claude-3-opus-latest", "gpt-4-32k"}

#: ``--model X``, a YAML line ``model: X`` and ``model="X"`` (signatures' inline ``|model:...|`` are not examples).
_NAMED = re.compile(r"""(?:--model[ =]|^\s*model:\s*|\bmodel=["'])([A-Za-z0-9][A-Za-z0-9._:/-]*)""", re.MULTILINE)
#: Stand-ins, not models: the loopback test server's name and the docs' placeholder.
PLACEHOLDERS = {"loopback", "my-model"}


def _named_models() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in _NAMED.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(match.group(1), []).append(path.name)
    return found


def test_every_example_names_a_listed_model() -> None:
    named = _named_models()
    assert {"claude-sonnet-4-5", "Qwen/Qwen2.5-7B-Instruct"} <= set(named)  # the check sees the examples
    unlisted = {m: where for m, where in named.items() if m not in EXAMPLE_MODELS and m not in PLACEHOLDERS}
    assert not unlisted, f"models named in examples but not in EXAMPLE_MODELS: {unlisted}"
    assert not set(named) & RETIRED
