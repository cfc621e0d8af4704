"""Writers of a :class:`~cxreval.render.table.Table`: terminal, CSV, Markdown, LaTeX and JSON.

Each format's rules live here once: the terminal drops columns by priority rather than cutting
numbers ("0.9…"), CSV goes through the formula-safe writer, LaTeX cells are escaped, and every
writer carries the table's signature.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cxreval.io.writers import csv_text
from cxreval.render.table import Cell, CellValue, Table
from cxreval.render.text import latex_escape

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

#: A table's first column may be cut to this many characters (with "…") before others are dropped.
MIN_NAME_WIDTH = 22

_LATEX_ALIGN = {"left": "l", "right": "r", "center": "c"}


def _kept_columns(table: Table, rows: list[list[str]], width: int) -> tuple[list[int], list[int], int]:
    """The columns that fit in ``width``, every column's natural width and the first column's
    width: the first column is cut down to :data:`MIN_NAME_WIDTH` first, then the others go in
    order of ``keep`` (lowest first)."""
    widths = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(table.columns)]
    kept = list(range(len(table.columns)))

    def total(first: int) -> int:  # box edges + " x " per column
        return 1 + sum((first if i == 0 else widths[i]) + 3 for i in kept)

    first = widths[0]
    if total(first) > width:
        first = max(min(widths[0], MIN_NAME_WIDTH), widths[0] - (total(widths[0]) - width))
    for i in sorted(kept[1:], key=lambda i: (table.columns[i].keep, -i)):
        if total(first) <= width:
            break
        kept.remove(i)
    return kept, widths, first


def to_terminal(table: Table, console: Console) -> RichTable:
    """A rich table that fits ``console``: columns are dropped by priority, never squeezed to
    ``0.…``; every kept column shows its values in full and the dropped ones are named in the
    caption. Text is never read as markup (a ``[`` in a name stays). The signature is printed
    by :func:`print_table`, on its own line so that it can be copied whole."""
    from rich.table import Table as RichTable
    from rich.text import Text

    rows = table.text_rows()
    kept, widths, first = _kept_columns(table, rows, console.width)
    dropped = [c.header for i, c in enumerate(table.columns) if i not in kept]
    caption = f"not shown at this width: {', '.join(dropped)} ({table.note})" if dropped else None
    out = RichTable(
        title=Text(table.title) if table.title else None, title_justify="left", caption=caption, caption_justify="left"
    )
    for i in kept:
        c = table.columns[i]
        out.add_column(
            Text(c.header),
            justify=c.align,
            no_wrap=True,
            **({"overflow": "ellipsis", "max_width": first} if i == 0 else {"min_width": widths[i]}),
        )
    for n, r in enumerate(rows):
        out.add_row(*(Text(r[i]) for i in kept), end_section=n in table.rules_after)
    return out


def print_signature(signature: str, console: Console) -> None:
    """The signature on its own line, never wrapped, so it can be copied whole."""
    console.print("signature:", style="dim", highlight=False)
    console.print(signature, style="dim", highlight=False, soft_wrap=True, overflow="ignore", crop=False)


def print_table(table: Table, console: Console) -> None:
    """The table fitted to ``console``, then its signature (when it has one)."""
    console.print(to_terminal(table, console))
    if table.signature is not None:
        print_signature(table.signature, console)


def to_csv(table: Table) -> str:
    """The table as CSV through cxreval's formula-safe writer; a ``signature`` column is added
    when the table has a signature."""
    sig = [] if table.signature is None else ["signature"]
    rows: list[list[object]] = [[*table.headers, *sig]]
    rows += [[*r, *([table.signature] if table.signature is not None else [])] for r in table.text_rows()]
    return csv_text(rows)


def _markdown_cell(text: str) -> str:
    return text.replace("|", r"\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table (``|`` in a cell escaped); the signature, when there is
    one, follows on its own line as code. No trailing newline."""
    lines = ["| " + " | ".join(_markdown_cell(h) for h in table.headers) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_markdown_cell(c) for c in r) + " |" for r in table.text_rows()]
    if table.signature is not None:
        lines += ["", f"signature: `{table.signature}`"]
    return "\n".join(lines)


def _latex_cell(cell: CellValue) -> str:
    return cell.latex if isinstance(cell, Cell) else latex_escape(cell)


def to_latex(table: Table, *, float_env: bool = False) -> str:
    """A booktabs ``tabular``; ``float_env`` wraps it in a ``table`` float captioned with the
    title. The signature and the table's comments are LaTeX comments above it (a reader of the
    PDF does not see them; the source keeps them with the numbers)."""
    lines = [f"% {latex_escape(c)}" for c in table.comments]
    if table.signature is not None:
        lines.append(f"% {table.signature}")
    if float_env:
        lines += [r"\begin{table}[t]", r"\centering\small", r"\caption{" + latex_escape(table.title) + "}"]
    lines += [
        r"\begin{tabular}{" + "".join(_LATEX_ALIGN[c.align] for c in table.columns) + "}",
        r"\toprule",
        " & ".join(c.latex if c.latex is not None else latex_escape(c.header) for c in table.columns) + r" \\",
        r"\midrule",
    ]
    last = len(table.rows) - 1
    for i, row in enumerate(table.rows):
        lines.append(" & ".join(_latex_cell(c) for c in row) + r" \\")
        if i in table.rules_after and i != last:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if float_env:
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_json(table: Table) -> str:
    """The table as JSON: title, headers, one object per row keyed by header, the signature."""
    doc = {
        "title": table.title,
        "columns": table.headers,
        "rows": [dict(zip(table.headers, r, strict=True)) for r in table.text_rows()],
        "signature": table.signature,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
