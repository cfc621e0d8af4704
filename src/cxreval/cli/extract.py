"""``cxreval extract``: what the rule engine reads in reports, and with ``--explain`` why.

The lines are made by :mod:`cxreval.extract.explain` (the one place a reading is put in words);
this module reads the reports and prints.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cxreval.cli.common import (
    RulesOption,
    choice_members,
    fail,
    ontology_or_fail,
    user_rules,
)
from cxreval.literals import INPUT_FORMATS

if TYPE_CHECKING:
    from cxreval.extract.models import Extraction
    from cxreval.extract.rules import RuleExtractor


TableFormat = Enum("TableFormat", choice_members(INPUT_FORMATS), type=str)  # type: ignore[misc]


FILE = "Reports from a file"


def extract(
    # described in the docstring: typer's help would show its type as <list[str]>
    texts: Annotated[list[str] | None, typer.Argument(metavar="TEXT", hidden=True, show_default=False)] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="PATH",
            help="Read the reports from a file instead: a table (CSV, TSV, JSONL, Parquet, JSON) gives one report per row; any other file is one report; - reads standard input (one report, or a table with --format).",
            rich_help_panel=FILE,
        ),
    ] = None,
    text_col: Annotated[
        str, typer.Option("--text-col", metavar="COL", help="The report column of a --file table.", rich_help_panel=FILE)
    ] = "report",
    id_col: Annotated[
        str, typer.Option("--id-col", metavar="COL", help="The id column of a --file table.", rich_help_panel=FILE)
    ] = "id",
    input_format: Annotated[
        TableFormat | None,
        typer.Option(
            "--format",
            help="Read --file as this kind of table (needed for - and for a suffix that does not tell).",
            rich_help_panel=FILE,
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain", help="Under each mention, the rules behind each reading: rule id, cue phrase and the rule's doc."
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="One JSON object per mention (its fields, the rule ids under rules, the evidence, the report's id)."
        ),
    ] = False,
    rules: RulesOption = None,
    ontology: Annotated[Path | None, typer.Option("--ontology", help="Your own ontology YAML.")] = None,
) -> None:
    """Show what the rule engine reads in reports: each mention's entity, status/grade, attributes
    and evidence; --explain adds the rules that read it so (for checking rules).

    TEXT: one or more report texts, each read as one report (or give --file).
    """
    from cxreval.extract.rules import RuleExtractor

    if explain and as_json:
        fail("--json already holds each mention's rules (under `rules`); --explain is for the text lines")
    onto = ontology_or_fail(ontology)
    extractor = RuleExtractor(onto, user_rules(onto, rules))
    reports = _reports(texts or [], file, text_col, id_col, input_format.value if input_format else None)
    if as_json:
        _print_json(extractor, reports)
    else:
        _print_lines(extractor, reports, explain)


def _reports(texts: list[str], file: Path | None, text_col: str, id_col: str, fmt: str | None) -> dict[str, str]:
    """Report id -> text: the TEXT arguments (ids 1, 2, ...), or the reports of ``--file``."""
    if texts and file is not None:
        fail("give report texts or --file PATH, not both")
    if file is None:
        if not texts:
            fail('give a report text to read (cxreval extract "No pneumothorax."), or --file PATH')
        return {str(i): t for i, t in enumerate(texts, start=1)}
    from cxreval.io import FORMATS, InputError, read_reports

    tabular = fmt is not None or (str(file) != "-" and file.suffix.lower() in {s for x in FORMATS.values() for s in x})
    try:
        if tabular:
            return read_reports(file, id_col=id_col, text_col=text_col, format=fmt)
        text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except InputError as exc:
        fail(str(exc))
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{file}: cannot read ({getattr(exc, 'strerror', None) or exc})")
    return {str(file): text}


def _read_all(extractor: RuleExtractor, reports: dict[str, str]) -> list[tuple[str, Extraction]]:
    return [(rid, extractor.extract(text)) for rid, text in reports.items()]


def _print_lines(extractor: RuleExtractor, reports: dict[str, str], explain: bool) -> None:
    """Each report's mentions, one line each (:func:`~cxreval.extract.explain.mention_line`), with
    their rules indented below under ``explain``; then the engine's signature."""
    from cxreval.extract.explain import explain_mention, mention_line

    several = len(reports) > 1
    for rid, extraction in _read_all(extractor, reports):
        if several:
            typer.echo(f"# {rid}")
        if not extraction.mentions:
            typer.echo("(no mentions)")
        for m in extraction.mentions:
            typer.echo(mention_line(m))
            for line in explain_mention(m, extractor.rules) if explain else ():
                typer.echo(f"    {line}")
    typer.echo(f"engine: {extractor.signature}")


def _print_json(extractor: RuleExtractor, reports: dict[str, str]) -> None:
    """One JSON line per mention: the report id, the mention's fields (``rules`` included) and
    its evidence."""
    for rid, extraction in _read_all(extractor, reports):
        for m in extraction.mentions:
            row = {"id": rid, "engine": extraction.engine, **m.model_dump(mode="json"), "evidence": m.sentence}
            typer.echo(json.dumps(row, ensure_ascii=False))
