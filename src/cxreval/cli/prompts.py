"""``cxreval prompts``: the messages an LLM engine or metric sends for a pair, as sent.

Registered by the main CLI as ``app.command("prompts")(prompts)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cxreval.cli.common import fail, ontology_or_fail


def prompts(
    engine: Annotated[str, typer.Argument(metavar="ENGINE", help="llm-pairwise, llm-extract, llm-labels, green or fineradscore")],
    reference: Annotated[str | None, typer.Option("--reference", help="The reference report [default: an example].")] = None,
    candidate: Annotated[str | None, typer.Option("--candidate", help="The candidate report [default: an example].")] = None,
    style: Annotated[str, typer.Option("--schema", help="sparse or dense (the judgement engines' answer layout).")] = "sparse",
    uncertain: Annotated[
        str,
        typer.Option(
            "--uncertain", help="How the pairwise judge counts a hedge: positive, negative, probable, probable-alternative."
        ),
    ] = "positive",
    hierarchy: Annotated[
        bool, typer.Option("--hierarchy/--no-hierarchy", help="The pairwise judge's rule: the finding hierarchy, or flat.")
    ] = True,
    full: Annotated[bool, typer.Option("--full", help="Print the entity list whole (else its first six lines).")] = False,
    ontology: Annotated[Path | None, typer.Option("--ontology", help="Your own ontology YAML.")] = None,
) -> None:
    """Print the messages ENGINE sends for a pair, exactly as sent (nothing is sent)."""
    from cxreval.show_prompts import EXAMPLE_CANDIDATE, EXAMPLE_REFERENCE, PROMPT_ENGINES, messages_text, prompt_messages

    if engine not in PROMPT_ENGINES:
        fail(f"unknown engine {engine!r}; one of {', '.join(PROMPT_ENGINES)}")
    from cxreval.literals import UNCERTAIN_POLICIES

    if style not in ("sparse", "dense") or uncertain not in UNCERTAIN_POLICIES:
        fail(f"--schema is sparse or dense; --uncertain is one of {', '.join(UNCERTAIN_POLICIES)}")
    messages = prompt_messages(
        engine,
        reference or EXAMPLE_REFERENCE,
        candidate or EXAMPLE_CANDIDATE,
        style=style,
        uncertain=uncertain,
        hierarchy=hierarchy,
        ontology=ontology_or_fail(ontology),
    )
    typer.echo(messages_text(messages, elide=not full), nl=False)
