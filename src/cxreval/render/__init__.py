"""Presentation: one number formatter, one table model, one writer per format.

:mod:`~cxreval.render.text` formats a score and escapes LaTeX; :mod:`~cxreval.render.table`
holds the :class:`Table` every command and file builds; :mod:`~cxreval.render.writers` writes
it to the terminal (fitted to its width), CSV, Markdown, LaTeX or JSON.
"""

from __future__ import annotations

from cxreval.render.table import Align, Cell, CellValue, Column, Table, cell_text
from cxreval.render.text import LATEX_ESCAPES, latex_escape, number
from cxreval.render.writers import (
    MIN_NAME_WIDTH,
    print_signature,
    print_table,
    to_csv,
    to_json,
    to_latex,
    to_markdown,
    to_terminal,
)

__all__ = [
    "LATEX_ESCAPES",
    "MIN_NAME_WIDTH",
    "Align",
    "Cell",
    "CellValue",
    "Column",
    "Table",
    "cell_text",
    "latex_escape",
    "number",
    "print_signature",
    "print_table",
    "to_csv",
    "to_json",
    "to_latex",
    "to_markdown",
    "to_terminal",
]
