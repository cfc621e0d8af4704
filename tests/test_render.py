"""One number formatter and one LaTeX escaper for every output."""

from __future__ import annotations

from cxreval.render import latex_escape, number


def test_number_formats_undefined_as_na_never_zero() -> None:
    assert number(None) == "n/a" and number(float("nan")) == "n/a"
    assert number(0.12345) == "0.123" and number(0.5, 2) == "0.50" and number(123.456) == "123.5"


def test_latex_escape_escapes_once() -> None:
    assert latex_escape(r"a_b & 50% \ {x} ~^$#") == (
        r"a\_b \& 50\% \textbackslash{} \{x\} \textasciitilde{}\textasciicircum{}\$\#"
    )
