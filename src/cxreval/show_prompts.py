"""The messages each LLM engine and metric sends for one pair, as they are sent: so that a user
can read exactly what a model is asked (``cxreval prompts``), and docs/prompts.md shows them
rendered (written by :func:`prompts_markdown`, checked against it by a test)."""

from __future__ import annotations

from collections.abc import Callable

from cxreval.llm.config import LLMConfig
from cxreval.ontology import Ontology, load_ontology

#: What ``cxreval prompts`` can show: the judgement engines, the labeler and the LLM error metrics.
PROMPT_ENGINES = ("llm-pairwise", "llm-extract", "llm-labels", "green", "fineradscore")

#: A pair to show the prompts with when none is given.
EXAMPLE_REFERENCE = "Small left pleural effusion. Possible right lower lobe pneumonia. No pneumothorax."
EXAMPLE_CANDIDATE = "Moderate left pleural effusion. No focal consolidation."

Messages = list[dict[str, str]]


def _config(style: str) -> LLMConfig:
    """Settings that only shape the prompt (no call is made)."""
    return LLMConfig(base_url="http://127.0.0.1:1/v1", model="(your model)", local_only=True, schema_style=style)


def prompt_messages(
    engine: str,
    reference: str,
    candidate: str,
    *,
    style: str = "sparse",
    uncertain: str = "positive",
    hierarchy: bool = True,
    ontology: Ontology | None = None,
) -> Messages:
    """The messages ``engine`` sends for the pair (``llm-extract`` and ``llm-labels``: for the
    reference; each report costs one such call)."""
    onto = ontology or load_ontology()
    config = _config(style)
    builders: dict[str, Callable[[], Messages]] = {
        "llm-pairwise": lambda: _pairwise(onto, config, uncertain, hierarchy, reference, candidate),
        "llm-extract": lambda: _extract(onto, config, reference),
        "llm-labels": lambda: _labels(onto, config, reference),
        "green": lambda: _pair_metric("green", config, reference, candidate),
        "fineradscore": lambda: _pair_metric("fineradscore", config, reference, candidate),
    }
    if engine not in builders:
        raise ValueError(f"unknown engine {engine!r}; one of {', '.join(PROMPT_ENGINES)}")
    return builders[engine]()


def _pairwise(onto: Ontology, config: LLMConfig, uncertain: str, hierarchy: bool, reference: str, candidate: str) -> Messages:
    from cxreval.judge.llm_pairwise import LLMPairwiseJudge

    return LLMPairwiseJudge(onto, config, uncertain, hierarchy).messages(reference, candidate)  # type: ignore[arg-type]


def _extract(onto: Ontology, config: LLMConfig, text: str) -> Messages:
    from cxreval.extract.llm import LLMExtractor

    return LLMExtractor(onto, config).messages(text)


def _labels(onto: Ontology, config: LLMConfig, text: str) -> Messages:
    from cxreval.labelers import LLMLabeler

    return LLMLabeler(onto, config).messages(text)


def _pair_metric(name: str, config: LLMConfig, reference: str, candidate: str) -> Messages:
    from cxreval.metrics.fineradscore import FineRadJudge
    from cxreval.metrics.green import GreenJudge

    judge = GreenJudge(config) if name == "green" else FineRadJudge(config)
    return judge.task(reference, candidate).messages


#: A list of more lines than this (the entity list, the labels) is cut when elided.
LONG_LIST = 12


def elide_entities(text: str, shown: int = 6) -> str:
    """``text`` with each long list (the entity list, the labels: over :data:`LONG_LIST` lines
    starting ``- ``) cut after ``shown`` lines; a line says how many follow."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > LONG_LIST:
            out.extend([*run[:shown], f"... ({len(run) - shown} more, one line each)"])
        else:
            out.extend(run)
        run.clear()

    for line in text.split("\n"):
        if line.startswith("- "):
            run.append(line)
            continue
        flush()
        out.append(line)
    flush()
    return "\n".join(out)


def messages_text(messages: Messages, *, elide: bool = False) -> str:
    """Messages as plain text: each role as a header line, then its content."""
    parts = [f"--- {m['role']} ---\n{elide_entities(m['content']) if elide else m['content']}" for m in messages]
    return "\n\n".join(parts) + "\n"


def prompts_markdown() -> str:
    """docs/prompts.md: every engine's messages for the example pair (entity lists cut short)."""
    out = [
        "# The prompts, rendered",
        "",
        "What each LLM engine and metric sends for one pair, exactly as sent (the entity lists cut",
        "after six lines; `cxreval prompts ENGINE --full` prints them whole, for your own pair with",
        "`--reference` / `--candidate`). Written by `cxreval.show_prompts.prompts_markdown`; a test keeps",
        "this page equal to it. Pair:",
        "",
        f"- reference: {EXAMPLE_REFERENCE}",
        f"- candidate: {EXAMPLE_CANDIDATE}",
        "",
    ]
    for engine in PROMPT_ENGINES:
        messages = prompt_messages(engine, EXAMPLE_REFERENCE, EXAMPLE_CANDIDATE)
        out += [f"## {engine}", "", "```text", messages_text(messages, elide=True).rstrip("\n"), "```", ""]
    return "\n".join(out)
