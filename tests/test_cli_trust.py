"""The command line never gives a silent wrong result: named columns, exit codes, safe outputs.

Each test here failed on the code before issue 10 was fixed.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import cxreval
from cxreval import InputError, read_pair_files, read_pairs
from cxreval.cli import example_path
from cxreval.io import CopiedCandidatesWarning
from cxreval.testing.loopback import LoopbackServer
from tests.conftest import shared_data_dir


def run_cli(
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def example_rows() -> list[dict[str, str]]:
    with example_path().open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path: Path, rows: list[dict[str, str]], delimiter: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter=delimiter)
        w.writeheader()
        w.writerows(rows)
    return path


# ------------------------------------------------------------------------------------------
# 1. The column the user names is the column read
# ------------------------------------------------------------------------------------------

needs_data = pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")


@needs_data
def test_rexrank_candidates_read_the_named_field_not_the_reference(tmp_path: Path) -> None:
    data = shared_data_dir()
    assert data is not None
    refs = data / "rexrank-iu" / "ReXRank_IUXray_test.json"
    moerad = data / "iu-gen-moerad"
    named = read_pair_files(refs, moerad / "MoERad.json", section="findings", candidate_col="model_prediction")
    default = read_pair_files(refs, moerad / "MoERad.json", section="findings")
    csv_pairs = read_pair_files(refs, moerad / "preds.csv", section="findings", cand_id_col="study_id", candidate_col="report")
    assert named == default  # ReXrank prediction files hold the generated text in model_prediction
    assert sum(p.reference == p.candidate for p in named) <= 1  # one model output happens to match its reference
    by_id = {p.pair_id: p.candidate for p in csv_pairs}
    assert all(by_id[p.pair_id] == p.candidate for p in named)
    a, b = cxreval.evaluate(named), cxreval.evaluate(csv_pairs)
    assert a.error_summary.mean == b.error_summary.mean and a.error_summary.mean > 0.9
    # a field that is not there stops the run, naming the file and the field
    proc = run_cli(
        "evaluate",
        "--refs",
        str(refs),
        "--section",
        "findings",
        "--cands",
        str(moerad / "MoERad.json"),
        "--candidate-col",
        "prediction",
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.returncode == 2
    assert "MoERad.json" in proc.stderr and "'prediction'" in proc.stderr and "model_prediction" in proc.stderr
    assert not (tmp_path / "o").exists()


@needs_data
def test_copied_reference_text_earns_a_loud_warning(tmp_path: Path) -> None:
    data = shared_data_dir()
    assert data is not None
    refs = data / "rexrank-iu" / "ReXRank_IUXray_test.json"
    cands = data / "iu-gen-moerad" / "MoERad.json"
    with pytest.warns(CopiedCandidatesWarning, match="590 of 590"):
        read_pair_files(refs, cands, section="findings", candidate_col="section_findings")
    proc = run_cli(
        "evaluate",
        "--refs",
        str(refs),
        "--section",
        "findings",
        "--cands",
        str(cands),
        "--candidate-col",
        "section_findings",
        "--out",
        str(tmp_path / "o"),
        "--json",
    )
    assert proc.returncode == 0
    assert "WARNING" in proc.stderr and "identical to their reference" in proc.stderr


def test_keyed_layout_with_no_field_named_is_an_error_not_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "rex.json"
    path.write_text(json.dumps({"s1": {"report": "Clear.", "section_findings": "Clear."}}))
    with pytest.raises(InputError, match="name the field to read"):
        cxreval.read_reports(path)
    assert cxreval.read_reports(path, text_col="section_findings") == {"s1": "Clear."}
    with pytest.raises(InputError, match="not both"):
        cxreval.read_reports(path, text_col="report", section="findings")


def test_section_for_a_tabular_references_file_is_refused(tmp_path: Path) -> None:
    refs = write_csv(tmp_path / "r.csv", [{"id": "1", "reference": "Clear."}])
    cands = write_csv(tmp_path / "c.csv", [{"id": "1", "candidate": "Effusion."}])
    with pytest.raises(InputError, match="--section findings applies to a references file in ReXrank"):
        read_pair_files(refs, cands, section="findings")


# ------------------------------------------------------------------------------------------
# 2. Exit codes that tell the truth
# ------------------------------------------------------------------------------------------


def _llm_args(srv: LoopbackServer, cache: Path) -> list[str]:
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


def test_unscored_pairs_exit_4_unless_allowed(tmp_path: Path) -> None:
    rows = example_rows()[:4]
    rows[0] = {**rows[0], "candidate": rows[0]["candidate"] + " FAULT:schema-always"}
    pairs = write_csv(tmp_path / "p.csv", rows)
    every = write_csv(tmp_path / "all.csv", [{**r, "candidate": r["candidate"] + " FAULT:schema-always"} for r in rows])
    env = {"OPENAI_API_KEY": ""}
    with LoopbackServer() as srv:
        one = run_cli(
            "evaluate", "--pairs", str(pairs), "--out", str(tmp_path / "a"), *_llm_args(srv, tmp_path / "c.sqlite"), env=env
        )
        assert one.returncode == 4, one.stderr
        assert "1 of 4 pairs were not scored" in one.stderr
        assert len((tmp_path / "a" / "failures.jsonl").read_text().splitlines()) == 1
        allowed = run_cli(
            "evaluate",
            "--pairs",
            str(pairs),
            "--out",
            str(tmp_path / "a"),
            "--allow-failures",
            "0.25",
            *_llm_args(srv, tmp_path / "c.sqlite"),
            env=env,
        )
        assert allowed.returncode == 0, allowed.stderr
        none = run_cli(
            "evaluate",
            "--pairs",
            str(every),
            "--out",
            str(tmp_path / "b"),
            "--allow-failures",
            "1",
            *_llm_args(srv, tmp_path / "c.sqlite"),
            env=env,
        )
        assert none.returncode == 4 and "4 of 4 pairs were not scored" in none.stderr


# ------------------------------------------------------------------------------------------
# 3. Outputs are checked first and written safely
# ------------------------------------------------------------------------------------------


def test_out_that_is_a_file_or_unwritable_fails_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    proc = run_cli("evaluate", "--example", "--out", str(blocker))
    assert proc.returncode == 2 and "a file is in the way" in proc.stderr and "Traceback" not in proc.stderr
    under = run_cli("evaluate", "--example", "--out", str(blocker / "sub"))
    assert under.returncode == 2 and "is a file, not a folder" in under.stderr
    if Path("/proc/self").exists():  # a read-only place, even for root
        ro = run_cli("evaluate", "--example", "--out", "/proc/cxreval-out")
        assert ro.returncode == 2 and "cannot write there" in ro.stderr and "Traceback" not in ro.stderr


def test_stale_failures_of_another_engine_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "failures.jsonl").write_text('{"pair_id": "old"}\n')
    assert run_cli("evaluate", "--example", "--out", str(out), "--json").returncode == 0
    assert not (out / "failures.jsonl").exists()
    assert {p.name for p in out.iterdir() if p.name != ".cxreval-outputs.json"} == {
        "judgements.jsonl.gz",
        "judgements.parquet",
        "errors.csv",
        "scores.json",
    }


class _Boom(list):  # a judgement table that breaks half-way through being written
    def __iter__(self):
        for i, row in enumerate(list.__iter__(self)):
            if i == 5:
                raise RuntimeError("disk on fire")
            yield row


def test_a_crash_while_saving_never_leaves_a_mixed_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = cxreval.evaluate(read_pairs(example_path()))
    result.save(tmp_path)
    names = ["errors.csv", "judgements.jsonl.gz", "judgements.parquet", "scores.json"]
    before = {n: (tmp_path / n).read_bytes() for n in names}
    rows = result.judgements
    monkeypatch.setattr(type(result.table), "rows", lambda self: _Boom(rows))
    with pytest.raises(RuntimeError):
        result.save(tmp_path)
    # the earlier run is whole (its scores.json with it); what the broken run wrote is named partial
    assert {n: (tmp_path / n).read_bytes() for n in names} == before
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert [n for n in left if n not in names] == [], "the broken run left a file under a final name"


def test_sigint_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    base = example_rows()
    rows = [
        {**r, "id": f"{r['id']}-{i}", "reference": f"{r['reference']} Study {i}.", "candidate": f"{r['candidate']} Exam {i}."}
        for i in range(2500)
        for r in base
    ]
    pairs = write_csv(tmp_path / "big.csv", rows)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cxreval", "evaluate", "--pairs", str(pairs), "--out", str(tmp_path / "o"), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4.0)
    assert proc.poll() is None, "finished before it could be interrupted; make the input bigger"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted:") and "rerun" in lines[0], err
    assert not (tmp_path / "o" / "scores.json").exists()


# ------------------------------------------------------------------------------------------
# 5. Several systems and extra columns from the command line
# ------------------------------------------------------------------------------------------


def test_meta_columns_are_written_to_errors_csv(tmp_path: Path) -> None:
    assert run_cli("evaluate", "--example", "--meta-col", "model", "--out", str(tmp_path), "--json").returncode == 0
    with (tmp_path / "errors.csv").open(newline="") as fh:
        got = {r["pair_id"]: r["model"] for r in csv.DictReader(fh)}
    assert got == {r["id"]: r["model"] for r in example_rows()}


def test_long_format_scores_every_system_like_separate_files(tmp_path: Path) -> None:
    rows = example_rows()
    long = write_csv(
        tmp_path / "long.csv",
        [
            *({"study": r["id"], "model": "A", "reference": r["reference"], "candidate": r["candidate"]} for r in rows),
            *({"study": r["id"], "model": "B", "reference": r["reference"], "candidate": r["reference"]} for r in rows[:10]),
            *({"study": r["id"], "model": "B", "reference": r["reference"], "candidate": r["candidate"]} for r in rows[10:]),
        ],
    )
    proc = run_cli(
        "evaluate",
        "--pairs",
        str(long),
        "--id-col",
        "study",
        "--system-col",
        "model",
        "--out",
        str(tmp_path / "o"),
        env={"COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 systems" in proc.stdout
    a = json.loads((tmp_path / "o" / "systems" / "A" / "scores.json").read_text())
    alone = cxreval.evaluate(read_pairs(example_path()))
    assert a["report_level"]["mean"] == alone.error_summary.mean
    with (tmp_path / "o" / "systems.csv").open(newline="") as fh:
        table = {r["system"]: r for r in csv.DictReader(fh)}
    assert set(table) == {"A", "B"} and float(table["B"]["errors_per_report_mean"]) < float(table["A"]["errors_per_report_mean"])
    # a duplicate id within one system is still an error
    dup = write_csv(tmp_path / "dup.csv", [{"study": "1", "model": "A", "reference": "x", "candidate": "y"}] * 2)
    bad = run_cli("evaluate", "--pairs", str(dup), "--id-col", "study", "--system-col", "model", "--out", str(tmp_path / "d"))
    assert bad.returncode == 2 and "duplicate id '1' for system 'A'" in bad.stderr


def test_two_files_with_different_id_columns(tmp_path: Path) -> None:
    rows = example_rows()
    refs = write_csv(tmp_path / "r.csv", [{"study_id": r["id"], "reference": r["reference"]} for r in rows])
    cands = write_csv(tmp_path / "c.csv", [{"uid": r["id"], "candidate": r["candidate"]} for r in rows])
    proc = run_cli(
        "evaluate",
        "--refs",
        str(refs),
        "--cands",
        str(cands),
        "--ref-id-col",
        "study_id",
        "--cand-id-col",
        "uid",
        "--out",
        str(tmp_path / "o"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "o" / "scores.json").read_text())["n_pairs"] == 20


def test_compare_two_result_folders(tmp_path: Path) -> None:
    rows = example_rows()
    better = write_csv(tmp_path / "b.csv", [{**r, "candidate": r["reference"]} if i % 2 else r for i, r in enumerate(rows)])
    assert run_cli("evaluate", "--example", "--out", str(tmp_path / "A"), "--json").returncode == 0
    assert run_cli("evaluate", "--pairs", str(better), "--out", str(tmp_path / "B"), "--json").returncode == 0
    proc = run_cli("compare", str(tmp_path / "A"), str(tmp_path / "B"), "--resamples", "200", "--permutations", "200", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    errors = next(t for t in got["tests"] if t["name"] == "errors_per_report_mean")
    a = json.loads((tmp_path / "A" / "scores.json").read_text())["report_level"]["mean"]
    b = json.loads((tmp_path / "B" / "scores.json").read_text())["report_level"]["mean"]
    assert errors["a"] == pytest.approx(a) and errors["b"] == pytest.approx(b)
    assert errors["difference"] == pytest.approx(a - b) and errors["low"] <= a - b <= errors["high"]
    assert "resamples:200" in got["signature"]
    table = run_cli("compare", str(tmp_path / "A"), str(tmp_path / "B"), "--resamples", "50", "--permutations", "50")
    assert table.returncode == 0 and "errors_per_report_mean" in table.stdout and "signature:" in table.stdout
    assert run_cli("evaluate", "--example", "--uncertain", "negative", "--out", str(tmp_path / "N"), "--json").returncode == 0
    refused = run_cli("compare", str(tmp_path / "A"), str(tmp_path / "N"))
    assert refused.returncode == 2 and "signatures differ" in refused.stderr
    missing = run_cli("compare", str(tmp_path / "A"), str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "not a finished cxreval evaluate folder" in missing.stderr


# ------------------------------------------------------------------------------------------
# 6. Input conveniences
# ------------------------------------------------------------------------------------------


def test_standard_input_needs_and_takes_a_format(tmp_path: Path) -> None:
    text = example_path().read_text(encoding="utf-8")
    ok = run_cli("evaluate", "--pairs", "-", "--format", "csv", "--out", str(tmp_path / "o"), "--json", stdin=text)
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "o" / "scores.json").read_text())["n_pairs"] == 20
    no_fmt = run_cli("evaluate", "--pairs", "-", "--out", str(tmp_path / "o"), stdin=text)
    assert no_fmt.returncode == 2 and "--format" in no_fmt.stderr
    odd = tmp_path / "pairs.txt"
    odd.write_text(text)
    assert run_cli("evaluate", "--pairs", str(odd), "--format", "csv", "--out", str(tmp_path / "t"), "--json").returncode == 0


@pytest.mark.parametrize(("delimiter", "hint"), [(";", "semicolon-separated"), ("\t", "--format tsv")])
def test_wrong_delimiter_gets_a_hint(tmp_path: Path, delimiter: str, hint: str) -> None:
    path = write_csv(tmp_path / "p.csv", example_rows(), delimiter=delimiter)
    proc = run_cli("evaluate", "--pairs", str(path), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and hint in proc.stderr


def test_fields_over_128_kb_are_read(tmp_path: Path) -> None:
    long = "No pleural effusion. " * 10_000  # 210 KB
    path = write_csv(tmp_path / "p.csv", [{"id": "1", "reference": long, "candidate": "Small pleural effusion."}])
    [pair] = read_pairs(path)
    assert len(pair.reference) > 131_072


def test_ids_differing_by_leading_zeros_get_a_hint(tmp_path: Path) -> None:
    refs = write_csv(tmp_path / "r.csv", [{"id": "007", "reference": "Clear."}, {"id": "12", "reference": "Clear."}])
    cands = write_csv(tmp_path / "c.csv", [{"id": "7.0", "candidate": "Clear."}, {"id": "12", "candidate": "Clear."}])
    with pytest.raises(InputError, match=r"leading zeros or '\.0'.*'7\.0' vs '007'"):
        read_pair_files(refs, cands)


def test_negative_top_is_rejected(tmp_path: Path) -> None:
    proc = run_cli("evaluate", "--example", "--top", "-1", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--top" in proc.stderr


def test_errors_name_flags_not_python(tmp_path: Path) -> None:
    odd = tmp_path / "pairs.txt"
    odd.write_text("id,reference,candidate\n1,a,b\n")
    proc = run_cli("evaluate", "--pairs", str(odd), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "--format" in proc.stderr
    rex = tmp_path / "rex.json"
    rex.write_text(json.dumps({"s": {"report": "x"}}))
    keyed = run_cli("evaluate", "--pairs", str(rex), "--out", str(tmp_path / "o"))
    assert keyed.returncode == 2 and "--refs or --cands" in keyed.stderr


# ------------------------------------------------------------------------------------------
# 8. cxreval cache refuses files that are not its own
# ------------------------------------------------------------------------------------------


def test_cache_refuses_foreign_files(tmp_path: Path) -> None:
    bench = tmp_path / "bench.sqlite"
    db = sqlite3.connect(bench)
    db.execute("CREATE TABLE judgements (key TEXT PRIMARY KEY, rows TEXT NOT NULL)")
    db.commit()
    db.close()
    before = bench.read_bytes()
    proc = run_cli("cache", "--path", str(bench))
    assert proc.returncode == 2 and "not a cxreval LLM answer store" in proc.stderr and "Traceback" not in proc.stderr
    assert bench.read_bytes() == before  # no tables added
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    other = run_cli("cache", "--path", str(text))
    assert other.returncode == 2 and "not an SQLite file" in other.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        refused = run_cli(
            "evaluate",
            "--example",
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "llm-extract",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--cache",
            str(bench),
            env={"OPENAI_API_KEY": "x"},
        )
    assert refused.returncode == 2 and "not a cxreval LLM answer store" in refused.stderr


def test_a_store_another_process_is_still_creating_is_not_refused(tmp_path: Path) -> None:
    """Between setting WAL mode and creating its tables (one transaction), a process's new store is
    an SQLite file with no table; a second process opening it then must not call it foreign (two
    `evaluate` runs sharing one --cache failed that way)."""
    from cxreval.llm.cache import AnswerCache

    path = tmp_path / "c.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")  # what AnswerCache does first: the file now has a header
    db.close()
    store = AnswerCache(path)
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"answers", "meta"} <= tables
    store.close()


def test_sigint_in_an_llm_run_keeps_answers_and_resumes(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    env = {**os.environ, "OPENAI_API_KEY": ""}
    with LoopbackServer(latency=0.4) as srv:
        args = [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--example",
            "--out",
            str(tmp_path / "o"),
            *_llm_args(srv, cache),
            "--concurrency",
            "1",
        ]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while srv.answered < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and srv.answered >= 3, proc.poll()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and f"kept in {cache}" in lines[0] and "Traceback" not in err, err
        rerun = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        usage = json.loads((tmp_path / "o" / "scores.json").read_text())["usage"]
        # concurrency 1: when the server has answered 3, at least the first 2 were received and stored
        # (the 3rd may have been cut by the interrupt); those are not asked again
        assert usage["cache_hits"] >= 2 and usage["tasks"] == 20


def test_outputs_get_the_ordinary_file_mode(tmp_path: Path) -> None:
    from cxreval.io.writers import atomic_write_text

    atomic_write_text(tmp_path / "a.txt", "x")
    (tmp_path / "b.txt").write_text("x")
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode


def test_rexrank_candidates_without_shared_data(tmp_path: Path) -> None:
    """The item-1 regression on files written here (the shared-data tests skip without it)."""
    base = example_rows()
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({r["id"]: {"report": r["reference"], "section_findings": r["reference"]} for r in base}))
    cands = tmp_path / "preds.json"
    cands.write_text(
        json.dumps(
            {
                r["id"]: {"report": r["reference"], "section_findings": r["reference"], "model_prediction": r["candidate"]}
                for r in base
            }
        )
    )
    pairs = read_pair_files(refs, cands, section="findings")
    assert [p.candidate for p in pairs] == [r["candidate"] for r in base]
    assert read_pair_files(refs, cands, section="findings", candidate_col="model_prediction") == pairs
    with pytest.warns(CopiedCandidatesWarning):
        read_pair_files(refs, cands, section="findings", candidate_col="section_findings")
    proc = run_cli(
        "evaluate", "--refs", str(refs), "--section", "findings", "--cands", str(cands), "--out", str(tmp_path / "o"), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    scored = json.loads((tmp_path / "o" / "scores.json").read_text())
    alone = cxreval.evaluate(read_pairs(example_path()))
    assert scored["report_level"]["mean"] == alone.error_summary.mean > 0
