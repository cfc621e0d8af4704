"""``--on-missing skip``: score the ids two files share, with what was left out counted; the
default stays an error listing every unmatched id."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxreval.cli import app
from cxreval.io import InputError, MissingIdsSkipped, read_pair_files


def _files(tmp_path: Path) -> tuple[Path, Path]:
    refs = tmp_path / "refs.csv"
    cands = tmp_path / "cands.csv"
    refs.write_text("id,reference\na,Small left pleural effusion.\nb,Mild cardiomegaly.\nc,No acute disease.\n", encoding="utf-8")
    cands.write_text("id,candidate\na,Left pleural effusion.\nc,Normal chest.\nz,Right pneumothorax.\n", encoding="utf-8")
    return refs, cands


def test_the_default_lists_every_unmatched_id(tmp_path: Path) -> None:
    refs, cands = _files(tmp_path)
    with pytest.raises(InputError) as caught:
        read_pair_files(refs, cands)
    text = str(caught.value)
    assert "id 'z'" in text and "has no reference" in text and "id 'b'" in text and "has no candidate" in text


def test_skip_scores_the_shared_ids_and_counts_the_rest(tmp_path: Path) -> None:
    refs, cands = _files(tmp_path)
    with pytest.warns(MissingIdsSkipped, match=r"1 candidate row\(s\) in .*cands.csv without a reference and 1 reference"):
        pairs = read_pair_files(refs, cands, on_missing="skip")
    assert [p.pair_id for p in pairs] == ["a", "c"]
    (tmp_path / "none.csv").write_text("id,candidate\nq,Text.\n", encoding="utf-8")
    with pytest.raises(InputError, match="nothing to score"), pytest.warns(MissingIdsSkipped):
        read_pair_files(refs, tmp_path / "none.csv", on_missing="skip")


def test_the_command_says_what_it_left_out(tmp_path: Path) -> None:
    refs, cands = _files(tmp_path)
    args = ["evaluate", "--refs", str(refs), "--cands", str(cands), "--no-progress"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--on-missing", "skip"])
    assert res.exit_code == 0, res.output
    assert "WARNING: --on-missing skip: 1 candidate row(s)" in res.output and "2 pair(s) scored" in res.output
    assert "scored 2 pairs" in res.output
    refused = CliRunner().invoke(app, ["evaluate", "--example", "--out", str(tmp_path / "x"), "--on-missing", "skip"])
    assert refused.exit_code == 2 and "--on-missing apply to two-file input" in refused.output
