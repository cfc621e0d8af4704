"""Text every output shares: one number formatter, one LaTeX escaper.

Terminal tables, CSV/Markdown/LaTeX tables and the HTML page all format a score with
:func:`number` and escape text for LaTeX with :func:`latex_escape`, so the same value reads the
same everywhere ("n/a" for an undefined one, never 0).
"""

from __future__ import annotations

import math

#: LaTeX's special characters and what they become in running text.
LATEX_ESCAPES: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def number(value: float | None, digits: int = 3) -> str:
    """A score as text: ``digits`` decimals (one from 100 on), ``n/a`` when undefined (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (one pass, so escapes are not re-escaped)."""
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in text)
