"""cxreval bench on a terminal and under Ctrl-C: progress bars, resumable interrupts, whole files.

The command runs as a real process (``python -m cxreval``): through a pseudo-terminal for the
progress bars, in its own process group for SIGINT (as a terminal's Ctrl-C reaches every
process of the foreground group, worker processes included).
"""

from __future__ import annotations

import csv
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tests.test_bench import bench_dir  # noqa: F401  (a fixture)
from tests.test_bench_inputs import _app
from tests.test_cli_transcript import ANSI, run_in_terminal

BAR = re.compile(r"judging\s+━+\s+(\d+)/(\d+)")  # the rich bar: stage, bar, done/total


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "cxreval", "bench", *args]


def test_progress_bar_on_a_terminal_only(bench_dir: Path) -> None:  # noqa: F811
    cfg = str(bench_dir / "bench.yaml")
    screen = run_in_terminal(_cmd(cfg, "--out", str(bench_dir / "tty"), "--no-html", "--resamples", "0"), bench_dir, columns=160)
    new = re.search(r"judging (\d+) new pairs", screen)
    assert new and int(new.group(1)) > 8  # the distinct pairs of 4 systems x 8 studies
    bars = BAR.findall(screen)
    assert bars and bars[-1][0] == bars[-1][1] == new.group(1)  # the bar ran to the end
    assert re.search(r"metric bleu2\s+━+\s+\d+/\d+", screen)

    # the same on pipes: no bar (and none with --no-progress on a terminal)
    piped = subprocess.run(
        _cmd(cfg, "--out", str(bench_dir / "pipe"), "--no-html", "--resamples", "0"),
        capture_output=True,
        text=True,
        cwd=bench_dir,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert f"judging {new.group(1)} new pairs" in piped.stderr
    assert not BAR.search(piped.stderr) and "━" not in piped.stderr
    screen = run_in_terminal(_cmd(cfg, "--out", str(bench_dir / "off"), "--no-html", "--no-progress"), bench_dir, columns=160)
    assert f"judging {new.group(1)} new pairs" in screen and not BAR.search(screen)


def _synthetic(folder: Path, n: int) -> Path:
    """``n`` short distinct reference / candidate reports and a config judging them in 2 workers."""
    rng = random.Random(0)
    findings = ["pleural effusion", "pneumothorax", "atelectasis", "consolidation", "cardiomegaly", "nodule"]

    def report(i: int) -> str:
        parts = [
            f"{rng.choice(['small', 'moderate', 'large'])} {rng.choice(['left', 'right', 'bilateral'])} {rng.choice(findings)}."
            for _ in range(rng.randint(1, 3))
        ]
        return " ".join(parts).capitalize() + f" No pneumothorax. Study {i}."

    for name in ("refs", "sys"):
        with (folder / f"{name}.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "report"])
            w.writerows([f"s{i}", report(i)] for i in range(n))
    cfg = {
        "name": "big",
        "out": "out",
        "metrics": ["spec-errors"],
        "bootstrap": {"resamples": 0},
        "engine": {"workers": 2},
        "datasets": [{"name": "syn", "references": {"path": "refs.csv"}}],
        "systems": [{"name": "sys", "path": "sys.csv"}],
    }
    (folder / "big.yaml").write_text(yaml.safe_dump(cfg))
    return folder / "big.yaml"


def _cached(db: Path) -> int:
    try:
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT COUNT(*) FROM judgements").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def test_ctrl_c_keeps_judged_pairs_and_a_rerun_resumes(tmp_path: Path) -> None:
    n = 8_000
    cfg = _synthetic(tmp_path, n)
    db = tmp_path / "out" / "cache.sqlite"
    proc = subprocess.Popen(
        _cmd(str(cfg), "--no-html"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while _cached(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the parent and its workers
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Traceback" not in out
    kept = _cached(db)
    assert 0 < kept < n
    said = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert said == [
        f"interrupted: {kept} judged pairs are cached in {Path('out', 'cache.sqlite')}; rerun the same command to resume"
    ]
    assert not (tmp_path / "out" / "result.json").exists()

    again = subprocess.run(_cmd(str(cfg), "--no-html"), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"judging {n - kept:,} new pairs ({kept:,} cached)" in again.stderr
    assert f"{n:,} pairs: {n - kept:,} judged now, {kept:,} from the cache" in again.stdout


def test_outputs_are_replaced_whole(bench_dir: Path) -> None:  # noqa: F811
    """Every file is written beside its target and renamed over it (a new inode each run), so an
    interrupted write leaves the previous file, never a truncated one."""
    out = bench_dir / "atomic"
    args = ["bench", str(bench_dir / "bench.yaml"), "--out", str(out), "--resamples", "0"]
    first = CliRunner().invoke(_app(), args)
    assert first.exit_code == 0, first.output
    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith("cache.sqlite"))
    names = {p.relative_to(out).as_posix() for p in files}
    assert {"result.json", "leaderboards.csv", "leaderboards.md", "report.html", "latex/leaderboard_tiny-set_all.tex"} <= names
    before = {p: p.stat().st_ino for p in files}
    second = CliRunner().invoke(_app(), args)
    assert second.exit_code == 0, second.output
    assert [p for p in files if p.stat().st_ino == before[p]] == []
    assert not [p for p in out.rglob("*.tmp")]


def test_progress_flag_forces_the_bar_onto_a_pipe(bench_dir: Path) -> None:  # noqa: F811
    res = subprocess.run(
        _cmd(str(bench_dir / "bench.yaml"), "--out", str(bench_dir / "forced"), "--no-html", "--progress", "--resamples", "0"),
        capture_output=True,
        text=True,
        cwd=bench_dir,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert BAR.search(ANSI.sub("", res.stderr))


def test_interrupt_line_names_the_llm_answer_store(tmp_path, capsys):
    from cxreval.cli.bench import _interrupted

    _interrupted(KeyboardInterrupt(), tmp_path / "none.sqlite", tmp_path / "answers.sqlite")
    err = capsys.readouterr().err
    assert "answers.sqlite" in err and "rerun the same command to resume" in err and len(err.strip().splitlines()) == 1
