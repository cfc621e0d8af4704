"""``cxreval snapshot``: every change of the rule engine's readings as a reviewed diff.

``diff`` reads the corpus (IU X-ray, ReXrank IU references, two systems' reports) with today's
engine and compares each text's readings with the committed snapshot; for each text read
differently it prints the text and the readings before (the engine of ``--base``, default
``HEAD``) and after, side by side. ``update`` rewrites the snapshot. Registered by the main CLI
as ``app.add_typer(snapshot_app, name="snapshot")``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cxreval.cli.common import EXIT_OK, RulesOption, fail, user_rules

if TYPE_CHECKING:
    from cxreval.extract.snapshot import Readings

snapshot_app = typer.Typer(
    help="Pin what the rule engine reads in a corpus, and show what a change alters.", no_args_is_help=True
)

#: ``snapshot diff``'s exit code when some text is read differently (as ``git diff --exit-code``).
EXIT_CHANGED = 1

#: Where the project's snapshot lives, relative to the repository root the commands run from.
DEFAULT_SNAPSHOT = Path("tests/snapshots/readings.tsv")

SnapshotOption = Annotated[Path, typer.Option("--snapshot", help="snapshot file (one line per text id: a hash of its readings)")]
DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="shared data folder [default: $CXREVAL_DATA_DIR, else ../shared/data]")
]


def _texts(data_dir: Path | None) -> dict[str, str]:
    from cxreval.datasets.corpus import readings_corpus
    from cxreval.datasets.iu_xray import resolve_data_dir
    from cxreval.io import InputError

    try:
        folder = resolve_data_dir(data_dir or os.environ.get("CXREVAL_DATA_DIR") or Path("../shared/data"))
        return readings_corpus(folder)
    except (FileNotFoundError, InputError) as exc:
        fail(str(exc))


def _read_now(texts: dict[str, str], rules: Path | None) -> tuple[str, dict[str, Readings]]:
    from cxreval.extract.rules import RuleExtractor
    from cxreval.extract.snapshot import read_corpus
    from cxreval.ontology import load_ontology

    onto = load_ontology()
    extractor = RuleExtractor(onto, user_rules(onto, rules))
    return extractor.signature, read_corpus(extractor.extract, texts)


@snapshot_app.command()
def diff(
    snapshot: SnapshotOption = DEFAULT_SNAPSHOT,
    data_dir: DataDirOption = None,
    rules: RulesOption = None,
    base: Annotated[
        str, typer.Option(help="git revision whose engine gives the 'before' readings; 'none' shows the new readings only")
    ] = "HEAD",
    limit: Annotated[int, typer.Option(help="show at most this many changed texts")] = 50,
) -> None:
    """Texts read differently from the snapshot, each with its readings before and after.

    Exits 0 when every reading matches, 1 when some changed (as ``git diff --exit-code``), 2 on
    bad input.
    """
    from cxreval.extract.snapshot import (
        Snapshot,
        SnapshotError,
        compare,
        readings_at_revision,
        render_diff,
    )

    try:
        pinned = Snapshot.read(snapshot)
    except SnapshotError as exc:
        fail(str(exc))
    texts = _texts(data_dir)
    engine, now = _read_now(texts, rules)
    found = compare(pinned, Snapshot.of(engine, now))
    old, labels = None, ("before", f"after ({engine})")
    if found.changed and base.lower() != "none":
        try:
            old_engine, old = readings_at_revision(base, {i: texts[i] for i in found.changed}, snapshot.parent)
            labels = (f"before ({base}: {old_engine})", labels[1])
        except (OSError, SnapshotError) as exc:
            Console(stderr=True).print(f"no earlier readings to show: {exc}", markup=False)
    console = Console(soft_wrap=False)
    for part in render_diff(found, texts, now, old, limit=limit, labels=labels):
        console.print(part)
    raise typer.Exit(EXIT_CHANGED if found else EXIT_OK)


@snapshot_app.command()
def update(
    snapshot: SnapshotOption = DEFAULT_SNAPSHOT,
    data_dir: DataDirOption = None,
    rules: RulesOption = None,
) -> None:
    """Rewrite the snapshot with today's readings (commit it with the reason for the change)."""
    from cxreval.extract.snapshot import Snapshot, SnapshotError, compare

    texts = _texts(data_dir)
    engine, now = _read_now(texts, rules)
    current = Snapshot.of(engine, now)
    try:
        before = compare(Snapshot.read(snapshot), current).summary() if snapshot.exists() else "a new snapshot"
    except SnapshotError:
        before = "an unreadable snapshot replaced"
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    current.write(snapshot)
    typer.echo(f"{snapshot}: {len(current.hashes)} texts read by {engine} ({before})")
