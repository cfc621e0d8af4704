"""The table model and its writers: every table cxreval shows or writes goes through them."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from cxreval.io.writers import csv_value
from cxreval.render import Cell, Column, Table, print_table, to_csv, to_json, to_latex, to_markdown, to_terminal

SRC = Path(__file__).resolve().parents[1] / "src" / "cxreval"


def _table(**kw: object) -> Table:
    columns = [Column("system", "left"), Column("macro F1", keep=3), Column("err/rep", keep=2), Column("loc", keep=1)]
    rows = [["model-with-a-rather-long-name-v2", "0.512", "1.250", "0.903"], ["=cmd|calc", "0.498", "1.400", "n/a"]]
    return Table(columns, rows, title="Leaderboard", **kw)  # type: ignore[arg-type]


def _shown(table: Table, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    print_table(table, console)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_row_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 columns"):
        Table([Column("a"), Column("b")], [["x"]], title="t")


def test_a_narrow_terminal_drops_columns_by_priority_and_never_cuts_a_number() -> None:
    wide = _shown(_table(), 120)
    assert "0.903" in wide and "not shown" not in wide
    narrow = _shown(_table(), 40)
    assert "not shown at this width: loc" in narrow or "not shown at this width: err/rep, loc" in narrow
    assert "0.512" in narrow and "0.…" not in narrow and "0.9…" not in narrow
    # the lowest `keep` goes first
    assert "loc" not in narrow.split("not shown")[0]


def test_text_is_never_markup_and_the_signature_follows_on_its_own_line() -> None:
    out = _shown(_table(signature="metric:x|v:1"), 120)
    assert "=cmd|calc" in out
    title = Table([Column("a", "left")], [["[bold]x[/bold]"]], title="[red]t[/red]")
    shown = _shown(title, 80)
    assert "[bold]x[/bold]" in shown and "[red]t[/red]" in shown
    assert out.rstrip().splitlines()[-2:] == ["signature:", "metric:x|v:1"]


def test_csv_goes_through_the_formula_safe_writer_and_carries_the_signature() -> None:
    text = to_csv(_table(signature="sig"))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["system", "macro F1", "err/rep", "loc", "signature"]
    assert rows[2][0] == "'=cmd|calc" and csv_value(rows[2][0]) == "=cmd|calc"
    assert {r[-1] for r in rows[1:]} == {"sig"}


def test_markdown_escapes_pipes_and_writes_the_signature_below() -> None:
    md = to_markdown(_table(signature="sig"))
    lines = md.splitlines()
    assert lines[0] == "| system | macro F1 | err/rep | loc |" and lines[1] == "|---|---|---|---|"
    assert lines[3] == r"| =cmd\|calc | 0.498 | 1.400 | n/a |"
    assert lines[-1] == "signature: `sig`"


def test_latex_escapes_text_keeps_latex_cells_and_rules_between_sections() -> None:
    table = Table(
        [Column("Label", "left"), Column("n", latex=r"$n$"), Column("Rank", "center")],
        [["50% & more_", "3", Cell("1-2", "1--2")], ["Micro", "6", "x"]],
        title="A_b",
        rules_after=frozenset({0}),
        signature="s|1",
        comments=["db: a_b.sqlite"],
    )
    tex = to_latex(table)
    assert tex.startswith("% db: a\\_b.sqlite\n% s|1\n\\begin{tabular}{lrc}\n\\toprule\nLabel & $n$ & Rank \\\\\n\\midrule\n")
    assert r"50\% \& more\_ & 3 & 1--2 \\" + "\n\\midrule\nMicro" in tex
    assert tex.endswith("\\bottomrule\n\\end{tabular}\n")
    floated = to_latex(table, float_env=True)
    assert "\\begin{table}[t]" in floated and "\\caption{A\\_b}" in floated and floated.endswith("\\end{table}\n")


def test_json_holds_one_object_per_row_and_the_signature() -> None:
    doc = json.loads(to_json(_table(signature="sig")))
    assert doc["columns"] == ["system", "macro F1", "err/rep", "loc"]
    assert doc["rows"][1] == {"system": "=cmd|calc", "macro F1": "0.498", "err/rep": "1.400", "loc": "n/a"}
    assert doc["signature"] == "sig" and doc["title"] == "Leaderboard"


def test_the_terminal_table_has_one_rule_per_section() -> None:
    table = Table([Column("a", "left"), Column("b")], [["x", "1"], ["y", "2"], ["micro", "3"]], rules_after=frozenset({1}))
    rich_table = to_terminal(table, Console(width=80))
    assert [row.end_section for row in rich_table.rows] == [False, True, False]


#: Tables of prose that wrap rather than fit (a rule's doc, a report's readings side by side):
#: rich tables of their own, not tables of numbers.
PROSE_TABLES = {"cli/rules.py", "extract/snapshot.py"}


def test_every_table_of_numbers_goes_through_the_table_model() -> None:
    """No module builds a rich table, a booktabs tabular or a Markdown table by hand."""
    hand_made = re.compile(r"from rich\.table import|\\\\toprule|\\\\begin\{tabular|\"\|\" \+ \"---\|\"|\"\|---\|\"")
    offending = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module.startswith("render/") or module in PROSE_TABLES:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if hand_made.search(line):
                offending.append(f"src/cxreval/{module}:{n}: {line.strip()}")
    assert not offending, "build a cxreval.render.Table and use its writers:\n" + "\n".join(offending)
