"""Review of the streamed ``cxreval evaluate`` (issue 14 item 1): each test shows one defect.

Every test here states what the whole-list path (``read_pairs`` + ``Evaluator().evaluate(pairs)
.save(dir)``) or the project's promises say, and fails on the current streamed code.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cxreval import Evaluator, ReportPair
from cxreval.io import InputError, PairStream, read_pairs
from cxreval.scores.report_errors import distribution_of
from cxreval.streaming import evaluate_stream, evaluate_to
from cxreval.testing.results import RESULT_FILES, differing

FILE_NAMES = RESULT_FILES


def _differing(a: Path, b: Path) -> list[str]:
    return differing(a, b, FILE_NAMES)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _outcome(fn):  # noqa: ANN001, ANN202 - what a reader returns, or the text of its InputError
    try:
        return fn()
    except InputError as exc:
        return f"InputError: {exc}"


# -- 1. no pair at all ----------------------------------------------------------------------------
def test_an_empty_input_writes_what_the_whole_list_path_writes(tmp_path: Path) -> None:
    """``evaluate_to`` with no pair raises KeyError(None); the whole-list path writes three files
    (ResultWriter.commit's "no pair at all" branch is unreachable: no writer is ever made)."""
    Evaluator().evaluate([]).save(tmp_path / "whole")
    evaluate_to(Evaluator(), tmp_path / "stream", [])
    assert _differing(tmp_path / "whole", tmp_path / "stream") == []


# -- 2. kept columns that are not the same in every chunk --------------------------------------------
def _two_chunk_pairs(meta1: dict[str, str], meta2: dict[str, str]) -> list[ReportPair]:
    return [
        ReportPair(pair_id="1", reference="Small left pleural effusion.", candidate="No effusion.", meta=meta1),
        ReportPair(pair_id="2", reference="Clear lungs.", candidate="Right lower lobe pneumonia.", meta=meta2),
    ]


def test_kept_columns_in_another_order_land_under_their_header(tmp_path: Path) -> None:
    """Each chunk rendered errors.csv with its own column order while the header was the first
    chunk's: values landed under the wrong column."""
    pairs = _two_chunk_pairs({"site": "A", "scanner": "X"}, {"scanner": "Y", "site": "B"})
    Evaluator().evaluate(pairs).save(tmp_path / "whole")
    evaluate_stream(Evaluator().judge_engine, iter(pairs), tmp_path / "stream", chunk_pairs=1)
    assert (tmp_path / "stream" / "errors.csv").read_text() == (tmp_path / "whole" / "errors.csv").read_text()


def test_kept_columns_that_differ_between_pairs_stop_the_run(tmp_path: Path) -> None:
    """A later pair with other columns gave rows with more fields than the header; errors.csv
    has one header, so the stream refuses (naming the pair) instead."""
    pairs = _two_chunk_pairs({}, {"site": "B"})
    with pytest.raises(ValueError, match="pair '2' keeps the columns"):
        evaluate_stream(Evaluator().judge_engine, iter(pairs), tmp_path / "stream", chunk_pairs=1)
    assert not (tmp_path / "stream" / "scores.json").exists()


# -- 3. duplicate ids in different chunks --------------------------------------------------------------
def test_duplicate_ids_in_different_chunks_are_refused_or_scored_as_the_whole_list(tmp_path: Path) -> None:
    """The Python API takes any iterable: a duplicate id split over two chunks would be scored
    differently from the whole list, which pooled both pairs' rows silently until cxreval 0.4:
    now both paths refuse it."""
    pairs = [
        ReportPair(pair_id="1", reference="Small left pleural effusion.", candidate="No effusion."),
        ReportPair(pair_id="1", reference="Clear lungs.", candidate="Right lower lobe pneumonia."),
    ]
    with pytest.raises(ValueError, match="duplicate pair id '1'"):
        Evaluator().evaluate(pairs)
    try:
        evaluate_stream(Evaluator().judge_engine, iter(pairs), tmp_path / "stream", chunk_pairs=1)
    except ValueError as exc:
        assert "duplicate" in str(exc)
        return
    assert _differing(tmp_path / "whole", tmp_path / "stream") == []


# -- 4. line endings the csv module reads but PairStream does not ---------------------------------
def test_a_csv_with_cr_line_endings_reads_as_read_pairs_reads_it(tmp_path: Path) -> None:
    """Old-Mac / Excel "CSV (Macintosh)" files end lines with a bare CR. read_pairs (StringIO with
    newline='') reads them; PairStream splits on b'\\n' only and says 'file is empty (no header row)'."""
    path = _write(
        tmp_path, "mac.csv", b"id,reference,candidate\r1,Small left pleural effusion.,No effusion.\r2,Clear.,Clear lungs.\r"
    )
    whole = _outcome(lambda: read_pairs(path))
    assert isinstance(whole, list) and len(whole) == 2

    def streamed() -> list[ReportPair]:
        stream = PairStream(path)
        stream.check()
        return list(stream)

    assert _outcome(streamed) == whole


def test_a_bare_cr_inside_a_quoted_field_gives_read_pairs_line_numbers(tmp_path: Path) -> None:
    """read_pairs counts a bare CR as a line end, PairStream does not: every later problem is
    reported one line off."""
    path = _write(tmp_path, "cr-in-quotes.csv", b'id,reference,candidate\n1,"Small\reffusion.",No effusion.\n2,,x\n')
    assert _outcome(lambda: PairStream(path).check()) == _outcome(lambda: read_pairs(path))


# -- 5. problems listed in another order than read_pairs lists them --------------------------------
ORDER = {
    # a field-count problem (structural) and an empty report: read_pairs lists structure first
    "order.csv": b"id,reference,candidate\na,,C.\nb,R.,C.,extra\n",
    # a duplicated header column comes after every row problem (and is hidden past 20 of them)
    "dup-header.csv": b"id,reference,candidate,candidate\na,,C.,D.\n",
    "bad-json-then-row.jsonl": b'{"id":"a","reference":"","candidate":"C."}\n{"id":"b",\n',
    "not-object-and-missing-column.jsonl": b'{"id":"a","reference":"R.","cand":"C."}\n[1]\n',
}


@pytest.mark.parametrize("name", sorted(ORDER))
def test_problems_come_in_the_order_read_pairs_gives(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, ORDER[name])
    assert _outcome(lambda: PairStream(path).check()) == _outcome(lambda: read_pairs(path))


def test_a_duplicated_header_column_is_not_buried_behind_row_problems(tmp_path: Path) -> None:
    rows = "".join(f"p{i},,C.,D.\n" for i in range(30))
    path = _write(tmp_path, "dup.csv", ("id,reference,candidate,candidate\n" + rows).encode())
    whole = _outcome(lambda: read_pairs(path))
    assert "column appears 2 times in the header" in whole  # listed first by read_pairs
    assert "column appears 2 times in the header" in _outcome(lambda: PairStream(path).check())


# -- 6. the kept-problems cap: counts that are not true ------------------------------------------
def test_a_jsonl_column_no_record_has_is_one_problem_however_many_records(tmp_path: Path) -> None:
    """A mistyped --candidate-col on a 1,100-line JSONL: read_pairs names the missing column; the
    stream adds '... and 100 more problems' that do not exist (the per-record 'missing field'
    problems cut by MAX_KEPT_PROBLEMS are counted before settle_columns drops their kind)."""
    lines = "".join(json.dumps({"id": str(i), "reference": "R.", "cand": "C."}) + "\n" for i in range(1_100))
    path = _write(tmp_path, "typo.jsonl", lines.encode())
    assert _outcome(lambda: PairStream(path).check()) == _outcome(lambda: read_pairs(path))


def test_the_number_of_problems_said_is_the_number_found(tmp_path: Path) -> None:
    """1,100 empty references: the stream's message opens '1001 problems in input' and ends
    '... and 981 more problems'; there are 1,100 (the '... and 100 more' line is itself the
    1,001st 'problem', hidden behind the 20 listed)."""
    lines = ["id,reference,candidate"] + [f"p{i},,C." for i in range(1_100)]
    path = _write(tmp_path, "bad.csv", ("\n".join(lines) + "\n").encode())
    message = _outcome(lambda: PairStream(path).check())
    assert message.splitlines()[0] in ("InputError: 1100 problems in input:", "InputError: 1,100 problems in input:")


# -- 7. the file changed while it is read the second time --------------------------------------------
def test_rows_appended_while_the_stream_reads_stop_the_run(tmp_path: Path) -> None:
    """The size/mtime stamp is compared once, before the second read: valid rows appended during
    it are judged and scored though no check saw them (a new system there ends in a ValueError
    traceback in the CLI, not an input error)."""
    path = _write(tmp_path, "pairs.csv", b"id,reference,candidate\na,Effusion.,No effusion.\nb,Clear.,Clear lungs.\n")
    stream = PairStream(path)
    assert stream.check() == 2
    it = iter(stream)
    got = [next(it)]
    with path.open("ab") as fh:
        fh.write(b"c,Edema.,No edema.\n")
    with pytest.raises(InputError, match="changed"):
        got.extend(it)
    assert len(got) <= 2


# -- 8. memory that grows with the pairs ---------------------------------------------------------------
def test_reading_a_stream_keeps_no_entry_per_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RowChecker.first_seen keeps one (system, id) entry per pair in check() and again in the
    second read (which needs no duplicate check: check() did it and the stamp guards the file)."""
    from cxreval.io import pairs as cio

    made: list[cio.RowChecker] = []
    real_init = cio.RowChecker.__init__

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(cio.RowChecker, "__init__", spy)
    n = 5_000
    path = _write(
        tmp_path, "many.csv", ("id,reference,candidate\n" + "".join(f"p{i},Effusion.,No effusion.\n" for i in range(n))).encode()
    )
    stream = PairStream(path)
    stream.check()  # finding duplicates needs one entry per id here (documented)
    checked = len(made)
    for _ in stream:
        pass
    assert len(made) > checked
    assert max(len(c.first_seen) for c in made[checked:]) == 0, "the second reading holds an entry per pair"


# -- 9. long format: an interruption loses the systems that were finished -----------------------------
def test_an_interrupted_long_format_run_keeps_the_systems_it_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the change each system was saved when judged, so Ctrl-C kept the finished ones
    ('results of 1 of 2 systems are in OUT'). Then every system was committed only at the very end:
    sys-a, wholly read and judged, was discarded (its judgements and scores lost). Issue 27, item 9:
    a folder holds one whole run, so sys-a is not put in place, but its finished files are kept,
    named partial (and the earlier run, here none, is left whole)."""
    import cxreval.streaming as streaming
    from cxreval.cli import app

    path = tmp_path / "long.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "model"])
        w.writerows(
            [
                ("a", "Small left pleural effusion.", "No effusion.", "sys-a"),
                ("b", "Clear lungs.", "Clear lungs.", "sys-a"),
                ("a", "Small left pleural effusion.", "Effusion.", "sys-b"),
            ]
        )
    real_add = streaming.ResultWriter.add

    def add(self, chunk):  # noqa: ANN001, ANN202 - Ctrl-C while sys-b's chunk is written
        if self.folder.name == "sys-b":
            raise KeyboardInterrupt
        return real_add(self, chunk)

    monkeypatch.setattr(streaming.ResultWriter, "add", add)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["evaluate", "--pairs", str(path), "--system-col", "model", "--out", str(out)])
    assert res.exit_code == 130, res.output
    finished = out / "systems" / "sys-a"
    assert json.loads((finished / "scores.json.partial").read_text(encoding="utf-8"))["n_pairs"] == 2, (
        "the finished system was thrown away"
    )
    assert not (finished / "scores.json").exists(), "an unfinished run's system was put in place"


# -- 10. many systems: two open files each -------------------------------------------------------------
def test_many_systems_do_not_exhaust_file_descriptors(tmp_path: Path) -> None:
    """Every system's ResultWriter holds two temporary files open until the end: 300 systems need
    600 descriptors (a long-format file of ~510 systems fails under the common 1,024 limit). The
    whole-list path writes one system at a time. Run with RLIMIT_NOFILE 256."""
    script = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from cxreval import Evaluator, ReportPair
        from cxreval.streaming import evaluate_systems_to
        systems = [f"s{{i}}" for i in range(300)]
        pairs = [ReportPair(pair_id="1", reference="Effusion.", candidate="No effusion.", system=s) for s in systems]
        out = Path({str(tmp_path)!r})
        evaluate_systems_to(Evaluator(), {{s: out / s for s in systems}}, pairs)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


# -- 11. folders written before the fingerprint changed ---------------------------------------------
def _old_fingerprint(pairs: list[ReportPair]) -> str:
    """references_fingerprint as released before this change (sha256 of the sorted list)."""
    h = hashlib.sha256()
    for pid, ref in sorted((p.pair_id, p.reference) for p in pairs):
        for part in (pid, ref):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def test_compare_with_a_folder_written_before_the_fingerprint_change(tmp_path: Path) -> None:
    """`cxreval compare OLD NEW` on the same references says they were 'scored against different
    references' and exits 2: the fingerprint's algorithm changed, the references did not. It
    should compare (or say the older folder's fingerprint cannot be checked), never claim that."""
    from cxreval.cli import app

    refs = ["Small left pleural effusion.", "Clear lungs.", "Cardiomegaly.", "Right lower lobe pneumonia."]
    old = [ReportPair(pair_id=str(i), reference=r, candidate="No acute findings.") for i, r in enumerate(refs)]
    new = [ReportPair(pair_id=str(i), reference=r, candidate=r) for i, r in enumerate(refs)]
    Evaluator().evaluate(old).save(tmp_path / "old")
    scores = json.loads((tmp_path / "old" / "scores.json").read_text(encoding="utf-8"))
    scores["references_sha256"] = _old_fingerprint(old)  # as the previous release wrote it
    (tmp_path / "old" / "scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    Evaluator().evaluate(new).save(tmp_path / "new")
    res = CliRunner().invoke(
        app, ["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--resamples", "20", "--permutations", "20", "--json"]
    )
    assert "different references" not in res.output, res.output


# -- 12. "the results are identical to today's" ------------------------------------------------------
def test_the_error_sd_is_exact_and_no_longer_numpys() -> None:
    """errors_per_report std was numpy's std(ddof=1), whose float sums round; distribution_of sums
    integers exactly, so its last digit may differ from the previous release's (documented in
    docs/scoring.md). It is the correctly rounded sd of the exact variance."""
    from fractions import Fraction

    values = np.array([0, 0, 1])
    std = distribution_of({0: 2, 1: 1}).std
    assert std == pytest.approx(float(values.std(ddof=1)), rel=1e-15)
    exact_variance = Fraction(1, 3)  # ((0 - 1/3)^2 * 2 + (1 - 1/3)^2) / 2
    assert std == math.sqrt(exact_variance)


# -- 13. SIGTERM leaves the hidden temporary files behind -----------------------------------------------
def test_a_terminated_run_leaves_no_temporary_files(tmp_path: Path) -> None:
    """A batch scheduler or `timeout` stops a job with SIGTERM; the streamed run has by then written
    most of its output into hidden .judgements.jsonl.*.tmp / .errors.csv.*.tmp files, which stay
    (Python runs no finally on SIGTERM) and no later run removes them."""
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import sys
        from cxreval import Evaluator, ReportPair
        from cxreval.streaming import evaluate_stream
        def pairs():
            for i, line in enumerate(sys.stdin):
                yield ReportPair(pair_id=str(i), reference="Small left pleural effusion.", candidate=line.strip() or "x")
        evaluate_stream(Evaluator().judge_engine, pairs(), __import__("pathlib").Path({str(out)!r}), chunk_pairs=1)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None
        proc.stdin.write("No effusion.\nEffusion.\n")
        proc.stdin.flush()
        # wait (no timing assert) until the first chunk is in the temporary file
        for _ in range(6000):
            partial = out / "judgements.jsonl.gz.partial"  # the run's file until it completes (issue 27, item 9)
            if proc.poll() is not None or (partial.exists() and partial.stat().st_size > 0):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.terminate()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []


# -- 14. an input that can be read only once (process substitution, a named pipe) -----------------
@pytest.mark.skipif(not Path("/bin/bash").exists() or not Path("/dev/fd").exists(), reason="needs bash and /dev/fd")
def test_process_substitution_input_is_read_as_before(tmp_path: Path) -> None:
    """`--pairs <(zcat pairs.csv.gz) --format csv` worked (read_pairs reads once). PairStream reads the
    path twice; a pipe is empty the second time, so the run stops with 'file is empty (no header
    row)', exit 2. Only regular files can be read twice; others should be spooled like stdin."""
    path = tmp_path / "pairs.csv"
    path.write_text("id,reference,candidate\n1,Small left pleural effusion.,No effusion.\n", encoding="utf-8")
    out = tmp_path / "out"
    cmd = f'"{sys.executable}" -m cxreval evaluate --pairs <(cat "{path}") --format csv --out "{out}" --json'
    done = subprocess.run(
        ["/bin/bash", "-c", cmd], capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "100"}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "scores.json").is_file()
