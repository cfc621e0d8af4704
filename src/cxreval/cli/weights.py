"""``cxreval weights``: fetch the weight-based metrics' checkpoints on request; list what is present.

``fetch NAME`` is the one command of cxreval that downloads: the files of the packaged manifest
(``cxreval/weights.yaml``), through huggingface_hub, at a pinned commit, each checked against the
hash the hub reports for it (a mismatch refuses the file), into the folder the metrics read
(``--to``, else ``$CXREVAL_WEIGHTS``). ``list`` shows, per metric, each folder it needs: present,
missing or unverified, and the commits recorded. Registered by the main CLI as
``app.add_typer(weights_app, name="weights")``.

Exit codes: 0 done; 2 bad input or settings (an unknown NAME, no target folder, the hub set
offline, huggingface_hub not installed); 5 a download failed or was refused (hash mismatch,
connection lost, a file missing at the commit): nothing unverified is kept, rerunning resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cxreval.cli.common import EXIT_DOWNLOAD, err_console, fail, out_console

if TYPE_CHECKING:
    from cxreval.weights import Checkpoint, FetchReport

weights_app = typer.Typer(
    help="Fetch the weight-based metrics' checkpoints (only when asked) and list what is present.", no_args_is_help=True
)


def _short(revisions: dict[str, str]) -> str:
    """``repo@commit12`` for each repo."""
    return ", ".join(f"{repo}@{sha[:12]}" for repo, sha in revisions.items())


def _fetch_one(checkpoint: Checkpoint, root: Path, overrides: dict[str, str]) -> FetchReport:
    """One checkpoint's fetch; a failure ends the command with exit 5 and the message."""
    from cxreval.weights import FetchError, WeightsInputError, fetch_checkpoint

    def say(line: str) -> None:
        err_console.print(line, highlight=False, soft_wrap=True, markup=False)

    say(f"{checkpoint.folder}: fetching into {root / checkpoint.folder}")
    try:
        return fetch_checkpoint(checkpoint, root, overrides, say)
    except WeightsInputError as exc:
        fail(str(exc))
    except FetchError as exc:
        fail(f"{checkpoint.folder}: {exc}. Nothing unverified was kept; rerun to resume.", EXIT_DOWNLOAD)


@weights_app.command("fetch")
def fetch(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="a folder (chexbert, radgraph, ...), a metric (radcliq-v1: every folder it needs) or all",
        ),
    ],
    to: Annotated[
        Path | None, typer.Option("--to", metavar="DIR", help="folder of checkpoints [default: $CXREVAL_WEIGHTS]")
    ] = None,
    revision: Annotated[
        list[str] | None,
        typer.Option(
            "--revision",
            metavar="[REPO=]SHA",
            help="download REPO at this commit instead of the pinned one (repeatable; a bare SHA when NAME uses one repo)",
        ),
    ] = None,
) -> None:
    """Download NAME's checkpoint files at their pinned commit, each verified against the hub's hash."""
    from cxreval.weights import WeightsInputError, offline_setting, parse_revisions, select, weights_root

    try:
        checkpoints = select(name)
        root = weights_root(to, "--to")
        overrides = parse_revisions(revision or [], checkpoints)
    except WeightsInputError as exc:
        fail(str(exc))
    offline = offline_setting()
    if offline is not None:
        fail(
            f"{offline} is set, so the hub may not be reached: unset it for this command to fetch (cxreval weights fetch is the only command that downloads)"
        )
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        fail("cxreval weights fetch needs huggingface_hub: pip install 'cxreval[weights]'")
    for checkpoint in checkpoints:
        report = _fetch_one(checkpoint, root, overrides)
        out_console.print(
            f"{checkpoint.folder}: verified at {_short(report.revisions)} "
            f"({len(report.downloaded)} downloaded, {len(report.kept)} already present) -> {report.folder}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )


@weights_app.command("list")
def list_weights(
    directory: Annotated[
        Path | None, typer.Option("--dir", metavar="DIR", help="folder of checkpoints [default: $CXREVAL_WEIGHTS]")
    ] = None,
    rehash: Annotated[
        bool, typer.Option("--hash", help="recompute every file's sha256 against the lock file (slower; default: sizes)")
    ] = False,
) -> None:
    """Per metric, each checkpoint folder it needs: present, missing or unverified, and its commits."""
    from cxreval.render import Column, Table, print_table
    from cxreval.weights import WeightsInputError, folder_status, needs, weights_root

    try:
        root = weights_root(directory, "--dir")
    except WeightsInputError as exc:
        fail(str(exc))
    statuses = {}
    rows = []
    for metric, checkpoint in needs():
        if checkpoint.folder not in statuses:
            statuses[checkpoint.folder] = folder_status(root, checkpoint, rehash)
        st = statuses[checkpoint.folder]
        rows.append([metric, f"{checkpoint.folder}/", st.state, _short(st.revisions) or "-", st.detail])
    columns = [
        Column("metric", "left"),
        Column("folder", "left", keep=4),
        Column("status", "left", keep=5),
        Column("revision", "left", keep=2),
        Column("detail", "left", keep=1),
    ]
    print_table(Table(columns, rows, title=f"checkpoints in {root}", note="widen the terminal to see them"), out_console)
