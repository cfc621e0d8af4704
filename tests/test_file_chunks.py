"""A pairs file cut into byte ranges that workers read themselves (PairStream.plan, PairChunk,
cxreval.streaming.evaluate_file): the same pairs, files and scores as reading it in order, and
every problem still named by the reading in order."""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path

import pytest

from cxreval import Evaluator
from cxreval.io import InputError, PairStream
from cxreval.streaming import FILES, evaluate_file, evaluate_stream
from cxreval.testing.results import differing

WORDS = [
    "Small",
    "left",
    "pleural",
    "effusion",
    "no",
    "pneumothorax",
    'the "heart"',
    "size, normal",
    "é",
    "line\nbreak",
    "cr\r\nlf",
    "lone\rcr",
    "",
    "5 mm",
    "‘quote’",
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))).strip() or "Clear."


def _field(value: str) -> str:
    """A CSV field, quoted where it holds a delimiter, a quote or a line break (a lone CR too)."""
    return '"' + value.replace('"', '""') + '"' if any(c in value for c in ',"\r\n') else value


def _write_csv(path: Path, n: int, rng: random.Random, *, crlf: bool = False, bom: bool = False, systems: bool = False) -> None:
    end = "\r\n" if crlf else "\n"
    rows = [["id", "reference", "candidate", *(["model"] if systems else [])]]
    rows += [[f"p{i}", _text(rng), _text(rng), *([rng.choice(["a", "b, c"])] if systems else [])] for i in range(n)]
    text = "".join(",".join(map(_field, row)) + end + (end if rng.random() < 0.05 else "") for row in rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def _in_order(stream: PairStream) -> list[tuple[str, str, str, str | None]]:
    stream.check()
    return [(p.pair_id, p.reference, p.candidate, p.system) for p in stream]


def _by_chunks(stream: PairStream, size: int) -> tuple[list[tuple[str, str, str, str | None]], bool]:
    plan = stream.plan(size)
    assert plan is not None
    got, clean = [], True
    for chunk in plan:
        pairs, ok = chunk.read()
        clean &= ok
        got += [(p.pair_id, p.reference, p.candidate, p.system) for p in pairs]
    return got, clean


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size", [1, 40, 333, 4096, 1 << 20])
def test_csv_chunks_read_the_pairs_of_the_file_in_order(tmp_path: Path, seed: int, size: int) -> None:
    """Quoted commas, quotes, line breaks (LF, CRLF, a lone CR) inside fields, CRLF records, a BOM,
    blank lines: the chunks' pairs, in order, are the file's."""
    rng = random.Random(seed)
    path = tmp_path / "pairs.csv"
    _write_csv(path, 60, rng, crlf=seed % 2 == 1, bom=seed >= 2, systems=seed == 3)
    stream = PairStream(path, system_col="model" if seed == 3 else None)
    got, clean = _by_chunks(stream, size)
    assert clean and got == _in_order(stream)


@pytest.mark.parametrize("size", [1, 100, 1 << 20])
def test_jsonl_chunks_read_the_pairs_of_the_file_in_order(tmp_path: Path, size: int) -> None:
    rng = random.Random(7)
    path = tmp_path / "pairs.jsonl"
    lines = [
        json.dumps({"id": f"p{i}", "reference": _text(rng), "candidate": _text(rng)}, ensure_ascii=i % 2 == 0) for i in range(50)
    ]
    path.write_text("\n".join(lines[:25]) + "\n\n" + "\n".join(lines[25:]), encoding="utf-8")  # no final newline
    stream = PairStream(path)
    got, clean = _by_chunks(stream, size)
    assert clean and got == _in_order(stream)


def test_a_stray_quote_never_gives_wrong_pairs(tmp_path: Path) -> None:
    """A '"' inside an unquoted field (an inch mark) flips the quote count, so a cut may fall inside
    a quoted field later on; the reading of that chunk is then not clean (the caller reads the
    file in order), never clean and wrong."""
    path = tmp_path / "pairs.csv"
    rows = [
        "id,reference,candidate",
        'a,5" nodule,"two\nlines"',
        "b,x,y",
        'c,"multi\nline\nfield",z',
        *[f"d{i},ref {i},cand {i}" for i in range(20)],
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    stream = PairStream(path)
    want = _in_order(stream)
    for size in (1, 5, 17, 30, 64):
        got, clean = _by_chunks(stream, size)
        assert not clean or got == want, size


def _pairs_file(tmp_path: Path, n: int, *, systems: bool = False) -> Path:
    path = tmp_path / "pairs.csv"
    rng = random.Random(3)
    texts = [
        "Small left pleural effusion.",
        "No pneumothorax. Heart size is normal.",
        "Right lower lobe opacity.",
        "Moderate cardiomegaly, increased since prior.",
        "Lungs are clear.",
        "Large right pneumothorax.",
    ]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate", "site", *(["model"] if systems else [])])
        for i in range(n):
            w.writerow(
                [
                    f"p{i}",
                    rng.choice(texts),
                    rng.choice(texts),
                    rng.choice("xyz"),
                    *([rng.choice(["m1", "m2"])] if systems else []),
                ]
            )
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_evaluate_file_writes_what_the_reading_in_order_writes(tmp_path: Path, workers: int) -> None:
    path = _pairs_file(tmp_path, 400)
    engine = Evaluator().judge_engine
    evaluate_file(engine, PairStream(path, meta_cols=["site"]), tmp_path / "a", workers=workers, chunk_bytes=2_000)
    stream = PairStream(path, meta_cols=["site"])
    stream.check()
    evaluate_stream(engine, stream, tmp_path / "b", total=stream.n_pairs)  # type: ignore[arg-type]
    assert not differing(tmp_path / "a", tmp_path / "b", (*FILES, "judgements.parquet"))


def test_evaluate_file_by_system(tmp_path: Path) -> None:
    from cxreval.io.writers import SystemFolders

    path = _pairs_file(tmp_path, 300, systems=True)
    engine = Evaluator().judge_engine
    got = evaluate_file(engine, PairStream(path, system_col="model"), SystemFolders(tmp_path / "a"), workers=2, chunk_bytes=1_500)
    stream = PairStream(path, system_col="model")
    stream.check()
    want = evaluate_stream(
        engine,
        stream,
        SystemFolders(tmp_path / "b", stream.systems),  # type: ignore[arg-type]
        total=stream.n_pairs,
    )
    assert list(got) == list(want) == ["m1", "m2"] or list(got) == list(want) == ["m2", "m1"]
    for system in ("m1", "m2"):
        a, b = tmp_path / "a" / "systems" / system, tmp_path / "b" / "systems" / system
        assert not differing(a, b, (*FILES, "judgements.parquet")), system


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p5,Small effusion.,No effusion.,x", "duplicate"),  # an id given twice
        ("p9999,,No effusion.,x", "reference"),  # an empty text
    ],
)
def test_a_problem_is_named_by_the_reading_in_order(tmp_path: Path, row: str, message: str) -> None:
    path = _pairs_file(tmp_path, 200)
    path.write_text(path.read_text(encoding="utf-8") + row + "\n", encoding="utf-8")
    with pytest.raises(InputError) as planned:
        evaluate_file(
            Evaluator().judge_engine, PairStream(path, meta_cols=["site"]), tmp_path / "a", workers=2, chunk_bytes=1_000
        )
    with pytest.raises(InputError) as in_order:
        PairStream(path, meta_cols=["site"]).check()
    assert str(planned.value) == str(in_order.value) and message in str(planned.value)
    assert not (tmp_path / "a").exists()  # checked before anything is written


@pytest.mark.parametrize("size", range(1, 40, 3))
def test_a_stray_quote_before_a_quoted_last_column_is_never_read_clean_and_wrong(tmp_path: Path, size: int) -> None:
    """The review's case: an inch mark in an unquoted field, then a quoted multi-line field as the
    last column; a cut inside it leaves a chunk ending in an unclosed quote, caught strictly."""
    path = tmp_path / "pairs.csv"
    rows = [
        "id,reference,candidate",
        'a,x,5" nodule',
        'b,y,"Findings: one.\nImpression: cardiomegaly, two."',
        *[f"c{i},ref {i},cand {i}" for i in range(10)],
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    stream = PairStream(path)
    want = _in_order(stream)
    got, clean = _by_chunks(stream, size)
    assert not clean or got == want


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        (
            "bom.jsonl",
            b'{"id":"a","reference":"x","candidate":"y"}\n\xef\xbb\xbf{"id":"b","reference":"x","candidate":"y"}\n',
            "jsonl",
        ),  # a BOM inside the file is text: not valid JSON there
        ("ws.csv", b"id,reference,candidate\na,x,y\n   \nb,x,y\n", "csv"),  # a line of spaces is a record
    ],
)
def test_what_the_reading_in_order_refuses_is_never_a_clean_chunk(tmp_path: Path, name: str, content: bytes, fmt: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError):
        PairStream(path).check()
    for size in (1, 5, 50):
        assert not _by_chunks(PairStream(path), size)[1]


def test_a_killed_runs_parts_folder_is_removed_by_the_next_run(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the parts folder of a run whose process is gone goes with the next
    run into the folder; one of a live process stays."""
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True, timeout=600
    )
    out = tmp_path / "out"
    dead = out / f".cxreval-parts-{gone.stdout.strip()}-abc"
    live = out / f".cxreval-parts-{os.getpid()}-xyz"
    for folder in (dead, live):
        folder.mkdir(parents=True)
        (folder / "000001-0.part.jsonl.gz").write_bytes(b"left over")
    path = _pairs_file(tmp_path, 200)
    evaluate_file(Evaluator().judge_engine, PairStream(path), out, workers=1, chunk_bytes=2_000)
    assert not dead.exists() and live.is_dir()
    assert (out / "scores.json").is_file()
