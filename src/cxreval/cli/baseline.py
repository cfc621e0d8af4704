"""``cxreval baseline``: a built-in IU X-ray baseline's reports for the studies of a references
file, written as a candidates CSV that ``cxreval evaluate`` and ``compare`` read like any system's.

Registered by the main CLI as ``app.command("baseline")(baseline)``. The reports are IU X-ray
train-split text (CC BY-NC-ND): write them under ``out/`` or another folder git ignores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cxreval.cli.common import fail, out_console


def baseline(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="random-train, or retrieval-oracle (docs/baselines.md).")],
    refs: Annotated[Path, typer.Option("--refs", help="References file whose study ids get a report (ReXrank JSON or tabular).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The candidates CSV to write (columns id, report).")],
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir", help="The data folder holding iu-xray/ and radrestruct-template/ [default: $CXREVAL_DATA_DIR]."
        ),
    ] = None,
    id_col: Annotated[str, typer.Option("--id-col", help="Id column of a tabular --refs.")] = "id",
    reference_col: Annotated[
        str | None, typer.Option("--reference-col", help="Text column of a tabular --refs [default: report].")
    ] = None,
    section: Annotated[
        str, typer.Option("--section", help="The train reports' section to retrieve: findings or impression.")
    ] = "findings",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draws and ties.")] = 0,
    noise: Annotated[
        float, typer.Option("--noise", min=0.0, max=1.0, metavar="P", help="retrieval-oracle: label-noise probability.")
    ] = 0.0,
) -> None:
    """Write a built-in IU X-ray baseline's report for every study of --refs (nothing is scored)."""
    from cxreval.datasets.baselines import KINDS, baseline_reports
    from cxreval.io import InputError, read_reports
    from cxreval.io.writers import atomic_write_text, csv_text

    if kind not in KINDS:
        fail(f"unknown baseline {kind!r}; one of {', '.join(KINDS)}")
    if section not in ("findings", "impression"):
        fail("--section is findings or impression")
    try:  # the references' ids, in file order (their texts are checked as evaluate would)
        ids = list(read_reports(refs, id_col=id_col, text_col=reference_col, section=section))
    except InputError as exc:
        fail(str(exc))
        return
    try:
        made = baseline_reports(kind, ids, data_dir, seed=seed, noise=noise, section=section)  # type: ignore[arg-type]
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
        return
    atomic_write_text(out, csv_text([["id", "report"], *zip(ids, made.texts, strict=True)]))
    out_console.print(f"{out}: {len(ids)} reports of {kind}; {made.signature}", highlight=False, soft_wrap=True)
