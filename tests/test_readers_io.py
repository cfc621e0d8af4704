"""Every reader of user tables goes through :mod:`cxreval.io` and its :class:`InputError`.

Per reader (human ratings, ReXVal, perturbation suites, ``meta perturb --refs``, the IU X-ray
gold standard): a broken file raises InputError naming file, position and field, with every
problem listed; the ``cxreval meta`` commands print them and exit 2 without a traceback; and no
module under ``src/cxreval`` but ``io.py`` parses tables itself (an ``ast`` walk, with an
explicit allow-list). All report sentences here are invented for the tests.
"""

from __future__ import annotations

import ast
import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import cxreval
from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.io import InputError
from cxreval.meta.human import RexvalColumns, read_plain_ratings, read_rexval
from cxreval.meta.perturb import PerturbedPair, read_references, read_suite, write_suite

PLAIN_HEAD = ["id", "reference", "candidate", "rater_1", "rater_2"]


def write_csv(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return path


def where(exc: pytest.ExceptionInfo[InputError]) -> set[tuple[str, int | None, str | None]]:
    """(file name, position, field) of every problem raised."""
    return {(Path(p.file).name, p.row, p.field) for p in exc.value.problems}


# ------------------------------------------------------------------------------------------
# meta human: plain ratings
# ------------------------------------------------------------------------------------------


def test_plain_ratings_list_every_problem(tmp_path: Path) -> None:
    bad = write_csv(
        tmp_path / "ratings.csv",
        [
            PLAIN_HEAD,
            ["p1", "Small left effusion.", "No effusion.", 1, 2],
            ["p2", "", "No effusion.", 1, "two"],  # line 3: empty report, rating not a number
            ["p1", "Mild edema.", "Edema.", 0, 0],  # line 4: id given twice
            ["p3", "Clear lungs.", "   ", "", 1],  # line 5: whitespace-only candidate
        ],
    )
    with pytest.raises(InputError) as exc:
        read_plain_ratings(bad)
    assert where(exc) == {
        ("ratings.csv", 3, "reference"),
        ("ratings.csv", 3, "rater_2"),
        ("ratings.csv", 4, "id"),
        ("ratings.csv", 5, "candidate"),
    }
    text = str(exc.value)
    assert text.startswith("4 problems in input:")
    assert "ratings.csv, line 3 (id 'p2'), field 'rater_2': 'two' is not a number" in text
    assert "ratings.csv, line 4 (id 'p1'), field 'id': duplicate id 'p1' (first at line 2)" in text
    assert "line 3 (id 'p2'), field 'reference': empty report" in text


def test_plain_ratings_missing_column(tmp_path: Path) -> None:
    bad = write_csv(tmp_path / "r.csv", [["id", "reference", "cand", "rater_1"], ["p1", "A.", "B.", 1]])
    with pytest.raises(InputError, match=r"r.csv, field 'candidate': missing column; .*did you mean 'cand'"):
        read_plain_ratings(bad)


def test_plain_ratings_read_jsonl_and_parquet_like_csv(tmp_path: Path) -> None:
    rows = [
        {"id": "p1", "reference": "Small effusion.", "candidate": "No effusion.", "rater_1": 1, "rater_2": 2},
        {"id": "p2", "reference": "Clear lungs.", "candidate": "Clear lungs.", "rater_1": 0, "rater_2": None},
    ]
    from_csv = read_plain_ratings(
        write_csv(tmp_path / "r.csv", [PLAIN_HEAD, *[["" if v is None else v for v in r.values()] for r in rows]])
    )
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    parquet = tmp_path / "r.parquet"
    pd.DataFrame(rows).to_parquet(parquet)
    for path in (jsonl, parquet):
        got = read_plain_ratings(path)
        assert got.model_dump(exclude={"source", "counts"}) == from_csv.model_dump(exclude={"source", "counts"})
        assert str(got.counts) == str(from_csv.counts)  # NaN where rater 2 gave none
    jsonl.write_text(json.dumps({**rows[0], "reference": 3}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"r.jsonl, line 1 \(id 'p1'\), field 'reference': expected report, got "):
        read_plain_ratings(jsonl)


# ------------------------------------------------------------------------------------------
# meta human: ReXVal
# ------------------------------------------------------------------------------------------


def rexval_reports(path: Path, rows: list[list[object]]) -> Path:
    return write_csv(path, [["study_id", "gt_report", "radgraph", "bleu"], *rows])


def rexval_ratings(path: Path, rows: list[list[object]]) -> Path:
    return write_csv(
        path, [["study_number", "candidate_type", "rater_index", "error_category", "clinically_significant", "num_errors"], *rows]
    )


COLS = RexvalColumns(candidate_types=("radgraph", "bleu"))


def test_rexval_lists_the_problems_of_both_files(tmp_path: Path) -> None:
    reports = rexval_reports(
        tmp_path / "reports.csv",
        [
            ["s1", "Small effusion.", "Small effusion.", "Large effusion."],
            ["s1", "Mild edema.", "Edema.", "No edema."],  # line 3: study id twice
            ["s2", "Clear lungs.", "", "Clear."],  # line 4: empty candidate
        ],
    )
    ratings = rexval_ratings(
        tmp_path / "ratings.csv",
        [
            [1, "radgraph", 1, 1, "True", 0],
            [1, "bleu", 1, 1, "maybe", "1.5x"],  # line 3: significance, count
            [2, "", 1, 1, "False", 1],  # line 4: no candidate type
        ],
    )
    with pytest.raises(InputError) as exc:
        read_rexval(reports, ratings, columns=COLS, significance="significant")
    assert where(exc) == {
        ("reports.csv", 3, "study_id"),
        ("reports.csv", 4, "radgraph"),
        ("ratings.csv", 3, "clinically_significant"),
        ("ratings.csv", 3, "num_errors"),
        ("ratings.csv", 4, "candidate_type"),
    }
    assert "ratings.csv, line 3, field 'num_errors': '1.5x' is not a number" in str(exc.value)


def test_rexval_ratings_that_match_no_report(tmp_path: Path) -> None:
    reports = rexval_reports(
        tmp_path / "reports.csv",
        [["s1", "Small effusion.", "Small effusion.", "Effusion."], ["s2", "Clear lungs.", "Clear.", "Clear lungs."]],
    )
    ratings = rexval_ratings(
        tmp_path / "ratings.csv",
        [
            [1, "radgraph", 1, 1, "True", 0],
            [2, "s_emb", 1, 1, "True", 1],  # no such candidate
            [3, "bleu", 1, 1, "True", 1],
        ],
    )  # no third study
    with pytest.raises(InputError) as exc:
        read_rexval(reports, ratings, columns=COLS)
    assert "ratings.csv, line 4, field 'study_number': study number 3 is outside the 2 studies" in str(exc.value)
    ratings = rexval_ratings(tmp_path / "ratings.csv", [[1, "radgraph", 1, 1, "True", 0], [2, "s_emb", 1, 1, "True", 1]])
    with pytest.raises(
        InputError,
        match=r"ratings.csv, line 3, field 'candidate_type': no report for study 's2', "
        r"candidate 's_emb'",
    ):
        read_rexval(reports, ratings, columns=COLS)
    # asking for significant errors needs the column that says so
    no_sig = write_csv(
        tmp_path / "nosig.csv", [["study_number", "candidate_type", "rater_index", "num_errors"], [1, "radgraph", 1, 0]]
    )
    with pytest.raises(InputError, match=r"nosig.csv, field 'clinically_significant': missing column"):
        read_rexval(reports, no_sig, columns=COLS, significance="significant")


# ------------------------------------------------------------------------------------------
# meta perturb / meta score: references and suites
# ------------------------------------------------------------------------------------------


def test_references_list_every_problem(tmp_path: Path) -> None:
    bad = write_csv(tmp_path / "refs.csv", [["id", "reference"], ["a", "Small effusion."], ["b", " "], ["a", "Clear lungs."]])
    with pytest.raises(InputError) as exc:
        read_references(bad)
    assert where(exc) == {("refs.csv", 3, "reference"), ("refs.csv", 4, "id")}
    assert "refs.csv, line 3 (id 'b'), field 'reference': empty report (whitespace only)" in str(exc.value)
    with pytest.raises(InputError, match=r"refs.csv, field 'text': missing column"):
        read_references(bad, reference_col="text")


def test_references_keep_the_text_and_read_other_formats(tmp_path: Path) -> None:
    refs = write_csv(tmp_path / "refs.txt", [["id", "reference"], [" a ", "Small effusion.\n"]])
    assert read_references(refs) == [("a", "Small effusion.\n")]  # any suffix reads as CSV, as before
    keyed = tmp_path / "refs.json"
    keyed.write_text(json.dumps({"s1": {"report": "Clear lungs."}, "s2": {"report": 4}}), encoding="utf-8")
    with pytest.raises(InputError, match=r"refs.json, id 's2', field 'report': expected report, got number"):
        read_references(keyed, reference_col="report")


def suite_rows() -> list[PerturbedPair]:
    return [
        PerturbedPair(
            pair_id=f"a:omit_finding:{i}",
            source_uid="a",
            perturbation="omit_finding",
            significant=True,
            target_entity="effusion",
            expected="FN",
            description="removed",
            before="Small effusion.",
            after="",
            reference="Small effusion. Clear lungs.",
            candidate="Clear lungs.",
        )
        for i in (1, 2, 3, 4)
    ]


def test_suite_csv_lists_every_problem(tmp_path: Path) -> None:
    path = write_suite(suite_rows(), tmp_path / "suite.csv")
    table = list(csv.reader(path.open(encoding="utf-8", newline="")))
    head = table[0]
    table[2][head.index("pair_id")] = "a:omit_finding:1"  # line 3: duplicate pair id
    table[3][head.index("perturbation")] = "shuffle_words"  # line 4: unknown type
    table[3][head.index("significant")] = "maybe"  # line 4: not yes/no
    table[4][head.index("candidate")] = ""  # line 5: empty candidate
    write_csv(path, table)
    with pytest.raises(InputError) as exc:
        read_suite(path)
    assert where(exc) == {
        ("suite.csv", 3, "pair_id"),
        ("suite.csv", 4, "perturbation"),
        ("suite.csv", 4, "significant"),
        ("suite.csv", 5, "candidate"),
    }
    assert "unknown perturbation type 'shuffle_words'" in str(exc.value)


def test_suite_jsonl_problems_and_an_empty_suite(tmp_path: Path) -> None:
    path = write_suite(suite_rows()[:2], tmp_path / "suite.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    second = json.loads(lines[1])
    second["reference"] = None
    path.write_text("\n".join([lines[0], json.dumps(second), "{not json"]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_suite(path)
    assert where(exc) == {("suite.jsonl", 2, "reference"), ("suite.jsonl", 3, None)}
    assert "suite.jsonl, line 3: not valid JSON" in str(exc.value)
    for name in ("empty.jsonl", "empty.csv"):
        assert read_suite(write_suite([], tmp_path / name)) == []


# ------------------------------------------------------------------------------------------
# IU X-ray gold standard
# ------------------------------------------------------------------------------------------


def iu_dir(tmp_path: Path, rows: list[list[object]]) -> Path:
    (tmp_path / "iu-xray").mkdir()
    write_csv(tmp_path / "iu-xray" / "indiana_reports.csv", [["uid", "MeSH", "findings", "impression"], *rows])
    return tmp_path


def test_iu_reports_list_every_problem(tmp_path: Path) -> None:
    root = iu_dir(
        tmp_path,
        [
            ["1", "normal", "Clear lungs.", ""],
            ["2", "", "Small effusion.", ""],
            ["1", "Cardiomegaly", "Big heart.", ""],
            ["", "normal", "Clear.", ""],
        ],
    )
    with pytest.raises(InputError) as exc:
        load_iu_gold(root)
    assert where(exc) == {
        ("indiana_reports.csv", 3, "MeSH"),
        ("indiana_reports.csv", 4, "uid"),
        ("indiana_reports.csv", 5, "uid"),
    }
    assert "indiana_reports.csv, line 4 (id '1'), field 'uid': duplicate uid '1' (first at line 2)" in str(exc.value)


def test_iu_missing_column_and_bad_split_lists(tmp_path: Path) -> None:
    (tmp_path / "iu-xray").mkdir()
    write_csv(tmp_path / "iu-xray" / "indiana_reports.csv", [["uid", "findings"], ["1", "Clear lungs."]])
    with pytest.raises(InputError, match=r"indiana_reports.csv, field 'MeSH': missing column"):
        load_iu_gold(tmp_path)
    write_csv(tmp_path / "iu-xray" / "indiana_reports.csv", [["uid", "MeSH", "findings"], ["1", "normal", "Clear."]])
    splits = tmp_path / "radrestruct-template"
    splits.mkdir()
    (splits / "train_ids.json").write_text(json.dumps(["1", None]), encoding="utf-8")
    (splits / "val_ids.json").write_text(json.dumps(["1"]), encoding="utf-8")
    (splits / "test_ids.json").write_text('[\n  "3",\n', encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_iu_gold(tmp_path)
    text = str(exc.value)
    assert "test_ids.json, line 3: not valid JSON" in text  # a file that cannot be parsed stops there
    (splits / "test_ids.json").write_text("[]", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_iu_gold(tmp_path)
    assert where(exc) == {("train_ids.json", 2, None), ("val_ids.json", 1, None)}
    assert "val_ids.json, item 1 (id '1'): id listed twice (first in" in str(exc.value)


# ------------------------------------------------------------------------------------------
# Every reader: bad UTF-8 is reported with its line
# ------------------------------------------------------------------------------------------


READERS: dict[str, tuple[bytes, Callable[[Path], object]]] = {
    "plain ratings": (b"id,reference,candidate,rater_1\np1,A.,caf\xe9,1\n", read_plain_ratings),
    "references": (b"id,reference\np1,A.\np2,caf\xe9\n", read_references),
    "suite": (b"pair_id,reference\n\xff\n", read_suite),
}


@pytest.mark.parametrize("name", READERS)
def test_bad_utf8_names_the_line(tmp_path: Path, name: str) -> None:
    data, reader = READERS[name]
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    with pytest.raises(InputError) as exc:
        reader(path)
    line = data.count(b"\n", 0, next(i for i, b in enumerate(data) if b >= 0x80)) + 1
    assert where(exc) == {("bad.csv", line, None)}
    assert "not valid UTF-8" in str(exc.value)


def test_bad_utf8_in_iu_reports(tmp_path: Path) -> None:
    (tmp_path / "iu-xray").mkdir()
    (tmp_path / "iu-xray" / "indiana_reports.csv").write_bytes(b"uid,MeSH\n1,normal\n2,\xe9\n")
    with pytest.raises(InputError, match=r"indiana_reports.csv, line 3: not valid UTF-8"):
        load_iu_gold(tmp_path)


# ------------------------------------------------------------------------------------------
# The CLI: error lines, exit 2, no traceback
# ------------------------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_cli_meta_perturb_bad_refs(tmp_path: Path) -> None:
    write_csv(tmp_path / "bad.csv", [["id", "report"], ["a", "Small effusion."], ["a", "Clear lungs."]])
    proc = run_cli("meta", "perturb", "--refs", "bad.csv", "--out", "x.jsonl", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("error: 2 problems in input:")
    assert "bad.csv, field 'reference': missing column; columns present: 'id', 'report'" in proc.stderr
    assert "bad.csv, line 3 (id 'a'), field 'id': duplicate id 'a' (first at line 2)" in proc.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_cli_meta_human_and_score_bad_files(tmp_path: Path) -> None:
    write_csv(tmp_path / "ratings.csv", [PLAIN_HEAD, ["p1", "Small effusion.", "No effusion.", "[one]", 1]])
    proc = run_cli("meta", "human", "ratings.csv", "--resamples", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: 1 problem in input:" in proc.stderr
    assert "ratings.csv, line 2 (id 'p1'), field 'rater_1': '[one]' is not a number" in proc.stderr  # "[" kept
    (tmp_path / "suite.jsonl").write_text('{"pair_id": "x"}\n', encoding="utf-8")
    proc = run_cli("meta", "score", "suite.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "suite.jsonl, field 'reference': missing column" in proc.stderr
    proc = run_cli("meta", "score", "nowhere.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "error: 1 problem in input:\n  - nowhere.jsonl: file not found" in proc.stderr


# ------------------------------------------------------------------------------------------
# No module parses tables on its own
# ------------------------------------------------------------------------------------------

SRC = Path(cxreval.__file__).parent

#: Calls that parse a table or a JSON file. ``json.loads(<...>.read_text())`` (or ``read_bytes``,
#: ``read``) counts as reading a JSON file too.
TABLE_READERS = frozenset(
    {
        "csv.reader",
        "csv.DictReader",
        "json.load",
        "pandas.read_csv",
        "pandas.read_json",
        "pandas.read_parquet",
        "pandas.read_table",
        "pandas.read_excel",
        "pyarrow.parquet.read_table",
        "json.loads(file text)",
    }
)

#: The one module allowed to call any of them: every user table is read there.
READER_MODULES = frozenset({"io/records.py", "io/streams.py"})

#: (module under src/cxreval, call) -> why it may read a file itself. Not listed because they call
#: none of the above: the YAML loaders (ontology, cues, LLM and bench configs, exemplars, MeSH
#: families: settings, not tables), the SQLite answer stores (llm/cache.py, bench/cache.py), the
#: report templates and prompts (packaged files read with importlib.resources), and pyarrow's
#: ParquetFile where only a schema's column names are looked at (agree.py, io.py).
ALLOWED: dict[tuple[str, str], str] = {
    ("evaluate.py", "pandas.read_csv"): "reads the pair_id column of errors.csv in a results folder that "
    "cxreval itself wrote (scores recomputed from judgements), not user input",
    ("evaluate.py", "json.loads(file text)"): "reads scores.json in a results folder that cxreval itself wrote",
    ("io/writers.py", "json.loads(file text)"): "reads .cxreval-outputs.json, the list of entries cxreval itself "
    "wrote into an output folder",
    ("extract/text.py", "json.loads(file text)"): "reads confusables.json, Unicode's look-alike data as the "
    "confusable-homoglyphs package ships it, not user input",
    ("testing/results.py", "pyarrow.parquet.read_table"): "compares the judgements.parquet of two results "
    "folders cxreval itself wrote (tests, benchmarks)",
    ("weights.py", "json.loads(file text)"): "reads the config.json of a checkpoint it has just fetched and verified "
    "(the radgraph archive names its encoder there), not a table of reports; errors are FetchError naming the file",
    ("metrics/bertscore.py", "json.loads(file text)"): "checkpoint_json reads a model checkpoint's config.json "
    "(not a table of reports); errors are MetricUnavailable "
    "naming the file",
}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it was imported as (``pd`` -> ``pandas``, ``DictReader`` -> ``csv.DictReader``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def table_reads(source: str) -> list[tuple[int, str]]:
    """(line, call) of every table-reading call in a module's source."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        if (
            name == "json.loads"
            and node.args
            and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Attribute)
            and node.args[0].func.attr in ("read_text", "read_bytes", "read")
        ):
            name = "json.loads(file text)"
        if name in TABLE_READERS:
            found.append((node.lineno, name))
    return found


def test_the_ast_check_sees_aliases_and_file_json() -> None:
    code = (
        "import csv, json\nimport pandas as pd\nfrom csv import DictReader as DR\nimport pyarrow.parquet as pq\n"
        "csv.reader(f)\nDR(f)\npd.read_csv(p)\npq.read_table(p)\njson.load(f)\njson.loads(p.read_text())\n"
        "json.loads(answer)\ncsv.writer(f)\n"
    )
    assert [name for _, name in table_reads(code)] == [
        "csv.reader",
        "csv.DictReader",
        "pandas.read_csv",
        "pyarrow.parquet.read_table",
        "json.load",
        "json.loads(file text)",
    ]


def test_only_io_reads_tables() -> None:
    seen: set[tuple[str, str]] = set()
    offending = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module in READER_MODULES:
            continue
        for line, call in table_reads(path.read_text(encoding="utf-8")):
            if (module, call) in ALLOWED:
                seen.add((module, call))
            else:
                offending.append(f"src/cxreval/{module}:{line}: {call}")
    assert not offending, (
        "read user tables with cxreval.io.load_table (+ check_columns, record_id, "
        "cxreval.io) so that errors are InputErrors; or add the call to ALLOWED "
        "with a reason:\n" + "\n".join(offending)
    )
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"no longer called, remove from ALLOWED: {stale}"
