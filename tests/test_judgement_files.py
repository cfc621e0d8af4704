"""Compact outputs (issue 33): ``judgements.jsonl.gz`` keeps the rows that count in a score, with
evidence as offsets into the input, and every score read back from it is the score of the table
that was written; the full style, the Parquet twin and folders of cxreval 0.7 read alike."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cxreval import Evaluator, ReportPair
from cxreval.cli import example_path
from cxreval.evaluate import ResultsError, load_result
from cxreval.io import read_pairs
from cxreval.judge.files import (
    JUDGEMENTS,
    JUDGEMENTS_PARQUET,
    JudgementsFileError,
    RowsFormat,
    encode_members,
    encode_rows,
    read_rows,
)
from cxreval.judge.models import EntityJudgement
from cxreval.streaming import evaluate_to
from cxreval.testing.results import judgement_lines

SPANS = {"reference_span", "candidate_span"}


def _pairs(n: int = 300, seed: int = 1) -> list[ReportPair]:
    """The example's texts recombined, with a denial ("No pleural effusion.") and normal reports among them."""
    texts = sorted({t for p in read_pairs(example_path()) for t in (p.reference, p.candidate)})
    texts += ["No pleural effusion.", "Small left pleural effusion. No pneumothorax.", "The lungs are clear."]
    rng = random.Random(seed)
    return [ReportPair(pair_id=f"p{i}", reference=rng.choice(texts), candidate=rng.choice(texts)) for i in range(n)]


def _dump(rows: list[EntityJudgement]) -> list[dict]:
    return [r.model_dump(exclude=SPANS) for r in rows]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[ReportPair], object]:
    root = tmp_path_factory.mktemp("files")
    pairs = _pairs()
    result = Evaluator().evaluate(pairs)
    result.save(root / "compact")
    result.save(root / "full", rows="full")
    return root / "compact", root / "full", pairs, result


def test_compact_rows_are_the_rows_that_count_with_offsets(written) -> None:
    compact, full, pairs, result = written
    lines = judgement_lines(compact)
    kept = [r for r in result.judgements if not r.implied]
    assert len(lines) == len(kept) < len(result.judgements)  # the implied TN rows are left out
    texts = {p.pair_id: p for p in pairs}
    for line, row in zip(lines, kept, strict=True):
        assert line["entity"] == row.entity and line["presence"] == row.presence
        for side in ("reference", "candidate"):
            evidence = getattr(row, side)
            if evidence:  # the rule engine's evidence is always a slice of the report: written as offsets
                start, end = line[side]
                assert getattr(texts[row.pair_id], side)[start:end] == evidence
            else:
                assert side not in line
        assert "location" not in line or line["location"] != "not-available"  # defaults left out
    # no report text at all in the compact file, only offsets
    assert all(not isinstance(line.get(side), str) for line in lines for side in ("reference", "candidate"))
    # the full style is every row with its evidence as text, as judgements.jsonl held up to 0.7
    assert judgement_lines(full) == [json.loads(r.model_dump_json()) for r in result.judgements]
    assert (compact / JUDGEMENTS).stat().st_size < (full / JUDGEMENTS).stat().st_size / 3


def test_every_score_read_back_is_the_written_one(written) -> None:
    compact, full, pairs, result = written
    want = result.to_dict()
    for folder in (compact, full):
        for given in (None, pairs):
            back = load_result(folder, pairs=given)
            got = back.to_dict()
            assert got.pop("judgement_rows") in ("compact", "full")
            assert got == {k: v for k, v in want.items() if k != "judgement_rows"}
            assert back.errors.equals(result.errors)
    # with the input at hand, the evidence is shown again
    back = load_result(compact, pairs=pairs)
    assert _dump(back.judgements) == _dump([r for r in result.judgements if not r.implied])
    # without it, the evidence reads as empty text and its offsets: a denial still counts as one
    bare = load_result(compact)
    denied = [r for r in bare.judgements if r.presence == "FN" and r.candidate_span is not None]
    assert denied and all(r.candidate == "" and r.candidate_said for r in denied)


def test_the_streamed_compact_file_holds_the_rows_of_the_whole_table(tmp_path: Path, written) -> None:
    compact, _, pairs, _ = written
    evaluate_to(Evaluator(), tmp_path, iter(pairs), rows=RowsFormat.choose("compact"))
    assert judgement_lines(tmp_path) == judgement_lines(compact)
    assert pq.read_table(tmp_path / JUDGEMENTS_PARQUET).equals(pq.read_table(compact / JUDGEMENTS_PARQUET))


def test_the_parquet_twin_holds_the_same_rows(written) -> None:
    compact, full, _, _ = written
    for folder in (compact, full):
        table = pq.read_table(folder / JUDGEMENTS_PARQUET).to_pylist()
        lines = judgement_lines(folder)
        assert [(r["pair_id"], r["entity"], r["presence"]) for r in table] == [
            (r["pair_id"], r["entity"], r["presence"]) for r in lines
        ]
        for row, line in zip(table, lines, strict=True):
            for side in ("reference", "candidate"):
                value = line.get(side, "")
                if isinstance(value, list):
                    assert [row[f"{side}_start"], row[f"{side}_end"]] == value and row[side] is None
                else:
                    assert (row[side] or "") == value and row[f"{side}_start"] is None
            assert row["location"] == line.get("location", "not-available")


def test_texts_that_are_not_the_input_are_refused(written) -> None:
    compact, _, pairs, _ = written
    other = [p.model_copy(update={"candidate": p.candidate + " Tiny."}) for p in pairs]
    with pytest.raises(ResultsError, match="candidates_sha256"):
        load_result(compact, pairs=other)
    with pytest.raises(ResultsError, match="not in the pairs given"):
        load_result(compact, pairs=pairs[:10])


def test_offsets_past_the_text_name_the_file_and_line(tmp_path: Path) -> None:
    row = EntityJudgement(pair_id="1", entity="pneumothorax", presence="FN", reference="Large pneumothorax.")
    path = tmp_path / JUDGEMENTS
    path.write_bytes(encode_rows([row], {"1": ("Large pneumothorax.", "")}))
    assert read_rows(path, {"1": ("Large pneumothorax.", "")})[0].reference == "Large pneumothorax."
    with pytest.raises(JudgementsFileError, match=rf"{JUDGEMENTS}, line 1: .*past the end"):
        read_rows(path, {"1": ("Short.", "")})
    path.write_bytes(b"not gzip at all")
    with pytest.raises(JudgementsFileError, match="cannot be read"):
        read_rows(path)


def test_a_quote_that_is_not_in_the_text_is_kept_as_text(tmp_path: Path) -> None:
    """An LLM's quote may not be a slice of the report: it is written as it is."""
    row = EntityJudgement(pair_id="1", entity="pneumothorax", presence="FN", reference="a large pneumothorax")
    path = tmp_path / JUDGEMENTS
    path.write_bytes(encode_rows([row], {"1": ("Large right pneumothorax.", "Normal.")}))
    assert json.loads(gzip.decompress(path.read_bytes()))["reference"] == "a large pneumothorax"
    assert read_rows(path)[0].reference == "a large pneumothorax"


def test_members_join_into_one_file(tmp_path: Path, written) -> None:
    _, _, pairs, result = written
    members = list(encode_members(result.judgements, {p.pair_id: (p.reference, p.candidate) for p in pairs}, pairs=7))
    assert len(members) > 10
    path = tmp_path / JUDGEMENTS
    path.write_bytes(b"".join(members))
    assert _dump(read_rows(path, {p.pair_id: (p.reference, p.candidate) for p in pairs})) == _dump(
        [r for r in result.judgements if not r.implied]
    )


def test_a_folder_of_cxreval_0_7_still_reads(tmp_path: Path, written) -> None:
    _, full, _, result = written
    folder = tmp_path / "old"
    folder.mkdir()
    for name in ("errors.csv", "scores.json"):
        (folder / name).write_bytes((full / name).read_bytes())
    (folder / "judgements.jsonl").write_bytes(gzip.decompress((full / JUDGEMENTS).read_bytes()))
    back = load_result(folder)
    assert back.metrics() == result.metrics() and _dump(back.judgements) == _dump(result.judgements)
    # a new run into that folder replaces the old file (it is not left beside the new one)
    result.save(folder)
    assert not (folder / "judgements.jsonl").exists() and (folder / JUDGEMENTS).is_file()


def test_the_cli_writes_the_style_asked_and_refuses_parquet_without_pyarrow(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "cxreval", "evaluate", "--example", "--json"]
    done = subprocess.run(
        [*run, "--out", str(tmp_path / "full"), "--rows", "full", "--no-parquet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert any(r["presence"] == "TN" for r in judgement_lines(tmp_path / "full"))
    assert not (tmp_path / "full" / JUDGEMENTS_PARQUET).exists()
    assert json.loads((tmp_path / "full" / "scores.json").read_text())["judgement_rows"] == "full"
    # a Python where pyarrow cannot be imported: --parquet is an error, the default writes none
    no_pyarrow = "import sys; sys.modules['pyarrow'] = None; from cxreval.cli import app; app()"
    base = [sys.executable, "-c", no_pyarrow, "evaluate", "--example", "--json"]
    refused = subprocess.run(
        [*base, "--out", str(tmp_path / "p"), "--parquet"], capture_output=True, text=True, check=False, timeout=600
    )
    assert refused.returncode == 2 and "pip install 'cxreval[parquet]'" in refused.stderr
    assert not (tmp_path / "p").exists()
    done = subprocess.run([*base, "--out", str(tmp_path / "core")], capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "core").iterdir() if not p.name.startswith(".")) == [
        "errors.csv",
        JUDGEMENTS,
        "scores.json",
    ]


def test_a_folder_read_without_its_pairs_and_saved_again_keeps_its_offsets(written, tmp_path: Path) -> None:
    compact, _, pairs, result = written
    again = load_result(compact, result.ontology)  # no pairs: evidence stays offsets
    again.save(tmp_path / "again", parquet=True)
    assert judgement_lines(tmp_path / "again") == judgement_lines(compact)
    texts = {p.pair_id: (p.reference, p.candidate) for p in pairs}
    assert _dump(read_rows(tmp_path / "again" / JUDGEMENTS, texts)) == _dump(read_rows(compact / JUDGEMENTS, texts))
    table = pq.read_table(tmp_path / "again" / JUDGEMENTS_PARQUET).to_pylist()
    with_offsets = [r for r in table if r["candidate_start"] is not None]
    assert with_offsets and all(r["candidate"] is None for r in with_offsets)
    for r in with_offsets:
        assert texts[r["pair_id"]][1][r["candidate_start"] : r["candidate_end"]]


def test_damaged_compressed_rows_are_named_not_a_traceback(written, tmp_path: Path) -> None:
    compact = written[0]
    data = bytearray((compact / JUDGEMENTS).read_bytes())
    data[12] ^= 0xFF  # inside the first member's deflate stream
    bad = tmp_path / JUDGEMENTS
    bad.write_bytes(bytes(data))
    with pytest.raises(JudgementsFileError, match=str(bad)):
        read_rows(bad)
