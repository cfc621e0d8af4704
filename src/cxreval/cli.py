"""Command line: ``cxreval evaluate``, ``cxreval extract``, ``cxreval ontology``."""

from __future__ import annotations

import json
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cxreval._version import __version__
from cxreval.io import InputError, read_pair_files, read_pairs
from cxreval.ontology import OntologyError, load_ontology
from cxreval.summary import print_summary

app = typer.Typer(
    help="Entity-level evaluation of generated chest X-ray reports (offline rule engine by default).",
    no_args_is_help=True,
    add_completion=False,
)
out_console = Console()
if not out_console.is_terminal:
    out_console = Console(width=120)  # pipes and CI logs: wide enough for the summary tables
err_console = Console(stderr=True)


class Uncertain(str, Enum):
    positive = "positive"
    negative = "negative"


class Section(str, Enum):
    report = "report"
    findings = "findings"
    impression = "impression"


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def example_path() -> Path:
    """The small example pairs file shipped inside the package."""
    return Path(str(resources.files("cxreval.examples") / "example_pairs.csv"))


def _fail(message: str, code: int = 2) -> None:
    # soft_wrap: never break a path or a line number across lines; escape: messages may hold "[".
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        out_console.print(f"cxreval {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    """cxreval: which clinical findings does a report generator get wrong?"""


@app.command()
def evaluate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgements.jsonl, errors.csv, scores.json.")],
    pairs: Annotated[Optional[Path], typer.Option("--pairs", help="One file with id, reference and candidate columns (CSV, TSV, JSONL, Parquet, JSON).")] = None,
    refs: Annotated[Optional[Path], typer.Option("--refs", help="References file (tabular, or ReXrank JSON), joined on id with --cands.")] = None,
    cands: Annotated[Optional[Path], typer.Option("--cands", help="Candidates file, joined on id with --refs.")] = None,
    example: Annotated[bool, typer.Option("--example", help="Score the small example shipped with the package.")] = False,
    id_col: Annotated[str, typer.Option("--id-col", help="Id column.")] = "id",
    reference_col: Annotated[str, typer.Option("--reference-col", help="Reference text column.")] = "reference",
    candidate_col: Annotated[str, typer.Option("--candidate-col", help="Candidate text column.")] = "candidate",
    meta_col: Annotated[Optional[list[str]], typer.Option("--meta-col", help="Extra column to keep (repeatable).")] = None,
    section: Annotated[Section, typer.Option("--section", help="Which text of a ReXrank JSON file to use.")] = Section.report,
    ontology: Annotated[Optional[Path], typer.Option("--ontology", help="Your own ontology YAML instead of the packaged one.")] = None,
    uncertain: Annotated[Uncertain, typer.Option("--uncertain", help="Count hedged mentions as positive or negative.")] = Uncertain.positive,
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar (default: on for long inputs in a terminal).")] = None,
    top: Annotated[int, typer.Option("--top", help="Entities to list in the summary (by reference support).")] = 15,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="Summary on stdout as a text table or JSON.")] = OutputFormat.text,
) -> None:
    """Score candidate reports against references, entity by entity (SPEC-CXR)."""
    from cxreval.evaluate import Evaluator

    sources = sum([pairs is not None, refs is not None or cands is not None, example])
    if sources != 1:
        _fail("give exactly one input: --pairs FILE, or --refs FILE --cands FILE, or --example")
    if (refs is None) != (cands is None):
        _fail("--refs and --cands go together")
    try:
        onto = load_ontology(ontology)
        if example or pairs is not None:
            source = example_path() if example else pairs
            assert source is not None
            loaded = read_pairs(
                source,
                id_col=id_col,
                reference_col=reference_col,
                candidate_col=candidate_col,
                meta_cols=meta_col or [],
            )
        else:
            assert refs is not None and cands is not None
            loaded = read_pair_files(
                refs,
                cands,
                id_col=id_col,
                reference_col=reference_col,
                candidate_col=candidate_col,
                section=section.value,
            )
    except (InputError, OntologyError) as exc:
        _fail(str(exc))
        return
    if not loaded:
        _fail("the input holds no pairs")
    result = Evaluator(onto, uncertain=uncertain.value).evaluate(loaded, progress=progress)
    paths = result.save(out)
    if fmt is OutputFormat.json:
        out_console.print_json(json.dumps(result.to_dict()["metrics"]))
    else:
        print_summary(result, out_console, top=top)
        out_console.print(
            "wrote " + ", ".join(str(p) for p in paths.values()), style="dim", highlight=False
        )


@app.command()
def extract(
    text: Annotated[str, typer.Argument(help="Report text to read.")],
    ontology: Annotated[Optional[Path], typer.Option("--ontology", help="Your own ontology YAML.")] = None,
) -> None:
    """Show what the rule engine reads in one report (for checking rules)."""
    from rich.table import Table

    from cxreval.extract import RuleExtractor

    try:
        onto = load_ontology(ontology)
    except OntologyError as exc:
        _fail(str(exc))
        return
    extraction = RuleExtractor(onto).extract(text)
    table = Table(title=f"mentions ({extraction.engine})")
    for col in ("entity", "status", "side", "zones", "severity", "comparison", "cue", "section"):
        table.add_column(col)
    for m in extraction.mentions:
        table.add_row(
            m.entity + (" (implied)" if m.implied else "") + (" (history)" if m.historical else ""),
            m.status,
            m.side or "",
            ",".join(m.zones),
            m.severity or "",
            m.comparison or "",
            m.cue or "",
            m.section,
        )
    out_console.print(table)


@app.command("ontology")
def ontology_cmd(
    path: Annotated[Optional[Path], typer.Argument(help="An ontology YAML to validate (default: the packaged one).")] = None,
    list_entities: Annotated[bool, typer.Option("--list", help="List every entity.")] = False,
) -> None:
    """Validate an ontology and summarise it."""
    try:
        onto = load_ontology(path)
    except OntologyError as exc:
        _fail(str(exc))
        return
    out_console.print(
        f"{onto.signature}: {len(onto.findings())} findings, {len(onto.differentials())} differential "
        f"diagnoses, {len(onto.groups)} groups, label sets: {', '.join(onto.labelsets)}",
        highlight=False,
    )
    if list_entities:
        from rich.table import Table

        table = Table()
        for col in ("id", "name", "kind", "group", "attributes", "critical"):
            table.add_column(col)
        for e in onto.entities:
            table.add_row(e.id, e.name, e.kind, e.group, ",".join(e.attributes), "yes" if e.critical else "")
        out_console.print(table)
