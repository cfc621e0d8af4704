"""Defects a review found after issue 10, each with the case that showed it (all failed before)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cxreval.cli import example_path
from cxreval.testing.loopback import LoopbackServer


def run_cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def rows() -> list[dict[str, str]]:
    with example_path().open(newline="") as fh:
        return list(csv.DictReader(fh))


def write(path: Path, data: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(data[0]))
        w.writeheader()
        w.writerows(data)
    return path


def long_file(tmp_path: Path, systems: dict[str, callable]) -> Path:
    out = []
    for name, cand in systems.items():
        out += [{"id": r["id"], "system": name, "reference": r["reference"], "candidate": cand(r)} for r in rows()]
    return write(tmp_path / "long.csv", out)


def test_a_copied_system_is_named_even_when_others_are_not(tmp_path: Path) -> None:
    data = long_file(tmp_path, {"a": lambda r: r["candidate"], "b": lambda r: r["candidate"], "copier": lambda r: r["reference"]})
    proc = run_cli("evaluate", "--pairs", str(data), "--system-col", "system", "--out", str(tmp_path / "o"), "--json")
    assert proc.returncode == 0
    assert "system 'copier'" in proc.stderr and "identical to their reference" in proc.stderr


def test_outputs_of_an_earlier_run_in_the_same_folder_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "o"
    data = long_file(tmp_path, {"a": lambda r: r["candidate"], "b": lambda r: r["candidate"]})
    assert run_cli("evaluate", "--example", "--out", str(out), "--json").returncode == 0
    assert run_cli("evaluate", "--pairs", str(data), "--system-col", "system", "--out", str(out), "--json").returncode == 0
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    assert names == {"systems", "systems.csv"}  # the earlier plain run's scores.json etc. are gone
    assert {p.name for p in (out / "systems").iterdir() if not p.name.startswith(".")} == {"a", "b"}
    assert run_cli("evaluate", "--example", "--out", str(out), "--json").returncode == 0
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {
        "judgements.jsonl.gz",
        "judgements.parquet",
        "errors.csv",
        "scores.json",
    }
    (out / "notes.txt").write_text("mine")  # never written by cxreval: never removed
    assert run_cli("evaluate", "--example", "--out", str(out), "--json").returncode == 0
    assert (out / "notes.txt").read_text() == "mine"


def test_system_names_cannot_clash_with_files_or_by_case(tmp_path: Path) -> None:
    data = long_file(tmp_path, {"systems.csv": lambda r: r["candidate"], "scores.json": lambda r: r["candidate"]})
    proc = run_cli("evaluate", "--pairs", str(data), "--system-col", "system", "--out", str(tmp_path / "o"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "systems" / "systems.csv" / "scores.json").is_file()
    clash = long_file(tmp_path, {"MoERad": lambda r: r["candidate"], "moerad": lambda r: r["candidate"]})
    proc = run_cli("evaluate", "--pairs", str(clash), "--system-col", "system", "--out", str(tmp_path / "p"))
    assert proc.returncode == 2 and "would share the output folder" in proc.stderr


def test_compare_refuses_results_scored_against_other_references(tmp_path: Path) -> None:
    changed = [{**r, "reference": r["reference"] + " Mild cardiomegaly."} if i == 0 else r for i, r in enumerate(rows())]
    assert run_cli("evaluate", "--example", "--out", str(tmp_path / "A"), "--json").returncode == 0
    assert (
        run_cli("evaluate", "--pairs", str(write(tmp_path / "b.csv", changed)), "--out", str(tmp_path / "B"), "--json").returncode
        == 0
    )
    proc = run_cli("compare", str(tmp_path / "A"), str(tmp_path / "B"))
    assert proc.returncode == 2 and "different references" in proc.stderr


def test_named_id_columns_do_not_apply_to_rexrank_files(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({r["id"]: {"report": r["reference"]} for r in rows()}))
    cands = write(tmp_path / "c.csv", [{"uid": r["id"], "candidate": r["candidate"]} for r in rows()])
    ok = run_cli(
        "evaluate", "--refs", str(refs), "--cands", str(cands), "--cand-id-col", "uid", "--out", str(tmp_path / "o"), "--json"
    )
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(
        "evaluate",
        "--refs",
        str(refs),
        "--cands",
        str(cands),
        "--ref-id-col",
        "study",
        "--cand-id-col",
        "uid",
        "--out",
        str(tmp_path / "o"),
    )
    assert bad.returncode == 2 and "keyed by study id" in bad.stderr and "'study'" in bad.stderr


def test_format_applies_to_the_file_whose_suffix_does_not_tell(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({r["id"]: {"report": r["reference"]} for r in rows()}))
    stdin = "id,candidate\n" + "".join(f'{r["id"]},"{r["candidate"]}"\n' for r in rows())
    proc = run_cli(
        "evaluate", "--refs", str(refs), "--cands", "-", "--format", "csv", "--out", str(tmp_path / "o"), "--json", stdin=stdin
    )
    assert proc.returncode == 0, proc.stderr


def test_meta_columns_cannot_shadow_errors_csv_columns(tmp_path: Path) -> None:
    data = write(tmp_path / "p.csv", [{**r, "errors": "x"} for r in rows()])
    proc = run_cli("evaluate", "--pairs", str(data), "--meta-col", "errors", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "errors.csv already has a column" in proc.stderr


def test_viewing_an_empty_file_as_a_cache_leaves_it_empty(tmp_path: Path) -> None:
    empty = tmp_path / "c.sqlite"
    empty.write_bytes(b"")
    proc = run_cli("cache", "--path", str(empty))
    assert proc.returncode == 0 and "no cache yet" in proc.stdout and empty.stat().st_size == 0


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


def _llm(srv: LoopbackServer, cache: Path) -> list[str]:
    return [
        "--engine",
        "llm-pairwise",
        "--base-url",
        srv.base_url,
        "--model",
        "loopback",
        "--local-only",
        "--cache",
        str(cache),
        "--retries",
        "0",
    ]


def test_allow_failures_is_exact_at_the_boundary_and_per_system(server, tmp_path: Path) -> None:
    base = rows()
    data = write(
        tmp_path / "p.csv",
        [{**r, "candidate": r["candidate"] + (" FAULT:schema-always" if i < 5 else "")} for i, r in enumerate(base)],
    )  # 5 of 20 fail
    env = {"OPENAI_API_KEY": ""}
    at = run_cli(
        "evaluate",
        "--pairs",
        str(data),
        "--out",
        str(tmp_path / "a"),
        "--allow-failures",
        "0.25",
        *_llm(server, tmp_path / "c.sqlite"),
        env=env,
    )
    assert at.returncode == 0, at.stderr
    long = write(
        tmp_path / "long.csv",
        [
            *({"id": r["id"], "system": "good", "reference": r["reference"], "candidate": r["candidate"]} for r in base),
            *(
                {
                    "id": r["id"],
                    "system": "broken",
                    "reference": r["reference"],
                    "candidate": r["candidate"] + " FAULT:schema-always",
                }
                for r in base
            ),
        ],
    )
    proc = run_cli(
        "evaluate",
        "--pairs",
        str(long),
        "--system-col",
        "system",
        "--out",
        str(tmp_path / "s"),
        "--allow-failures",
        "0.5",
        *_llm(server, tmp_path / "c.sqlite"),
        env=env,
    )
    assert proc.returncode == 4 and "system 'broken': 20 of 20" in proc.stderr


def test_systems_table_with_runs_shows_means_and_says_so(server, tmp_path: Path) -> None:
    data = long_file(tmp_path, {"a": lambda r: r["candidate"], "b": lambda r: r["reference"][:40] + "."})
    proc = run_cli(
        "evaluate",
        "--pairs",
        str(data),
        "--system-col",
        "system",
        "--out",
        str(tmp_path / "o"),
        "--runs",
        "2",
        "--temperature",
        "0.5",
        *_llm(server, tmp_path / "c.sqlite"),
        env={"OPENAI_API_KEY": "", "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    with (tmp_path / "o" / "systems.csv").open() as fh:
        table = {r["system"]: r for r in csv.DictReader(fh)}
    runs = json.loads((tmp_path / "o" / "systems" / "a" / "runs.json").read_text())
    mean = next(m["mean"] for m in runs["metrics"] if m["name"] == "errors_per_report_mean")
    assert float(table["a"]["errors_per_report_mean"]) == pytest.approx(mean) and table["a"]["runs"] == "2"
    assert "runs:2" in proc.stdout
