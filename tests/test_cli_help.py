"""Every command's help reads well at 80 columns: help text on every option, no Python metavars."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
import typer
from typer.testing import CliRunner

from cxreval.cli import app

COMMAND = typer.main.get_command(app)


def _commands(cmd: click.Command = COMMAND, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


ALL = list(_commands())
IDS = [" ".join(p) or "cxreval" for p, _ in ALL]


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=IDS)
def test_every_option_has_help(path: tuple[str, ...], cmd: click.Command) -> None:
    missing = [p.opts[0] for p in cmd.params if p.param_type_name == "option" and not (p.help or "").strip()]
    assert missing == [], f"options without help text in {' '.join(path) or 'cxreval'}"


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=IDS)
def test_help_at_80_columns(path: tuple[str, ...], cmd: click.Command) -> None:
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("Usage:")
    for bad in ("<bool>", "<list[", " range>", "<int range", "<float range"):
        assert bad not in text, f"{bad!r} in help of {' '.join(path)}:\n{text}"
    # choices are never broken across lines: every "<a|b|c>" metavar closes on its own line
    for line in text.splitlines():
        if "<" in line and "|" in line.split("<", 1)[1]:
            assert ">" in line.split("<", 1)[1], f"choice list broken in help of {' '.join(path)}: {line!r}"
        assert len(line) <= 80, f"line over 80 columns in help of {' '.join(path)}: {line!r}"


def test_dash_h_is_help() -> None:
    result = CliRunner().invoke(app, ["evaluate", "-h"])
    assert result.exit_code == 0 and "--candidate-col" in result.output
