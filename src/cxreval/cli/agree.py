"""``cxreval agree``: the command; reading, statistics and rendering are in :mod:`cxreval.agree`.

Kept apart so that registering the command imports no pandas or scipy (``cxreval --version``
stays fast); the work is imported when the command runs.
"""

from __future__ import annotations

import contextlib
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cxreval.cli.common import choice_members, fail
from cxreval.literals import TIES, UNCERTAIN_LABELS

UncertainChoice = Enum("UncertainChoice", choice_members(UNCERTAIN_LABELS), type=str)  # type: ignore[misc]
TieChoice = Enum("TieChoice", choice_members(TIES), type=str)  # type: ignore[misc]


class AgreeFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"
    latex = "latex"


_fail = fail


def _labels_option(labels: str | None, labelset: str | None, ontology: Path | None) -> tuple[list[str] | None, str]:
    """Label names and order from ``--labels`` or an ontology label set, and the ontology signature."""
    if labels:
        return [s.strip() for s in labels.split(",") if s.strip()], "none"
    if labelset:
        from cxreval.ontology import load_ontology

        onto = load_ontology(ontology)
        if labelset not in onto.labelsets:
            _fail(f"ontology {onto.signature} has no label set {labelset!r}; label sets: {', '.join(sorted(onto.labelsets))}")
        return list(onto.labelsets[labelset].labels), onto.signature
    return None, "none"


def agree(
    predictions: Annotated[Path, typer.Argument(help="Predicted labels (CSV, TSV, JSONL, JSON list, Parquet).")],
    gold: Annotated[
        list[Path],
        typer.Option(
            "--gold", "-g", metavar="FILE", help="Gold labels; give several times for several annotators (majority vote)."
        ),
    ],
    id_col: Annotated[str, typer.Option("--id-col", help="Id column.")] = "id",
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            help="Comma-separated label columns to compare, in this order (default: all columns of the predictions file).",
        ),
    ] = None,
    labelset: Annotated[
        str | None,
        typer.Option(
            "--labelset", help="Take the labels from this ontology label set (ran21, chexpert14, chestxray14, or your own)."
        ),
    ] = None,
    ontology: Annotated[
        Path | None, typer.Option("--ontology", help="Ontology YAML for --labelset (default: the packaged one).")
    ] = None,
    uncertain: Annotated[
        UncertainChoice, typer.Option("--uncertain", help="Uncertain (-1) labels count as negative, positive, or are excluded.")
    ] = UncertainChoice["negative"],
    tie: Annotated[
        TieChoice, typer.Option("--tie", help="Annotator ties: exclude the item, or call it positive / negative.")
    ] = TieChoice["exclude"],
    confidence: Annotated[
        float,
        typer.Option(
            "--confidence", min=0.5, max=0.999, metavar="LEVEL", help="Confidence level of the Clopper-Pearson interval."
        ),
    ] = 0.95,
    format: Annotated[
        AgreeFormat, typer.Option("--format", "-f", help="table (terminal), json, csv or latex.")
    ] = AgreeFormat.table,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the output to this file instead of standard output.")
    ] = None,
) -> None:
    """Per-label agreement of predicted labels with gold labels (Ran Score tables 2 and 4)."""
    from cxreval.agree import (
        agreement_display,
        agreement_table,
        check_ids,
        read_labels,
        render_csv,
        render_json,
        render_latex,
    )
    from cxreval.io import InputError
    from cxreval.render import print_table
    from cxreval.scores.signature import Signature

    label_names, onto_sig = _labels_option(labels, labelset, ontology)
    try:
        pred = read_labels(predictions, id_col=id_col, labels=label_names)
        golds = [read_labels(g, id_col=id_col, labels=list(pred.columns)) for g in gold]
        check_ids(pred, golds, gold, predictions)
    except InputError as exc:
        _fail(str(exc))
    base = Signature(
        metric="label-agreement", ontology=onto_sig, engine="external", options={"labelset": labelset} if labelset else {}
    )
    table = agreement_table(pred, golds, uncertain=uncertain.value, tie=tie.value, confidence=confidence, signature=base)
    if format == AgreeFormat.table:
        with out.open("w", encoding="utf-8") if out else contextlib.nullcontext(None) as fh:
            console = Console(width=160, file=fh)
            print_table(agreement_display(table), console)
        return
    text = {AgreeFormat.json: render_json, AgreeFormat.csv: render_csv, AgreeFormat.latex: render_latex}[format](table)
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        typer.echo(text, nl=False)
