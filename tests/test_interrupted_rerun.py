"""Issue 27, item 9: an interrupted rerun never mixes two runs in a folder.

A rerun into a folder that holds earlier results writes its files beside them under partial
names (``errors.csv.partial``); each replaces its twin only when the run is complete. Ctrl-C or
SIGTERM (exit 130 / 143, one line saying so) leaves the earlier run whole, readable by
``load_result``, and this run's files named partial; the next complete run puts its own in place
and removes them. Only files cxreval wrote are touched: ``--out .`` may hold the user's own.

Real subprocesses and real signals; every wait is bounded and ends by itself.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cxreval.cli import example_path
from cxreval.evaluate import load_result

MANIFEST = ".cxreval-outputs.json"


def example_rows() -> list[dict[str, str]]:
    with example_path().open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def pairs_file(path: Path, copies: int, tag: str) -> tuple[Path, list[str]]:
    """The example's pairs ``copies`` times (ids tagged), as a CSV; returns it and its ids."""
    ids = []
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate"])
        for i in range(copies):
            for r in example_rows():
                ids.append(f"{r['id']}-{tag}{i}")
                w.writerow([ids[-1], f"{r['reference']} Study {i}.", f"{r['candidate']} Exam {i}."])
    return path, ids


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "120"},
    )


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    root = tmp_path_factory.mktemp("inputs")
    return {
        "earlier": pairs_file(root / "earlier.csv", 1, "a"),
        "later": pairs_file(root / "later.csv", 1, "c"),
        "big": pairs_file(root / "big.csv", 3_000, "b"),
    }


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_a_rerun_leaves_the_earlier_run_whole(tmp_path: Path, inputs: dict, signame: str, code: int) -> None:
    out = tmp_path / "work"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")  # the user's own file beside the results
    earlier, earlier_ids = inputs["earlier"]
    done = run_cli("evaluate", "--pairs", earlier, "--out", ".", "--json", cwd=out)
    assert done.returncode == 0, done.stderr
    before = files(out)
    assert {"errors.csv", "judgements.jsonl.gz", "scores.json", "notes.txt"} <= set(before)

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--pairs",
            str(inputs["big"][0]),
            "--out",
            ".",
            "--no-progress",
            "--workers",
            "1",
        ],
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(2400):  # until the rerun has written part of its results (bounded; no timing assert)
            if proc.poll() is not None or any(
                p.stat().st_size for p in out.iterdir() if p.name.endswith(".partial") and p.is_file()
            ):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the rerun ended before it could be interrupted; make the input bigger"
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    after = files(out)
    changed = [name for name, data in before.items() if name != MANIFEST and after.get(name) != data]
    assert not changed, f"the earlier run's files were touched: {changed}"
    new = sorted(set(after) - set(before))
    assert new and all(name.endswith(".partial") for name in new), new
    assert load_result(out).pair_ids == earlier_ids  # the earlier run, whole and readable
    lines = [line for line in err.splitlines() if line.strip()]  # one line says what happened
    assert len(lines) == 1 and lines[0].startswith("interrupted:") and "rerun" in lines[0], err
    assert ".partial" in lines[0], err

    later, later_ids = inputs["later"]
    done = run_cli("evaluate", "--pairs", later, "--out", ".", "--json", cwd=out)
    assert done.returncode == 0, done.stderr
    assert not [p.name for p in out.rglob("*") if p.name.endswith(".partial")], "partial files were left"
    assert load_result(out).pair_ids == later_ids
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_out_dot_never_removes_the_users_own_folder_named_like_cxrevals(tmp_path: Path) -> None:
    """A folder written before manifests is cleaned of the names cxreval's outputs have; a user's
    own ``systems/`` (no cxreval results in it) in ``--out .`` is not one of them."""
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "mine.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "run-1").mkdir()
    (tmp_path / "run-1" / "notes.md").write_text("mine too", encoding="utf-8")
    done = run_cli("evaluate", "--example", "--out", ".", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "systems" / "mine.txt").read_text(encoding="utf-8") == "mine"
    assert (tmp_path / "run-1" / "notes.md").read_text(encoding="utf-8") == "mine too"
    assert (tmp_path / "scores.json").is_file()


def test_the_next_run_removes_what_an_interrupted_one_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted long-format rerun over a plain run leaves ``systems/`` holding partial files
    only; the next complete plain run removes that folder (cxreval made it) and nothing else."""
    from typer.testing import CliRunner

    from cxreval import streaming
    from cxreval.cli import app

    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["evaluate", "--example", "--out", str(out), "--json"]).exit_code == 0
    before = files(out)
    long = tmp_path / "long.csv"
    with long.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "model"])
        w.writerows([(r["id"], r["reference"], r["candidate"], s) for s in ("sys-a", "sys-b") for r in example_rows()])
    real_add = streaming.ResultWriter.add

    def add(self: streaming.ResultWriter, chunk: streaming.JudgedChunk) -> None:
        if self.folder.name == "sys-b":
            raise KeyboardInterrupt  # Ctrl-C once sys-a is judged and written (partial)
        real_add(self, chunk)

    with monkeypatch.context() as patch:
        patch.setattr(streaming.ResultWriter, "add", add)
        res = CliRunner().invoke(app, ["evaluate", "--pairs", str(long), "--system-col", "model", "--out", str(out)])
    assert res.exit_code == 130, res.output
    assert {n: d for n, d in files(out).items() if n in before and n != MANIFEST} == {
        n: d for n, d in before.items() if n != MANIFEST
    }
    assert (out / "systems" / "sys-a" / "scores.json.partial").is_file()
    assert CliRunner().invoke(app, ["evaluate", "--example", "--out", str(out), "--json"]).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MANIFEST,
        "errors.csv",
        "judgements.jsonl.gz",
        "judgements.parquet",
        "scores.json",
    ]
