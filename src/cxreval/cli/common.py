"""What every command shares: exit codes, the one error printer, and the LLM option group.

Each option is declared once here (name, type, help, panel) and used by ``evaluate`` and the
``meta`` commands, so a flag means the same thing with the same help everywhere. ``bench``
reads its LLM settings from its YAML (``engine.llm``), which takes the same fields.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

EXIT_OK = 0
EXIT_WRITE = 1  # results could not be written
EXIT_INPUT = 2  # bad input or settings
EXIT_STOPPED = 3  # an LLM run stopped early
EXIT_UNSCORED = 4  # more pairs unscored than allowed
EXIT_DOWNLOAD = 5  # cxreval weights fetch: a download failed or was refused
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (a scheduler's, `timeout`'s or `kill`'s stop): handled as Ctrl-C is

if TYPE_CHECKING:
    from cxreval.extract.rules import RuleSet
    from cxreval.ontology import Ontology

LLM_PANEL = "LLM engines"
err_console = Console(stderr=True)
#: Standard output: the terminal's width, or 120 columns on a pipe or in a CI log (wide enough for
#: the summary tables).
out_console = Console()
if not out_console.is_terminal:
    out_console = Console(width=120)


def choice_members(values: Iterable[str]) -> list[tuple[str, str]]:
    """The members of a command-line choice's ``Enum`` (typer lists an Enum's values as the
    choices): each value of a tuple of :mod:`cxreval.literals`, named with ``_`` for ``-``.

    ``Uncertain = Enum("Uncertain", choice_members(UNCERTAIN_POLICIES), type=str)``; a member is
    looked up by name (``Uncertain["positive"]``) or by value (``Uncertain("probable-alternative")``)."""
    return [(v.replace("-", "_"), v) for v in values]


def fail(message: str, code: int = EXIT_INPUT) -> NoReturn:
    """Print ``error: message`` to stderr and end the command with ``code``.

    soft_wrap: a path or a line number is never broken across lines; escape: messages may hold "[".
    An :class:`~cxreval.io.InputError`'s message lists every problem on its own line.
    """
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def first_problem(exc: Exception) -> str:
    """The message of a settings or file error: a pydantic model's first problem in its own words
    (a validator's message), else ``field.path: what is wrong``; any other error's text."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        error = first.get("ctx", {}).get("error")
        return str(error) if error is not None else f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    return str(exc)


def ontology_or_fail(path: Path | None) -> Ontology:
    """The packaged ontology or the user's YAML (``--ontology``); a bad one ends the command with
    exit 2 and the message."""
    from cxreval.ontology import OntologyError, load_ontology

    try:
        return load_ontology(path)
    except OntologyError as exc:
        fail(str(exc))


def user_rules(ontology: Ontology, rules: Path | None, engine: str = "rules") -> RuleSet | None:
    """The rule set of ``--rules FILE`` (None without one). A file that cannot be used, or one given
    to an LLM engine, ends the command with exit 2 and the message (which names the file and line)."""
    if rules is None:
        return None
    if engine != "rules":
        fail(f"--rules applies to the rule engine; --engine {engine} reads reports without it")
    from cxreval.extract.rules import RulesError, load_rules

    try:
        return load_rules(ontology, rules)
    except RulesError as exc:
        fail(str(exc))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it ends as Ctrl-C does (what was finished is
    kept, one line says so) rather than dying at once with no word and no cleanup."""


def sigterm_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (see
    :func:`~cxreval.io.writers.sigterm_raises`): the command ends as Ctrl-C ends it, with exit 143."""
    from cxreval.io.writers import sigterm_raises

    return sigterm_raises(Terminated)


def interrupt_code(exc: BaseException) -> int:
    """The exit code of an interruption: 143 for SIGTERM (also when re-raised as another
    KeyboardInterrupt, such as the bench's ``Interrupted``), 130 for Ctrl-C."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Terminated):
            return EXIT_TERMINATED
        seen = seen.__context__
    return EXIT_INTERRUPTED


RulesOption = Annotated[
    Path | None,
    typer.Option(
        "--rules",
        metavar="FILE",
        help="A rule file that adds or overrides the rule engine's rules (docs/engine.md, "
        "'Adding a rule'); its hash enters the signature.",
    ),
]

FlatOption = Annotated[
    bool,
    typer.Option(
        "--flat",
        help="Judge every entity on its own (SPEC-CXR's flat rule): no finding hierarchy, so "
        "'pneumothorax' for 'tension pneumothorax' is a miss and a false finding, not a specificity error.",
    ),
]
SpecCompatOption = Annotated[
    bool,
    typer.Option(
        "--spec-compat",
        help="SPEC-CXR's three comparison verdicts only: a conflicting change (stable vs "
        "increased) counts as other, not as an error.",
    ),
]


# The LLM option group ------------------------------------------------------------------------
LLMConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--llm-config",
        help="YAML file of LLM settings (flags and CXREVAL_LLM_* variables override it).",
        rich_help_panel=LLM_PANEL,
    ),
]
