"""One table model for every table cxreval shows or writes.

A :class:`Table` is what a reader sees: columns (header, alignment, which to drop first on a
narrow terminal), rows of already formatted cells, a title, the rows after which a rule goes,
and the signature of the numbers in it. The writers in :mod:`cxreval.render.writers` turn it
into a terminal table, CSV, Markdown, LaTeX or JSON, so that a table reads the same wherever it
appears and each format's rules (formula-safe CSV, escaped LaTeX, whole numbers at 80 columns)
are written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Align = Literal["left", "right", "center"]


@dataclass(frozen=True)
class Column:
    """A column: its header, alignment and priority on a narrow terminal.

    ``keep``: when the terminal is too narrow, the column with the lowest ``keep`` is dropped
    first (the first column, the row's name, is never dropped; it is shortened instead).
    ``latex``: the header as LaTeX source (math such as ``$\\kappa$``); by default the escaped header.
    """

    header: str
    align: Align = "right"
    keep: int = 0
    latex: str | None = None


@dataclass(frozen=True)
class Cell:
    """A cell whose LaTeX form is not its escaped text (an en dash, a smaller interval)."""

    text: str
    latex: str


CellValue = str | Cell


def cell_text(cell: CellValue) -> str:
    """The cell as plain text (terminal, CSV, Markdown, JSON)."""
    return cell.text if isinstance(cell, Cell) else cell


@dataclass(frozen=True)
class Table:
    """Columns and formatted rows, with what a reader needs to trust them.

    ``rules_after``: 0-based body rows followed by a rule (a section ends: labels, then micro and
    macro). ``signature``: the signature of the numbers, written by every writer (the terminal
    prints it below the table). ``note``: where the columns a narrow terminal drops can be read.
    ``comments``: lines a file format keeps as comments (LaTeX ``%``), such as the input's name.
    """

    columns: Sequence[Column]
    rows: Sequence[Sequence[CellValue]]
    title: str = ""
    rules_after: frozenset[int] = field(default_factory=frozenset)
    signature: str | None = None
    note: str = "all in scores.json"
    comments: Sequence[str] = ()

    def __post_init__(self) -> None:
        width = len(self.columns)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table {self.title!r}: row {i + 1} has {len(row)} cells for {width} columns")

    @property
    def headers(self) -> list[str]:
        return [c.header for c in self.columns]

    def text_rows(self) -> list[list[str]]:
        """Every row as plain text."""
        return [[cell_text(c) for c in row] for row in self.rows]
