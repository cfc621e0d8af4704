"""``cxreval.evaluate_files``: what ``cxreval evaluate`` does, from Python, with the same files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cxreval.cli import app
from cxreval.evaluate import Evaluator
from cxreval.evaluate_files import FilesInput, evaluate_files, example_path, formats_of
from cxreval.io import InputError
from cxreval.testing.results import RESULT_FILES, differing


def test_the_example_gives_the_files_the_command_writes(tmp_path: Path) -> None:
    outcome = evaluate_files(FilesInput(example=True), tmp_path / "api", Evaluator())
    done = CliRunner().invoke(app, ["evaluate", "--example", "--out", str(tmp_path / "cli"), "--json"])
    assert done.exit_code == 0, done.output
    assert differing(tmp_path / "api", tmp_path / "cli") == []
    [(system, [scores])] = outcome.systems
    assert system is None and scores.n_pairs == outcome.counts[None] > 0
    saved = json.loads((tmp_path / "api" / "scores.json").read_text())
    assert saved["n_pairs"] == scores.n_pairs


def test_long_format_writes_one_folder_per_system_and_the_whole_list_path_agrees(tmp_path: Path) -> None:
    with example_path().open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    long = tmp_path / "long.csv"
    with long.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, [*rows[0], "system"])
        writer.writeheader()
        for name in ("a", "b"):
            writer.writerows({**r, "system": name} for r in rows)
    streamed = evaluate_files(FilesInput(pairs=long, system_col="system"), tmp_path / "s", Evaluator())
    assert [s for s, _ in streamed.systems] == ["a", "b"]
    assert streamed.counts == {"a": len(rows), "b": len(rows)}
    assert (tmp_path / "s" / "systems.csv").is_file()
    assert differing(tmp_path / "s" / "systems" / "a", tmp_path / "s" / "systems" / "b") == []
    # two runs take the whole-list path: each run's files match the streamed ones
    runs = evaluate_files(FilesInput(pairs=long, system_col="system"), tmp_path / "r", Evaluator(), runs=2)
    assert [len(results) for _, results in runs.systems] == [2, 2]
    assert differing(tmp_path / "s" / "systems" / "a", tmp_path / "r" / "systems" / "a" / "run-1", RESULT_FILES[1:]) == []


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "give exactly one input"),
        ({"pairs": Path("x.csv"), "example": True}, "give exactly one input"),
        ({"refs": Path("r.csv")}, "--refs and --cands go together"),
        ({"pairs": Path("x.csv"), "section": "findings"}, "apply to two-file input"),
        ({"refs": Path("-"), "cands": Path("-")}, "only one of --refs and --cands"),
        ({"example": True, "meta_cols": ["errors"]}, "errors.csv already has a column"),
    ],
)
def test_inputs_that_do_not_go_together_are_refused(given: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FilesInput(**given)  # type: ignore[arg-type]


def test_an_empty_input_and_a_local_executor_with_a_ray_address_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="has no records"):
        evaluate_files(FilesInput(pairs=empty, format="jsonl"), tmp_path / "out", Evaluator(), runs=2)
    with pytest.raises(ValueError, match="--ray-address applies to --executor ray"):
        evaluate_files(FilesInput(example=True), tmp_path / "out", Evaluator(), ray_address="auto")
    assert not (tmp_path / "out").exists()


def test_a_given_format_applies_to_the_files_whose_suffix_does_not_tell() -> None:
    assert formats_of(None, Path("a.csv"), Path("-")) == [None, None]
    assert formats_of("jsonl", Path("a.csv"), Path("-")) == [None, "jsonl"]
    assert formats_of("tsv", Path("a.csv"), Path("b.jsonl")) == ["tsv", "tsv"]


def test_the_fingerprint_moved_beside_the_signature_and_the_old_path_warns() -> None:
    import cxreval.io
    from cxreval.io import ReportPair
    from cxreval.scores import fingerprint

    pairs = [ReportPair(pair_id="a", reference="R.", candidate="C.")]
    with pytest.warns(DeprecationWarning, match="cxreval.scores.fingerprint"):
        old = cxreval.io.references_fingerprint
    assert old(pairs) == fingerprint.references_fingerprint(pairs)
    assert fingerprint.references_fingerprint(pairs) != fingerprint.candidates_fingerprint(pairs)
