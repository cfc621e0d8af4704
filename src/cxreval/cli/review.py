"""``cxreval review``: draw a sample to review, serve the review page, report the engine's
accuracy against the reviewers, export the reviewed judgements as gold.

Registered by the main CLI as ``app.add_typer(review_app, name="review")``. Exit codes: 0 done,
2 bad input or settings (a results folder without judgements, another tool's database, a
database already initialised, a database ``serve`` cannot write to, a port in use, the extra
``review`` missing for ``serve``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from cxreval.cli.common import fail

review_app = typer.Typer(
    help="Radiologists check the engine's judgements in a browser; the engine's accuracy on your data.", no_args_is_help=True
)
_out = Console()
if not _out.is_terminal:
    _out = Console(width=140)

PAIR_NAMES = ("pairs.csv", "pairs.tsv", "pairs.jsonl", "pairs.json", "pairs.parquet")


@review_app.command("init")
def init(
    results: Annotated[Path, typer.Argument(metavar="RESULTS_DIR", help="Folder written by cxreval evaluate.")],
    db: Annotated[Path, typer.Option("--db", metavar="FILE", help="New review database (SQLite) to create.")],
    sample: Annotated[int, typer.Option("--sample", min=1, metavar="N", help="Pairs to draw (all, if fewer).")],
    seed: Annotated[int, typer.Option("--seed", metavar="S", help="Seed of the draw.")] = 0,
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs",
            metavar="FILE",
            help="The file that was evaluated, for the report texts [default: RESULTS_DIR/pairs.csv or .jsonl, .tsv, .json, .parquet].",
        ),
    ] = None,
    input_format: Annotated[
        str | None,
        typer.Option(
            "--format", metavar="FORMAT", help="Format of --pairs when its suffix does not tell (csv, tsv, jsonl, json, parquet)."
        ),
    ] = None,
    id_col: Annotated[str, typer.Option("--id-col", help="Id column of --pairs.")] = "id",
    reference_col: Annotated[str, typer.Option("--reference-col", help="Reference text column of --pairs.")] = "reference",
    candidate_col: Annotated[str, typer.Option("--candidate-col", help="Candidate text column of --pairs.")] = "candidate",
    critical_boost: Annotated[
        float,
        typer.Option("--critical-boost", min=1.0, metavar="X", help="Over-sampling factor of strata led by a critical entity."),
    ] = 3.0,
    ontology: Annotated[
        Path | None,
        typer.Option("--ontology", metavar="FILE", help="The ontology the results were scored with, if not the packaged one."),
    ] = None,
) -> None:
    """Draw a seeded, stratified sample of pairs from a results folder into a review database."""
    from cxreval.io import InputError, read_pairs
    from cxreval.ontology import OntologyError
    from cxreval.review.db import ReviewDBError
    from cxreval.review.sampling import ReviewSetupError, init_review

    if pairs is None:
        found = [results / n for n in PAIR_NAMES if (results / n).is_file()]
        if not found:
            fail(
                f"give --pairs FILE (the file that was evaluated): {results} holds only scores, not the report "
                f"texts the reviewers read (or put them there as {' / '.join(PAIR_NAMES)})"
            )
        pairs = found[0]
    from cxreval.judge.files import judgements_file

    if judgements_file(results) is None:
        fail(f"{results}: no judgements.jsonl.gz; RESULTS_DIR must be a folder written by cxreval evaluate")
    try:
        loaded = read_pairs(pairs, id_col=id_col, reference_col=reference_col, candidate_col=candidate_col, format=input_format)
        drawn = init_review(
            results, db, loaded, sample, seed=seed, critical_boost=critical_boost, ontology_path=ontology, pairs_file=str(pairs)
        )
    except (InputError, OntologyError, ReviewSetupError, ReviewDBError) as exc:
        fail(str(exc))
    _out.print(
        f"{db}: {len(drawn.pairs)} of {drawn.n_pairs} pairs drawn (seed {seed}) from {len(drawn.strata)} strata", highlight=False
    )
    if drawn.implied_tn:
        _out.print(
            f"note: {results} holds compact rows, so the reviewers see the rows that count in a score and no "
            "true negatives; to review those too, evaluate with --rows full",
            highlight=False,
            soft_wrap=True,
        )
    for s in drawn.strata:
        _out.print(f"  {s.key:<32} {s.sampled:>4} of {s.size:<5} weight {s.weight:.3g}", highlight=False)
    _out.print(f"next: cxreval review serve {db}", highlight=False)


@review_app.command("serve")
def serve(
    db: Annotated[Path, typer.Argument(metavar="DB", help="Review database made by cxreval review init.")],
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; any other than loopback requires a token (printed in the URL).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, metavar="P", help="Port (0: any free one).")] = 8765,
    lock_timeout: Annotated[
        float,
        typer.Option(
            "--lock-timeout",
            min=0.0,
            metavar="SECONDS",
            help="How long a write waits for another program's lock on the database before the page is told it was not saved (it keeps the answer and retries).",
        ),
    ] = 30.0,
) -> None:
    """Serve the review page locally until Ctrl-C; every answer is saved as it is given."""
    from cxreval.review.db import ReviewDB, ReviewDBError
    from cxreval.review.server import MissingExtra, PortInUse, require_extra

    try:
        require_extra()
        with ReviewDB.open(db, lock_timeout) as opened:
            opened.check_writable()  # a database the server cannot write to is refused now, saying why
    except (MissingExtra, ReviewDBError) as exc:
        fail(str(exc))
    from cxreval.review.server import serve as run_server

    def announce(url: str) -> None:
        typer.echo(f"review page: {url}")
        typer.echo("(put your name in the URL in place of YOUR_NAME; Ctrl-C stops the server, answers are saved)")

    try:
        run_server(db, host=host, port=port, announce=announce, lock_timeout=lock_timeout)
    except (PortInUse, ReviewDBError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@review_app.command("stats")
def stats(
    db: Annotated[Path, typer.Argument(metavar="DB", help="Review database.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON.")] = False,
    csv_file: Annotated[
        Path | None, typer.Option("--csv", metavar="FILE", help="Write every number with its signature as CSV.")
    ] = None,
    latex_file: Annotated[
        Path | None, typer.Option("--latex", metavar="FILE", help="Write SPEC-CXR's validation table as LaTeX.")
    ] = None,
    html_file: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Write the review section as a self-contained HTML page.")
    ] = None,
    resamples: Annotated[
        int, typer.Option("--resamples", min=0, metavar="N", help="Bootstrap resamples of the weighted interval.")
    ] = 2000,
    seed: Annotated[int | None, typer.Option("--seed", metavar="S", help="Bootstrap seed [default: the sample's seed].")] = None,
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.999, metavar="LEVEL", help="Confidence level of the intervals.")
    ] = 0.95,
    top: Annotated[
        int, typer.Option("--top", min=0, metavar="N", help="Entities the engine gets wrong most often, to list.")
    ] = 10,
    reviewer: Annotated[
        list[str] | None, typer.Option("--reviewer", metavar="NAME", help="Only these reviewers' answers (repeatable).")
    ] = None,
    no_text: Annotated[
        bool,
        typer.Option(
            "--no-text", help="No report text (examples' evidence sentences, reviewers' notes) in any output, to share it."
        ),
    ] = False,
) -> None:
    """The engine's accuracy per field against the reviewers (SPEC-CXR's layout), re-weighted for the sampling."""
    from cxreval.io.writers import atomic_write_text
    from cxreval.render import print_table
    from cxreval.review.accuracy import (
        accuracy_table,
        entities_table,
        review_stats,
        reviewer_agreement_table,
        to_csv,
        to_html,
        to_latex,
    )
    from cxreval.review.db import ReviewDB, ReviewDBError

    try:
        with ReviewDB.open(db) as opened:
            result = review_stats(opened, resamples=resamples, seed=seed, confidence=confidence, top=top, reviewers=reviewer)
    except ReviewDBError as exc:
        fail(str(exc))
    if no_text:
        result = result.without_text()
    for path, render in ((csv_file, to_csv), (latex_file, to_latex), (html_file, to_html)):
        if path is not None:
            atomic_write_text(path, render(result))
    if as_json:
        typer.echo(json.dumps(result.model_dump(), indent=2))
        return
    _out.print(
        f"{escape(str(db))}: {result.pairs_reviewed} of {result.pairs_sampled} sampled pairs checked "
        f"({_reviews_by(result.reviews, result.reviewers)}); the weighted estimate "
        f"stands for {result.pairs_represented} of {result.pairs_in_results} pairs",
        highlight=False,
    )
    print_table(accuracy_table(result), _out)
    _out.print(
        f"accuracy: {escape(result.fields[0].signature)}\nweighted: {escape(result.fields[0].weighted_signature)}",
        highlight=False,
        soft_wrap=True,
    )
    if any(g.items for g in result.agreement):
        print_table(reviewer_agreement_table(result), _out)
    if result.worst_entities:
        print_table(entities_table(result), _out)


@review_app.command("export")
def export(
    db: Annotated[Path, typer.Argument(metavar="DB", help="Review database.")],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="Folder for judgements.jsonl.gz, errors.csv, scores.json.")
    ],
    prefer: Annotated[
        list[str] | None,
        typer.Option(
            "--prefer", metavar="NAME", help="Reviewer whose answer wins a tie (repeatable, in order) [default: alphabetical]."
        ),
    ] = None,
    ontology: Annotated[
        Path | None,
        typer.Option("--ontology", metavar="FILE", help="The ontology the sample was drawn with, if not the packaged one."),
    ] = None,
    no_text: Annotated[
        bool,
        typer.Option(
            "--no-text",
            help="No report text in any file, to share the export: evidence as offsets (evaluate's compact rows), "
            "no quoted cues, empty reference/candidate cells in human_ratings.csv.",
        ),
    ] = False,
) -> None:
    """Write the reviewed judgements as a gold judgement table (the files cxreval evaluate writes)."""
    from cxreval.io.writers import OutputError, check_out_dir
    from cxreval.ontology import OntologyError
    from cxreval.review.db import ReviewDB
    from cxreval.review.export import export_gold

    try:
        check_out_dir(out)
        with ReviewDB.open(db) as opened:
            result = export_gold(opened, out, prefer=prefer or [], ontology_path=ontology, include_text=not no_text)
    except (OutputError, OntologyError, ValueError) as exc:  # ReviewDBError is a ValueError
        fail(str(exc))
    _out.print(
        f"wrote {escape(str(out))}/: judgements.jsonl.gz, errors.csv, scores.json, and human_ratings.csv for "
        f"cxreval meta human ({result.n_pairs} checked pairs, "
        f"{len(result.judgements)} judgement rows; signature {escape(str(result.signature))})",
        highlight=False,
        soft_wrap=True,
    )
    if no_text:
        _out.print(
            "no report text in these files: evidence as offsets into the pairs' texts; human_ratings.csv's "
            "reference and candidate cells are empty (fill them in by id before cxreval meta human)",
            highlight=False,
            soft_wrap=True,
        )


def _reviews_by(reviews: int, reviewers: list[str]) -> str:
    """ "3 reviews by ann, bob", "1 review by ann", or "no review yet"."""
    if not reviews:
        return "no review yet"
    return f"{reviews} review{'' if reviews == 1 else 's'} by {', '.join(reviewers)}"
