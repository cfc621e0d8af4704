"""Tests for cxreval.io: every format, every error path, positions in messages.

All report sentences here are invented for the tests.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pandas as pd
import pydantic
import pytest

from cxreval.io import (
    InputError,
    InputProblem,
    ReportPair,
    read_pair_files,
    read_pairs,
    read_reports,
)

REF1 = "Heart size is normal. No pleural effusion."
CAND1 = "Normal heart size. No effusion."
REF2 = "Mild bibasilar atelectasis. No pneumothorax."
CAND2 = "Bibasilar atelectasis."

PAIRS = [
    {"id": "s1", "reference": REF1, "candidate": CAND1},
    {"id": "s2", "reference": REF2, "candidate": CAND2},
]
EXPECTED = [
    ReportPair(pair_id="s1", reference=REF1, candidate=CAND1),
    ReportPair(pair_id="s2", reference=REF2, candidate=CAND2),
]


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def problems_of(excinfo: pytest.ExceptionInfo[InputError]) -> list[InputProblem]:
    return excinfo.value.problems


def find(problems: list[InputProblem], **attrs: object) -> InputProblem:
    """The single problem whose attributes match ``attrs``."""
    hits = [p for p in problems if all(getattr(p, k) == v for k, v in attrs.items())]
    assert len(hits) == 1, f"expected one problem with {attrs}, got {hits} among {problems}"
    return hits[0]


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


def test_csv_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    pd.DataFrame(PAIRS).to_csv(path, index=False)
    assert read_pairs(path) == EXPECTED


def test_tsv_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    pd.DataFrame(PAIRS).to_csv(path, sep="\t", index=False)
    assert read_pairs(path) == EXPECTED


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson"])
def test_jsonl_round_trip(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / f"pairs{suffix}", "\n".join(json.dumps(p) for p in PAIRS) + "\n\n")
    assert read_pairs(path) == EXPECTED


def test_parquet_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "pairs.parquet"
    pd.DataFrame(PAIRS).to_parquet(path, index=False)
    assert read_pairs(path) == EXPECTED


def test_json_list_round_trip(tmp_path: Path) -> None:
    path = write(tmp_path / "pairs.json", json.dumps(PAIRS, indent=2))
    assert read_pairs(path) == EXPECTED


def test_format_argument_overrides_suffix(tmp_path: Path) -> None:
    path = tmp_path / "pairs.txt"
    pd.DataFrame(PAIRS).to_csv(path, sep="\t", index=False)
    assert read_pairs(path, format="tsv") == EXPECTED
    assert read_pairs(path, format="TSV") == EXPECTED


def test_text_is_stripped_but_otherwise_kept_and_na_strings_survive(tmp_path: Path) -> None:
    path = write(
        tmp_path / "pairs.csv",
        'id,reference,candidate\n NA ,"  Line one.\nLine two,  with comma.  ",null\n7,N/A,None\n',
    )
    pairs = read_pairs(path)
    assert [p.pair_id for p in pairs] == ["NA", "7"]
    assert pairs[0].reference == "Line one.\nLine two,  with comma."
    assert pairs[0].candidate == "null"
    assert (pairs[1].reference, pairs[1].candidate) == ("N/A", "None")


def test_custom_columns_and_meta(tmp_path: Path) -> None:
    path = write(
        tmp_path / "preds.csv",
        f"study,gold,generated,model,site,unused\na,{REF1},{CAND1.replace(',', '')},m1, north ,x\nb,{REF2},{CAND2},m2,,y\n",
    )
    pairs = read_pairs(path, id_col="study", reference_col="gold", candidate_col="generated", meta_cols=["model", "site"])
    assert [p.pair_id for p in pairs] == ["a", "b"]
    assert pairs[0].reference == REF1
    assert pairs[0].meta == {"model": "m1", "site": "north"}
    assert pairs[1].meta == {"model": "m2", "site": ""}


def test_jsonl_meta_numbers_and_integer_ids(tmp_path: Path) -> None:
    rows = [
        {"id": 17, "reference": REF1, "candidate": CAND1, "seed": 3, "temp": 0.5, "ok": True, "note": None},
    ]
    path = write(tmp_path / "p.jsonl", "\n".join(map(json.dumps, rows)))
    [pair] = read_pairs(path, meta_cols=["seed", "temp", "ok", "note"])
    assert pair.pair_id == "17"
    assert pair.meta == {"seed": "3", "temp": "0.5", "ok": "true", "note": ""}


def test_report_pair_is_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        EXPECTED[0].pair_id = "other"  # type: ignore[misc]


def rexrank_doc() -> dict[str, dict[str, object]]:
    def study(findings: str, impression: str) -> dict[str, object]:
        return {
            "key_image_path": "x/0.png",
            "image_path": ["x/0.png"],
            "report": f"Findings: {findings} Impression: {impression}",
            "section_findings": findings,
            "section_impression": impression,
            "split": "test",
            "frontal_lateral": ["Frontal"],
            "context": "Indication: cough Comparison: None.",
        }

    return {
        "CXR1_IM-0001": study("Lungs are clear.", "No acute disease."),
        "CXR2_IM-0002": study("Small left effusion.", "Left effusion."),
    }


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("report", "Findings: Lungs are clear. Impression: No acute disease."),
        ("findings", "Lungs are clear."),
        ("impression", "No acute disease."),
    ],
)
def test_rexrank_layout_sections(tmp_path: Path, section: str, expected: str) -> None:
    path = write(tmp_path / "rex.json", json.dumps(rexrank_doc()))
    reports = read_reports(path, section=section)
    assert list(reports) == ["CXR1_IM-0001", "CXR2_IM-0002"]
    assert reports["CXR1_IM-0001"] == expected


def test_read_reports_tabular_custom_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "refs.csv", "uid,text\n2, Lungs are clear. \n1,No acute disease.\n")
    assert read_reports(path, id_col="uid", text_col="text") == {"2": "Lungs are clear.", "1": "No acute disease."}


def test_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + f"id,reference,candidate\ns1,{REF1},{CAND1.replace(',', '')}\n".encode())
    [pair] = read_pairs(path)
    assert pair.pair_id == "s1"
    jpath = tmp_path / "bom.jsonl"
    jpath.write_bytes(b"\xef\xbb\xbf" + json.dumps(PAIRS[0]).encode() + b"\n")
    assert read_pairs(jpath) == EXPECTED[:1]


def test_crlf_csv(tmp_path: Path) -> None:
    path = tmp_path / "crlf.csv"
    path.write_bytes(b'id,reference,candidate\r\ns1,"a\r\nb",c\r\ns2,,d\r\n')
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    p = find(problems_of(exc), field="reference")
    assert (p.row, p.unit) == (4, "line")


# ---------------------------------------------------------------------------------------------
# File-level errors
# ---------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    assert "nope.csv" in str(exc.value)
    assert "file not found" in str(exc.value)
    with pytest.raises(InputError, match="file not found"):
        read_pairs(tmp_path / "nope.parquet")


def test_input_error_is_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        read_reports(tmp_path / "nope.jsonl")


def test_unknown_suffix(tmp_path: Path) -> None:
    path = write(tmp_path / "pairs.xlsx", "whatever")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    msg = str(exc.value)
    assert "pairs.xlsx" in msg and "'.xlsx'" in msg
    for fmt in ("csv", "tsv", "jsonl", ".ndjson", "parquet", "json"):
        assert fmt in msg


def test_unknown_format_argument(tmp_path: Path) -> None:
    path = write(tmp_path / "pairs.csv", "id\n")
    with pytest.raises(InputError, match="unknown format 'xml'"):
        read_pairs(path, format="xml")


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file is empty"):
        read_pairs(write(tmp_path / "empty.csv", ""))
    with pytest.raises(InputError, match="file has no records"):
        read_pairs(write(tmp_path / "header.csv", "id,reference,candidate\n"))
    with pytest.raises(InputError, match="file has no records"):
        read_pairs(write(tmp_path / "blank.jsonl", "\n\n"))


def test_undecodable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    head = f"id,reference,candidate\ns1,{REF1.replace(',', '')},ok\n".encode()
    path.write_bytes(head + b"s2,caf\xe9,ok\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = problems_of(exc)
    offset = len(head) + len(b"s2,caf")
    assert (p.file, p.row, p.unit) == (str(path), 3, "line")
    assert "not valid UTF-8" in p.message
    assert "0xe9" in p.message and f"byte offset {offset}" in p.message
    assert str(p).startswith(f"{path}, line 3: ")


def test_undecodable_bytes_after_bom_counts_from_file_start(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "\xff"}\n')
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = problems_of(exc)
    assert p.row == 1 and "byte offset 11" in p.message and "0xff" in p.message


def test_utf16_hint(tmp_path: Path) -> None:
    path = tmp_path / "u16.csv"
    path.write_bytes("id,reference,candidate\n".encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16"):
        read_pairs(path)


def test_not_parquet(tmp_path: Path) -> None:
    path = write(tmp_path / "fake.parquet", "id,reference\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    assert "fake.parquet" in str(exc.value) and "cannot read as Parquet" in str(exc.value)


def test_invalid_json_document(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", '[\n  {"id": "a",\n  oops\n]')
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = problems_of(exc)
    assert p.row == 3 and "not valid JSON" in p.message


def test_json_top_level_scalar(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="top level must be a list of objects"):
        read_pairs(write(tmp_path / "x.json", "42"))


def test_read_pairs_rejects_keyed_layout(tmp_path: Path) -> None:
    path = write(tmp_path / "rex.json", json.dumps(rexrank_doc()))
    with pytest.raises(InputError, match="give it as --refs or --cands"):
        read_pairs(path)


# ---------------------------------------------------------------------------------------------
# Column and value errors
# ---------------------------------------------------------------------------------------------


def test_missing_column_lists_present_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", "ID,reference,candidat\ns1,a,b\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert len(probs) == 2
    cand = find(probs, field="candidate")
    assert cand.row is None
    assert "missing column" in cand.message
    assert "'ID', 'reference', 'candidat'" in cand.message
    assert "did you mean 'candidat'" in cand.message
    assert "did you mean 'ID'" in find(probs, field="id").message
    assert str(cand).startswith(f"{path}, field 'candidate': missing column")


def test_missing_column_jsonl_and_missing_field_in_some_rows(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "reference": REF1, "candidate": CAND1},
        {"id": "b", "reference": REF2},
    ]
    path = write(tmp_path / "p.jsonl", "\n".join(map(json.dumps, rows)))
    with pytest.raises(InputError) as exc:
        read_pairs(path, meta_cols=["model"])
    probs = problems_of(exc)
    assert "missing column" in find(probs, field="model").message
    missing = find(probs, field="candidate")
    assert (missing.row, missing.unit, missing.id, missing.message) == (2, "line", "b", "missing field")


def test_missing_column_parquet(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pd.DataFrame({"id": ["a"], "reference": [REF1], "generated": [CAND1]}).to_parquet(path)
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = problems_of(exc)
    assert p.field == "candidate" and "'generated'" in p.message


def test_duplicate_ids_name_every_repeat(tmp_path: Path) -> None:
    path = write(
        tmp_path / "preds.csv",
        "id,reference,candidate\n"
        "a,r1,c1\n"  # line 2
        "b,r2,c2\n"  # line 3
        " a ,r3,c3\n"  # line 4: same id after stripping
        "a,r4,c4\n",  # line 5
    )
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert [(p.row, p.field) for p in probs] == [(4, "id"), (5, "id")]
    for p in probs:
        assert "duplicate id 'a'" in p.message and "first at line 2" in p.message
    assert str(probs[0]) == f"{path}, line 4 (id 'a'), field 'id': duplicate id 'a' (first at line 2)"


def test_empty_id(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", "id,reference,candidate\n  ,r1,c1\ns2,r2,c2\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = problems_of(exc)
    assert (p.row, p.field, p.message) == (2, "id", "empty id")


def test_empty_and_whitespace_reports(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", 'id,reference,candidate\ns1,r1,\ns2,"  \n ",c2\ns3,r3,c3\n')
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert len(probs) == 2
    empty = find(probs, field="candidate")
    assert (empty.row, empty.id, empty.message) == (2, "s1", "empty report")
    assert str(empty) == f"{path}, line 2 (id 's1'), field 'candidate': empty report"
    blank = find(probs, field="reference")
    assert (blank.row, blank.id) == (3, "s2") and "whitespace only" in blank.message


def test_non_text_reports_in_jsonl(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "a", "reference": 3, "candidate": CAND1}),
        json.dumps({"id": "b", "reference": REF1, "candidate": None}),
        json.dumps({"id": "c", "reference": [REF1], "candidate": CAND1}),
        json.dumps({"id": "d", "reference": REF1, "candidate": CAND1}),
        json.dumps({"id": 1.5, "reference": REF1, "candidate": {"text": CAND1}}),
    ]
    path = write(tmp_path / "p.jsonl", "\n".join(lines))
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert "got number" in find(probs, row=1).message
    assert "got null" in find(probs, row=2).message
    assert "got array" in find(probs, row=3).message
    assert "got number" in find(probs, row=5, field="id").message
    assert "got object" in find(probs, row=5, field="candidate").message
    assert len(probs) == 5


def test_parquet_non_string_and_null_values(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pd.DataFrame({"id": ["a", "b", "c"], "reference": [REF1, None, REF2], "candidate": [1, 2, 3]}).to_parquet(path, index=False)
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    cands = [p for p in probs if p.field == "candidate"]
    assert [(p.row, p.unit) for p in cands] == [(1, "row"), (2, "row"), (3, "row")]
    assert all("got number" in p.message for p in cands)
    null = find(probs, field="reference")
    assert null.row == 2 and "got null" in null.message
    assert str(null) == f"{path}, row 2 (id 'b'), field 'reference': expected report text, got null"


def test_parquet_integer_ids_become_strings(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pd.DataFrame({"id": [10, 11], "reference": [REF1, REF2], "candidate": [CAND1, CAND2]}).to_parquet(path)
    assert [p.pair_id for p in read_pairs(path)] == ["10", "11"]


def test_jsonl_bad_json_and_non_object_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.jsonl",
        json.dumps(PAIRS[0]) + "\n"
        "\n"
        '{"id": "x", "reference": \n'  # line 3
        '["not", "an", "object"]\n'  # line 4
         + json.dumps(PAIRS[1]) + "\n",
    )
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert len(probs) == 2
    assert "not valid JSON" in find(probs, row=3).message
    assert "not a JSON object (got array)" in find(probs, row=4).message
    assert all(p.unit == "line" and p.file == str(path) for p in probs)


def test_json_list_non_object_item(tmp_path: Path) -> None:
    path = write(tmp_path / "p.json", json.dumps([PAIRS[0], "oops", {**PAIRS[1], "candidate": ""}]))
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert find(probs, row=2, unit="item").message == "item is not a JSON object (got string)"
    assert str(find(probs, row=3)) == f"{path}, item 3 (id 's2'), field 'candidate': empty report"


def test_several_problems_reported_together(tmp_path: Path) -> None:
    path = write(
        tmp_path / "preds.csv",
        "id,reference,candidate\n"
        "a,r1,c1\n"  # 2 ok
        ",r2,c2\n"  # 3 empty id
        "c,,c3\n"  # 4 empty reference
        "a,r4,c4\n"  # 5 duplicate
        "e,r5, \n",  # 6 whitespace candidate
    )
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert [(p.row, p.field) for p in probs] == [(3, "id"), (4, "reference"), (5, "id"), (6, "candidate")]
    msg = str(exc.value)
    assert msg.startswith("4 problems in input:")
    for row in (3, 4, 5, 6):
        assert f"line {row}" in msg


def test_listing_is_capped(tmp_path: Path) -> None:
    body = "".join(f"s{i},r,\n" for i in range(25))
    path = write(tmp_path / "preds.csv", "id,reference,candidate\n" + body)
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    assert len(exc.value.problems) == 25
    msg = str(exc.value)
    assert msg.startswith("25 problems in input:")
    assert msg.count("empty report") == 20
    assert msg.rstrip().endswith("... and 5 more problems")


def test_input_error_pickles() -> None:
    err = InputError([InputProblem(file="f.csv", row=2, field="id", message="empty id", unit="line")])
    again = pickle.loads(pickle.dumps(err))
    assert again.problems == err.problems and str(again) == str(err)


# ---------------------------------------------------------------------------------------------
# CSV structure and row numbering
# ---------------------------------------------------------------------------------------------


def test_multiline_quoted_field_row_numbering(tmp_path: Path) -> None:
    path = write(
        tmp_path / "preds.csv",
        "id,reference,candidate\n"  # line 1
        's1,"Findings: clear lungs.\n\nImpression: normal.",c1\n'  # lines 2-4
        "\n"  # line 5 (blank, ignored)
        's2,"two\nlines",\n'  # lines 6-7, empty candidate
        "s3,r3,\n",  # line 8, empty candidate
    )
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert [(p.id, p.row) for p in probs] == [("s2", 6), ("s3", 8)]


def test_ragged_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", "id,reference,candidate\ns1,r1\ns2,r2,c2,extra\ns3,r3,c3\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = problems_of(exc)
    assert len(probs) == 2  # the short row is not reported a second time as a missing field
    assert find(probs, row=2).message == "record has 2 fields, the header has 3"
    assert find(probs, row=3).message == "record has 4 fields, the header has 3"


def test_unclosed_quote(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", 'id,reference,candidate\ns1,"r1,c1\ns2,r2,c2\n')
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    probs = exc.value.problems
    assert any(p.row == 2 and "quoted field is never closed" in p.message for p in probs)


def test_duplicate_header_column(tmp_path: Path) -> None:
    path = write(tmp_path / "preds.csv", "id,reference,candidate,candidate\ns1,r1,c1,c2\n")
    with pytest.raises(InputError) as exc:
        read_pairs(path)
    [p] = exc.value.problems
    assert (p.row, p.field) == (1, "candidate") and "2 times" in p.message


# ---------------------------------------------------------------------------------------------
# ReXrank layout errors
# ---------------------------------------------------------------------------------------------


def test_rexrank_empty_section_names_study_and_field(tmp_path: Path) -> None:
    doc = rexrank_doc()
    doc["CXR2_IM-0002"]["section_impression"] = "  "
    doc["CXR1_IM-0001"]["section_impression"] = None
    path = write(tmp_path / "rex.json", json.dumps(doc))
    assert len(read_reports(path, section="findings")) == 2
    with pytest.raises(InputError) as exc:
        read_reports(path, section="impression")
    probs = problems_of(exc)
    assert len(probs) == 2
    p = find(probs, id="CXR2_IM-0002")
    assert (p.field, p.row) == ("section_impression", None)
    assert str(p) == f"{path}, id 'CXR2_IM-0002', field 'section_impression': empty report (whitespace only)"
    assert "got null" in find(probs, id="CXR1_IM-0001").message


def test_rexrank_missing_field_and_bad_study(tmp_path: Path) -> None:
    doc: dict[str, object] = dict(rexrank_doc())
    del doc["CXR1_IM-0001"]["section_findings"]  # type: ignore[attr-defined]
    doc["CXR3"] = "not a study"
    path = write(tmp_path / "rex.json", json.dumps(doc))
    with pytest.raises(InputError) as exc:
        read_reports(path, section="findings")
    probs = problems_of(exc)
    assert find(probs, id="CXR1_IM-0001").message == "missing field"
    assert "not a JSON object" in find(probs, id="CXR3").message


def test_rexrank_duplicate_and_empty_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rex.json",
        '{"a": {"report": "One."}, "a": {"report": "Two."}, " b": {"report": "Three."},'
        ' "b": {"report": "Four."}, "": {"report": "Five."}}',
    )
    with pytest.raises(InputError) as exc:
        read_reports(path, section="report")
    probs = problems_of(exc)
    assert "more than once" in find(probs, id="a").message
    assert "duplicate id 'b'" in find(probs, id="b").message
    assert find(probs, id="").message == "empty id"


def test_unknown_section(tmp_path: Path) -> None:
    path = write(tmp_path / "rex.json", json.dumps(rexrank_doc()))
    with pytest.raises(ValueError, match="section must be one of"):
        read_reports(path, section="context")


# ---------------------------------------------------------------------------------------------
# Two-file join
# ---------------------------------------------------------------------------------------------


def test_join_success_keeps_candidate_order(tmp_path: Path) -> None:
    refs = write(tmp_path / "refs.json", json.dumps(rexrank_doc()))
    cands = write(
        tmp_path / "cands.csv",
        "id,candidate\nCXR2_IM-0002,Left effusion is present.\n CXR1_IM-0001 ,Clear lungs.\n",
    )
    pairs = read_pair_files(refs, cands, section="findings")
    assert pairs == [
        ReportPair(pair_id="CXR2_IM-0002", reference="Small left effusion.", candidate="Left effusion is present."),
        ReportPair(pair_id="CXR1_IM-0001", reference="Lungs are clear.", candidate="Clear lungs."),
    ]


def test_join_custom_columns_and_formats(tmp_path: Path) -> None:
    refs = write(tmp_path / "refs.dat", "uid\tgold\n1\tLungs are clear.\n")
    cands = write(tmp_path / "cands.out", json.dumps({"uid": 1, "gen": "Clear."}) + "\n")
    pairs = read_pair_files(
        refs,
        cands,
        id_col="uid",
        reference_col="gold",
        candidate_col="gen",
        reference_format="tsv",
        candidate_format="jsonl",
    )
    assert pairs == [ReportPair(pair_id="1", reference="Lungs are clear.", candidate="Clear.")]


def test_join_one_sided_ids_both_directions(tmp_path: Path) -> None:
    refs = write(tmp_path / "refs.csv", "id,reference\na,r1\nb,r2\nc,r3\n")
    cands = write(tmp_path / "cands.csv", "id,candidate\nc,c3\nz,c9\na,c1\n")
    with pytest.raises(InputError) as exc:
        read_pair_files(refs, cands)
    probs = problems_of(exc)
    assert len(probs) == 2
    only_cand = find(probs, id="z")
    assert (only_cand.file, only_cand.row) == (str(cands), 3)
    assert only_cand.message == f"id has no reference in {refs}"
    only_ref = find(probs, id="b")
    assert (only_ref.file, only_ref.row) == (str(refs), 3)
    assert only_ref.message == f"id has no candidate in {cands}"


def test_join_refs_only_direction(tmp_path: Path) -> None:
    refs = write(tmp_path / "refs.jsonl", '{"id": "a", "reference": "r"}\n{"id": "b", "reference": "r"}\n')
    cands = write(tmp_path / "cands.jsonl", '{"id": "a", "candidate": "c"}\n')
    with pytest.raises(InputError) as exc:
        read_pair_files(refs, cands)
    [p] = problems_of(exc)
    assert (p.file, p.row, p.id) == (str(refs), 2, "b") and "no candidate" in p.message


def test_join_reports_problems_of_both_files(tmp_path: Path) -> None:
    refs = write(tmp_path / "refs.csv", "id,reference\na,\n")
    cands = write(tmp_path / "cands.csv", "id,cand\na,c\n")
    with pytest.raises(InputError) as exc:
        read_pair_files(refs, cands)
    probs = problems_of(exc)
    assert {p.file for p in probs} == {str(refs), str(cands)}
    assert find(probs, file=str(refs)).message == "empty report"
    assert "did you mean 'cand'" in find(probs, file=str(cands)).message


# ---------------------------------------------------------------------------------------------
# Real ReXrank IU X-ray test set (shared data, not part of the repository)
# ---------------------------------------------------------------------------------------------


def _rexrank_iu_test() -> Path | None:
    candidates = []
    if os.environ.get("CXREVAL_DATA_DIR"):
        candidates.append(Path(os.environ["CXREVAL_DATA_DIR"]) / "rexrank-iu/ReXRank_IUXray_test.json")
    candidates.append(Path(__file__).resolve().parents[2] / "shared/data/rexrank-iu/ReXRank_IUXray_test.json")
    return next((p for p in candidates if p.is_file()), None)


@pytest.mark.parametrize("section", ["report", "findings", "impression"])
def test_real_rexrank_iu_test_set(section: str) -> None:
    path = _rexrank_iu_test()
    if path is None:
        pytest.skip("ReXRank_IUXray_test.json not available (set CXREVAL_DATA_DIR)")
    reports = read_reports(path, section=section)
    assert len(reports) == 590
    assert all(isinstance(t, str) and t and t == t.strip() for t in reports.values())
    assert all(k.startswith("CXR") for k in reports)
    if section == "report":
        assert all(t.startswith("Findings:") and "Impression:" in t for t in reports.values())
