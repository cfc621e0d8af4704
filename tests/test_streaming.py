"""Streamed evaluation (issue 14): the same files and scores as the whole-list path, in bounded memory.

``cxreval evaluate`` with the rule engine reads its input twice (check, then pair by pair) and
writes each chunk's rows as it comes (:mod:`cxreval.streaming`). These tests hold it to the
promise that nothing changes: byte-identical files against ``evaluate()`` + ``save()`` in one
process and in workers, the same pairs and the same error messages as :func:`read_pairs`, a
bounded read-ahead, and a clean folder after an interruption.
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from cxreval import Evaluator
from cxreval.cli import example_path
from cxreval.io import CopiedCandidatesWarning, InputError, PairStream, ReportPair, read_pairs
from cxreval.scores.report_errors import distribution_of
from cxreval.streaming import FILES, evaluate_systems_to, evaluate_to
from cxreval.testing.results import RESULT_FILES, differing

FILE_NAMES = RESULT_FILES


def _example_pairs() -> list[ReportPair]:
    return read_pairs(example_path(), meta_cols=["model"])


def _many_pairs(n: int, seed: int = 0) -> list[ReportPair]:
    """``n`` pairs recombined from the packaged example's texts (two systems, a kept column)."""
    texts = sorted({t for p in _example_pairs() for t in (p.reference, p.candidate)})
    rng = random.Random(seed)
    return [
        ReportPair(
            pair_id=f"p{i}",
            reference=rng.choice(texts),
            candidate=rng.choice(texts),
            meta={"site": rng.choice("ab")},
            system=("sys-a", "sys-b")[i % 2],
        )
        for i in range(n)
    ]


def _same_files(a: Path, b: Path) -> None:
    assert not differing(a, b, (*FILE_NAMES, "judgements.parquet")), f"files differ between {a} and {b}"


def test_the_streamed_files_are_the_whole_list_files(tmp_path: Path) -> None:
    pairs = _example_pairs()
    whole = Evaluator().evaluate(pairs)
    whole.save(tmp_path / "whole")
    scores = evaluate_to(Evaluator(), tmp_path / "stream", iter(pairs))
    _same_files(tmp_path / "whole", tmp_path / "stream")
    assert scores.to_dict() == whole.to_dict()
    assert FILES == FILE_NAMES


def test_workers_write_the_same_files_across_many_chunks(tmp_path: Path) -> None:
    """2,500 pairs: above the workers' threshold and three chunks long, systems interleaved."""
    pairs = _many_pairs(2_500)
    folders = {s: tmp_path / "workers" / s for s in ("sys-a", "sys-b")}
    streamed = evaluate_systems_to(Evaluator(workers=2), folders, iter(pairs), total=len(pairs))
    for system, folder in folders.items():
        group = [p for p in pairs if p.system == system]
        whole = Evaluator().evaluate(group)
        whole.save(tmp_path / "whole" / system)
        _same_files(tmp_path / "whole" / system, folder)
        assert streamed[system].to_dict() == whole.to_dict()
        assert streamed[system].n_pairs == len(group) == 1_250
    assert list(streamed) == ["sys-a", "sys-b"]


def test_a_pair_of_a_system_without_a_folder_is_an_error(tmp_path: Path) -> None:
    pairs = _many_pairs(4)
    with pytest.raises(ValueError, match="no output folder for system 'sys-b'"):
        evaluate_systems_to(Evaluator(), {"sys-a": tmp_path / "a"}, pairs)
    assert not (tmp_path / "a" / "scores.json").exists()


def test_an_interrupted_stream_keeps_the_previous_files_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pairs = _many_pairs(3_000)
    evaluate_to(Evaluator(), out, pairs[:10])
    names = (*FILE_NAMES, "judgements.parquet")
    before = {name: (out / name).read_bytes() for name in names}

    def interrupted():
        for i, p in enumerate(pairs):
            if i == 2_500:
                raise KeyboardInterrupt
            yield p

    with pytest.raises(KeyboardInterrupt):
        evaluate_to(Evaluator(), out, interrupted())
    assert {name: (out / name).read_bytes() for name in names} == before, "the earlier run is not whole"
    left = sorted(p.name for p in out.iterdir() if p.name not in names and p.name != ".cxreval-outputs.json")
    # (judgements.parquet is written from its spool when the run ends: an interrupted run has none)
    assert left == ["errors.csv.partial", "judgements.jsonl.gz.partial"], "this run's files are not named partial"


@pytest.mark.parametrize("counts", [[0], [3], [0, 1], [1, 2, 2, 7], [0] * 5 + [12] * 3 + [4] * 9 + [1]])
def test_the_error_distribution_of_a_histogram_matches_numpy(counts: list[int]) -> None:
    values = np.array(counts)
    hist = {int(v): int((values == v).sum()) for v in set(counts)}
    d = distribution_of(hist)
    assert d.n_pairs == len(counts)
    assert d.mean == float(values.mean())
    assert d.median == float(np.median(values))
    assert d.max == int(values.max())
    assert d.error_free == float((values == 0).mean())
    assert d.std == pytest.approx(float(values.std(ddof=1)) if len(counts) > 1 else 0.0, rel=1e-12, abs=1e-12)
    assert sum(d.histogram.values()) == len(counts)


# -- reading -------------------------------------------------------------------------------------
GOOD = {
    "plain.csv": "id,reference,candidate,site\na,Small effusion.,No effusion.,x\nb,Clear lungs.,Clear lungs.,y\n",
    "bom.csv": "\ufeffid,reference,candidate,site\na,Small effusion.,No effusion.,x\n",
    "crlf.csv": 'id,reference,candidate,site\r\na,"Line one.\r\nLine two.",No effusion.,x\r\n',
    "tabs.tsv": "id\treference\tcandidate\tsite\na\tSmall effusion.\t No effusion. \tx\n",
    "objects.jsonl": '{"id": "a", "reference": "Small effusion.", "candidate": "No effusion.", "site": 3}\n\n'
    '{"id": 7, "reference": "Clear.", "candidate": "Clear lungs.", "site": null}\n',
}
BAD = {
    "empty-text.csv": "id,reference,candidate,site\na,,No effusion.,x\nb,  ,x,y\n",
    "duplicate.csv": "id,reference,candidate,site\na,R.,C.,x\na,R2.,C2.,y\n",
    "missing-column.csv": "id,reference,site\na,R.,x\n",
    "short-record.csv": "id,reference,candidate,site\na,R.\n",
    "unclosed-quote.csv": 'id,reference,candidate,site\na,R.,C.,x\nb,"R.\nmore,C.,y\n',
    "empty.csv": "",
    "header-only.csv": "id,reference,candidate,site\n",
    "bad-json.jsonl": '{"id": "a", "reference": "R.", "candidate": "C.", "site": "x"}\n{"id": "b",\n',
    "missing-field.jsonl": '{"id": "a", "reference": "R.", "candidate": "C.", "site": "x"}\n{"id": "b", "reference": "R."}\n',
    "no-such-column.jsonl": '{"id": "a", "reference": "R.", "candidate": "C."}\n{"id": "b", "reference": "R.", "candidate": "C."}\n',
    "not-object.jsonl": '[1, 2]\n{"id": "a", "reference": "R.", "candidate": "C.", "site": "x"}\n',
    "duplicate-header.csv": "id,reference,candidate,site,site\na,R.,C.,x,y\n",
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_stream_yields_the_pairs_read_pairs_returns(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, GOOD[name])
    stream = PairStream(path, meta_cols=["site"])
    assert stream.check() == len(read_pairs(path, meta_cols=["site"]))
    assert list(stream) == read_pairs(path, meta_cols=["site"])


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_stream_reports_the_problems_read_pairs_reports(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, BAD[name])
    with pytest.raises(InputError) as whole:
        read_pairs(path, meta_cols=["site"])
    with pytest.raises(InputError) as streamed:
        PairStream(path, meta_cols=["site"]).check()
    assert str(streamed.value) == str(whole.value)


def test_a_bad_byte_is_named_as_read_pairs_names_it(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("id,reference,candidate\na,R.,C.\nb,Pleural effusion \u00e9.,C.\n".encode("latin-1"))
    with pytest.raises(InputError) as whole:
        read_pairs(path)
    with pytest.raises(InputError) as streamed:
        PairStream(path).check()
    assert str(streamed.value) == str(whole.value)
    assert "line 3" in str(streamed.value) and "byte offset" in str(streamed.value)


def test_a_file_changed_after_its_check_stops_the_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "pairs.csv", GOOD["plain.csv"])
    stream = PairStream(path)
    stream.check()
    path.write_text(GOOD["plain.csv"] + "c,,C.,z\n", encoding="utf-8")
    with pytest.raises(InputError, match="changed after it was checked"):
        list(stream)


def test_copied_candidates_warn_per_system(tmp_path: Path) -> None:
    rows = [
        ("a", "Same.", "Same.", "copy"),
        ("b", "Same two.", "Same two.", "copy"),
        ("a", "Effusion.", "Clear.", "real"),
        ("b", "Edema.", "Clear.", "real"),
    ]
    path = tmp_path / "long.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([("id", "reference", "candidate", "model"), *rows])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CopiedCandidatesWarning)
        stream = PairStream(path, system_col="model")
        stream.check()
    assert [str(w.message) for w in caught if w.category is CopiedCandidatesWarning] == [
        f"2 of 2 candidates (100%) in {path} (column 'candidate'), system 'copy' are identical to their reference: "
        "is the candidate column really the generated report?"
    ]
    assert stream.systems == {"copy": 2, "real": 2}


def test_a_stream_holds_many_problems_in_bounded_memory(tmp_path: Path) -> None:
    lines = ["id,reference,candidate"] + [f"p{i},,C." for i in range(2_500)]
    path = _write(tmp_path, "bad.csv", "\n".join(lines) + "\n")
    with pytest.raises(InputError) as streamed:
        PairStream(path).check()
    assert len(streamed.value.problems) == 1_000
    assert streamed.value.not_kept == 1_500 and streamed.value.n_problems == 2_500
    assert str(streamed.value).splitlines()[0] == "2500 problems in input:"
    assert str(streamed.value).splitlines()[-1] == "  ... and 2480 more problems"


# -- the command line ---------------------------------------------------------------------------
def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=600,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_the_cli_streams_files_and_standard_input_alike(tmp_path: Path) -> None:
    pairs = _many_pairs(300)
    path = tmp_path / "pairs.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "site", "model"])
        w.writerows((p.pair_id, p.reference, p.candidate, p.meta["site"], p.system) for p in pairs)
    by_file = _cli(
        "evaluate", "--pairs", str(path), "--meta-col", "site", "--system-col", "model", "--out", str(tmp_path / "file"), "--json"
    )
    assert by_file.returncode == 0, by_file.stderr
    by_stdin = _cli(
        "evaluate",
        "--pairs",
        "-",
        "--format",
        "csv",
        "--meta-col",
        "site",
        "--system-col",
        "model",
        "--out",
        str(tmp_path / "stdin"),
        "--json",
        stdin=path.read_text(encoding="utf-8"),
    )
    assert by_stdin.returncode == 0, by_stdin.stderr
    assert json.loads(by_file.stdout) == json.loads(by_stdin.stdout)
    for system in ("sys-a", "sys-b"):
        folder = tmp_path / "file" / "systems" / system
        _same_files(folder, tmp_path / "stdin" / "systems" / system)
        whole = Evaluator().evaluate([p for p in pairs if p.system == system])
        whole.save(tmp_path / "whole" / system)
        # the CLI's file names the kept column, so compare everything but that column's order
        assert not differing(folder, tmp_path / "whole" / system, ("judgements.jsonl.gz", "judgements.parquet"))
        assert json.loads((folder / "scores.json").read_text())["metrics"] == whole.to_dict()["metrics"]
    assert (tmp_path / "file" / "systems.csv").is_file()


def test_the_cli_names_a_bad_row_before_any_work(tmp_path: Path) -> None:
    path = _write(tmp_path, "pairs.csv", "id,reference,candidate\na,R.,C.\nb,R.,\n")
    done = _cli("evaluate", "--pairs", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"{path}, line 3 (id 'b'), field 'candidate': empty report" in done.stderr
    assert not (tmp_path / "out").exists()
