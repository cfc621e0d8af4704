"""``cxreval baseline``: a built-in IU X-ray baseline's reports for the studies of a references
file, written as a candidates CSV that ``cxreval evaluate`` and ``compare`` read like any system's.

Registered by the main CLI as ``app.command("baseline")(baseline)``. The reports are IU X-ray
train-split text (CC BY-NC-ND): write them under ``out/`` or another folder git ignores.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from cxreval.cli.common import EXIT_WRITE, fail, out_console


def baseline(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="random-train, or retrieval-oracle (docs/baselines.md).")],
    refs: Annotated[
        Path,
        typer.Option("--refs", help="References file whose study ids get a report (ReXrank JSON, or a table with --id-col)."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The candidates CSV to write (columns id, report).")],
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir", help="The data folder holding iu-xray/ and radrestruct-template/ [default: $CXREVAL_DATA_DIR]."
        ),
    ] = None,
    id_col: Annotated[str | None, typer.Option("--id-col", help="Id column of a tabular --refs [default: id].")] = None,
    section: Annotated[
        str, typer.Option("--section", help="The train reports' section to retrieve: findings or impression.")
    ] = "findings",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draws and ties.")] = 0,
    noise: Annotated[
        float, typer.Option("--noise", min=0.0, max=1.0, metavar="P", help="retrieval-oracle: label-noise probability.")
    ] = 0.0,
) -> None:
    """Write a built-in IU X-ray baseline's report for every study of --refs (nothing is scored)."""
    from cxreval.datasets.baselines import KINDS, RetrievalData, baseline_reports, iu_uid
    from cxreval.io import InputError
    from cxreval.io.writers import atomic_write_text, csv_text

    if kind not in KINDS:
        fail(f"unknown baseline {kind!r}; one of {', '.join(KINDS)}")
    if section not in ("findings", "impression"):
        fail("--section is findings or impression")
    if out.is_dir() or not out.parent.is_dir():
        fail(f"--out {out}: give a file in an existing folder")
    try:
        ids = study_ids(refs, id_col)
        data = RetrievalData.load(data_dir)
    except (InputError, FileNotFoundError) as exc:
        fail(str(exc))
    unknown = [i for i in ids if iu_uid(i) not in data.raw]
    if unknown:
        fail(
            f"{len(unknown)} of {len(ids)} ids of {refs} are no IU X-ray study (e.g. {unknown[:3]}): the baselines retrieve for IU X-ray only"
        )
    made = baseline_reports(kind, ids, seed=seed, noise=noise, section=section, data=data)  # type: ignore[arg-type]
    try:
        atomic_write_text(out, csv_text([["id", "report"], *zip(ids, made.texts, strict=True)]))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}", EXIT_WRITE)
    out_console.print(f"{out}: {made.note(kind, str(refs))}", highlight=False, soft_wrap=True)


def study_ids(refs: Path, id_col: str | None) -> list[str]:
    """The study ids of a references file, in order: the keys of a ReXrank JSON, or ``id_col``
    of a table; a duplicate, empty or missing id is an :class:`~cxreval.io.InputError`."""
    from cxreval.io import InputError, InputProblem, check_columns, load_table, record_id

    table = load_table(refs, None, None, keyed_ok=True)
    col = id_col or "id"
    if table.keyed and id_col is not None:
        table.problems.append(table.problem(f"a ReXrank-layout file is keyed by study id: --id-col {id_col!r} does not apply"))
    present = set() if table.keyed else check_columns(table, [col])
    ids = [i for rec in table.records if (i := record_id(table, rec, col, present)) is not None]
    twice = [i for i, n in Counter(ids).items() if n > 1]
    if twice:
        table.problems.append(
            InputProblem(file=table.file, field=None if table.keyed else col, message=f"ids given twice: {twice[:3]}")
        )
    if table.problems:
        raise InputError(table.problems)
    return ids
