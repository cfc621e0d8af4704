"""``--no-text``: the HTML page, a bench folder and a review export hold no report text.

Every report here carries a marker word (``zebracanary`` in references, ``okapiquokka`` in
candidates) that the rule engine quotes with its evidence; each written file is read whole
(gzip members decompressed, the Parquet twin's cells read) and must not contain a marker with
``--no-text``, and must contain one without it (so the check is not vacuous).
"""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

import cxreval
from cxreval.bench.models import TEXT_LEFT_OUT, BenchmarkResult, ExamplePair
from cxreval.cli import app
from cxreval.extract.explain import without_cues
from cxreval.judge.files import JUDGEMENTS, read_rows
from cxreval.meta.human import RatingsFormatError, read_plain_ratings
from cxreval.page import render_html, write_html
from tests.report_support import DATASETS, make_result
from tests.test_bench import BAD, GOOD, REFS, _write

REF_MARK = "zebracanary"
CAND_MARK = "okapiquokka"
MARKS = (REF_MARK, CAND_MARK)


def _marked(text: str, mark: str) -> str:
    """Every sentence of ``text`` with ``mark`` before its full stop."""
    return text.replace(".", f" {mark}.")


def _file_text(path: Path) -> str:
    """Everything a file holds, lower-cased: gzip members decompressed, a Parquet table's cells."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        text += json.dumps(pq.read_table(path).to_pylist())
    return text.lower()


def _files_with_marks(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Per file under ``folder`` (relative name) holding a marker: the markers it holds."""
    found: dict[str, list[str]] = {}
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in skip]
    assert files, f"nothing written in {folder}"
    for path in files:
        text = _file_text(path)
        hits = [m for m in MARKS if m in text]
        if hits:
            found[str(path.relative_to(folder))] = hits
    return found


# -- rule lines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "ids"),
    [
        ("finding.name; negation.pre 'no'", "finding.name; negation.pre"),
        ("normal.clear-lungs 'lungs are clear'", "normal.clear-lungs"),
        (
            'finding.name; hedge.pre.possible "it\'s zebracanary; x"; attribute.side',
            "finding.name; hedge.pre.possible; attribute.side",
        ),
        ("a 'x\\'; zebracanary'", "a"),
        ("finding.name; finding.stated", "finding.name; finding.stated"),
        ("", ""),
        ("zebracanary was seen", ""),  # not a rules line: nothing kept rather than a piece of text
    ],
)
def test_without_cues_keeps_rule_ids_only(line: str, ids: str) -> None:
    assert without_cues(line) == ids


# -- the page ---------------------------------------------------------------------------------


def _marked_result() -> BenchmarkResult:
    """The report tests' synthetic result, its example pairs quoting marked sentences and cues."""
    base = make_result(n_systems=4, datasets=DATASETS[:2], n_sites=3)

    def marked(x: ExamplePair) -> ExamplePair:
        return x.model_copy(
            update={
                "reference": f"{x.reference} {REF_MARK}",
                "candidate": f"{x.candidate} {CAND_MARK}",
                "reference_rules": f"finding.name; negation.pre 'no {REF_MARK}'",
                "candidate_rules": f'normal.clear-lungs "{CAND_MARK} clear"; attribute.side',
            }
        )

    entities = [e.model_copy(update={"examples": [marked(x) for x in e.examples]}) for e in base.entities]
    assert any(e.examples for e in entities)
    return base.model_copy(update={"entities": entities})


def test_page_without_text_has_no_report_text_but_the_same_numbers() -> None:
    result = _marked_result()
    with_text = render_html(result).lower()
    assert REF_MARK in with_text and CAND_MARK in with_text
    page = render_html(result, include_text=False)
    assert REF_MARK not in page.lower() and CAND_MARK not in page.lower()
    assert TEXT_LEFT_OUT in page  # the header's notes say so
    data = json.loads(page.split('<script type="application/json" id="cxr-data">', 1)[1].split("</script>", 1)[0])
    assert data["texts"] == [] and data["has_text"] is False
    examples = [x for d in data["datasets"] for cell in d["cells"].values() for x in cell[12]]
    assert examples and all(x[2] is None and x[3] is None for x in examples)
    assert {x[4] for x in examples} == {"finding.name; negation.pre"}  # rule ids kept, cue left out
    assert {x[5] for x in examples} == {"normal.clear-lungs; attribute.side"}
    # a result saved without text renders the same page, with or without the option
    bare = result.without_text()
    assert not bare.has_text and bare.without_text() == bare
    assert render_html(bare) == page == render_html(bare, include_text=False)
    assert bare.leaderboards == result.leaderboards and bare.summaries == result.summaries


def test_report_command_no_text(tmp_path: Path) -> None:
    saved = tmp_path / "result.json"
    saved.write_text(_marked_result().model_dump_json(), encoding="utf-8")
    done = CliRunner().invoke(app, ["report", str(saved), "--no-text", "-o", str(tmp_path / "shared" / "page.html")])
    assert done.exit_code == 0, done.output
    assert _files_with_marks(tmp_path / "shared") == {}
    done = CliRunner().invoke(app, ["report", str(saved), "-o", str(tmp_path / "own" / "page.html")])
    assert done.exit_code == 0, done.output
    assert _files_with_marks(tmp_path / "own") == {"page.html": list(MARKS)}
    write_html(_marked_result(), tmp_path / "py" / "page.html", include_text=False)
    assert _files_with_marks(tmp_path / "py") == {}


# -- cxreval bench ----------------------------------------------------------------------------


@pytest.fixture()
def marked_bench(tmp_path: Path) -> Path:
    """test_bench's tiny benchmark, every report marked."""
    _write(tmp_path / "refs.csv", ["id", "report"], [[k, _marked(v[0], REF_MARK)] for k, v in REFS.items()])
    _write(tmp_path / "good.csv", ["study", "text"], [[k, _marked(v, CAND_MARK)] for k, v in GOOD.items()])
    _write(tmp_path / "bad.csv", ["study", "text"], [[k, _marked(v, CAND_MARK)] for k, v in BAD.items()])
    cfg = {
        "name": "tiny",
        "out": str(tmp_path / "out"),
        "metrics": ["spec-errors", "bleu2"],
        "rank_by": "spec-errors",
        "bootstrap": {"resamples": 20, "seed": 3},
        "datasets": [{"name": "tiny-set", "references": {"path": "refs.csv"}}],
        "systems": [
            {"name": "good", "path": "good.csv", "id_col": "study", "text_col": "text"},
            {"name": "bad", "path": "bad.csv", "id_col": "study", "text_col": "text"},
        ],
    }
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "bench.yaml"


def _bench(config: Path, out: Path, *options: str) -> None:
    from cxreval.cli.bench import bench

    one = typer.Typer()
    one.command("bench")(bench)
    one.command("other")(lambda: None)
    done = CliRunner().invoke(one, ["bench", str(config), "--out", str(out), *options])
    assert done.exit_code == 0, done.output


def test_bench_no_text_writes_no_report_text_but_its_cache(marked_bench: Path, tmp_path: Path) -> None:
    _bench(marked_bench, tmp_path / "own")
    own = _files_with_marks(tmp_path / "own")
    assert {"report.html", "result.json", "cache.sqlite"} <= set(own)
    _bench(marked_bench, tmp_path / "shared", "--no-text")
    shared = tmp_path / "shared"
    assert set(_files_with_marks(shared)) == {"cache.sqlite"}  # the judgement cache, as documented
    result = BenchmarkResult.model_validate_json((shared / "result.json").read_text(encoding="utf-8"))
    assert not result.has_text and any(e.examples for e in result.entities)
    own_result = BenchmarkResult.model_validate_json((tmp_path / "own" / "result.json").read_text(encoding="utf-8"))
    assert result.leaderboards == own_result.leaderboards
    assert {(e.system, e.entity, e.tp, e.fp, e.fn) for e in result.entities} == {
        (e.system, e.entity, e.tp, e.fp, e.fn) for e in own_result.entities
    }
    for name in ("leaderboards.csv", "entities.csv", "groups.csv", "leaderboards.md"):  # already text-free
        assert (shared / name).read_bytes() == (tmp_path / "own" / name).read_bytes()


# -- cxreval review export --------------------------------------------------------------------


@pytest.fixture()
def reviewed_db(tmp_path: Path) -> Path:
    """A review database of marked pairs, every pair checked by ann (who accepts the engine) and
    the first also by bob (who adds a false positive); one engine row quotes a loose sentence that
    is no slice of its report (as an LLM's quote may be)."""
    from cxreval.review.db import Answer, ReviewDB
    from cxreval.review.sampling import init_review

    pairs = [
        cxreval.ReportPair(pair_id=k, reference=_marked(v[0], REF_MARK), candidate=_marked(BAD[k], CAND_MARK))
        for k, v in REFS.items()
    ]
    cxreval.evaluate(pairs).save(tmp_path / "results", rows="full")
    db = tmp_path / "review.db"
    init_review(tmp_path / "results", db, pairs, len(pairs), seed=1)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE engine_rows SET candidate_evidence = ? WHERE pair_id = 's4' AND entity = 'pneumothorax'",
            (f"a pneumothorax, loosely quoted {CAND_MARK}",),
        )
    conn.close()
    with ReviewDB.open(db) as opened:
        for k, pair in enumerate(opened.pairs()):
            rows = opened.engine_rows(pair.pair_id)
            for reviewer in ("ann", "bob") if k == 0 else ("ann",):
                for r in rows:
                    fields = {"presence": r.presence, "location": r.location, "severity": r.severity, "comparison": r.comparison}
                    opened.save_answer(Answer(reviewer=reviewer, pair_id=pair.pair_id, entity=r.entity, **fields))
                if reviewer == "bob":
                    extra = next(e for e in opened.entities() if e not in {r.entity for r in rows})
                    opened.save_answer(Answer(reviewer="bob", pair_id=pair.pair_id, entity=extra, presence="FP"))
                opened.set_checked(reviewer, pair.pair_id)
    return db


def _export(db: Path, out: Path, *options: str) -> None:
    done = CliRunner().invoke(app, ["review", "export", str(db), "--out", str(out), *options])
    assert done.exit_code == 0, done.output


def _ratings(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_review_export_no_text_writes_no_report_text(reviewed_db: Path, tmp_path: Path) -> None:
    own, shared = tmp_path / "own", tmp_path / "shared"
    _export(reviewed_db, own)
    marked = set(_files_with_marks(own))
    assert {JUDGEMENTS, "human_ratings.csv"} <= marked
    assert "judgements.parquet" in marked or not (own / "judgements.parquet").exists()
    _export(reviewed_db, shared, "--no-text")
    assert _files_with_marks(shared) == {}
    # the same scores, signature and fingerprints; only the style of the rows differs
    scores, own_scores = json.loads((shared / "scores.json").read_text()), json.loads((own / "scores.json").read_text())
    assert (scores.pop("judgement_rows"), own_scores.pop("judgement_rows")) == ("compact", "full")
    assert scores == own_scores
    assert (shared / "errors.csv").read_bytes() == (own / "errors.csv").read_bytes()
    # human_ratings.csv: the layout and counts kept, the two report columns empty
    kept, bare = _ratings(own / "human_ratings.csv"), _ratings(shared / "human_ratings.csv")
    assert [list(r) for r in bare] == [list(r) for r in kept] and len(bare) == len(REFS)
    assert all(r["reference"] == r["candidate"] == "" for r in bare)
    texts = {p: (_marked(v[0], REF_MARK), _marked(BAD[p], CAND_MARK)) for p, v in REFS.items()}
    assert [{**r, "reference": "", "candidate": ""} for r in kept] == bare
    # cxreval meta human refuses the empty report cells, and reads the file once they are filled in by id
    with pytest.raises(RatingsFormatError, match="empty report"):
        read_plain_ratings(shared / "human_ratings.csv")
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=list(bare[0]))
        out.writeheader()
        out.writerows({**r, "reference": texts[r["id"]][0], "candidate": texts[r["id"]][1]} for r in bare)
    got, want = read_plain_ratings(filled), read_plain_ratings(own / "human_ratings.csv")
    assert (got.ids, got.references, got.candidates) == (want.ids, want.references, want.candidates)
    assert json.dumps(got.counts) == json.dumps(want.counts)  # NaN where a reviewer did not check the pair
    about = json.loads((shared / "human_ratings.json").read_text())
    assert about == {"raters": {"rater_1": "ann", "rater_2": "bob"}, "report_text": False}
    # the rows are evaluate's compact rows: read back with the texts, the evidence is the engine's
    full = {(r.pair_id, r.entity): r for r in read_rows(own / JUDGEMENTS)}
    compact = read_rows(shared / JUDGEMENTS, texts)
    assert compact and all((r.pair_id, r.entity) in full for r in compact)
    for r in compact:
        was = full[(r.pair_id, r.entity)]
        assert (r.presence, r.location, r.severity, r.comparison) == (was.presence, was.location, was.severity, was.comparison)
        assert r.reference == was.reference
        loose = (r.pair_id, r.entity) == ("s4", "pneumothorax")
        assert r.candidate == ("" if loose else was.candidate)  # the loose quote is dropped, not written
    assert any(r.reference and REF_MARK in r.reference for r in compact)  # evidence is there, as offsets


def test_review_stats_no_text_writes_no_report_text(reviewed_db: Path, tmp_path: Path) -> None:
    from cxreval.review.db import Answer, ReviewDB

    with ReviewDB.open(reviewed_db) as opened:  # ann disagrees with the engine on a row with evidence, and notes why
        row = next(r for r in opened.engine_rows() if r.reference_evidence)
        pair = row.pair_id
        other = "TP" if row.presence == "FN" else "FN"
        opened.save_answer(Answer(reviewer="ann", pair_id=pair, entity=row.entity, presence=other))
        opened.save_note("ann", pair, f"the candidate never says {REF_MARK}")

    def stats(folder: Path, *options: str) -> str:
        folder.mkdir()
        files = ["--html", str(folder / "r.html"), "--csv", str(folder / "r.csv"), "--latex", str(folder / "r.tex")]
        done = CliRunner().invoke(app, ["review", "stats", str(reviewed_db), "--json", "--resamples", "0", *files, *options])
        assert done.exit_code == 0, done.output
        return done.output

    own, shared = stats(tmp_path / "own"), stats(tmp_path / "shared", "--no-text")
    assert REF_MARK in own and "r.html" in _files_with_marks(tmp_path / "own")  # the test is not vacuous
    assert not any(m in shared for m in MARKS) and _files_with_marks(tmp_path / "shared") == {}
    own_json, shared_json = json.loads(own), json.loads(shared)
    assert shared_json.pop("settings")["report_text"] == "left out"
    own_json.pop("settings")
    assert shared_json["fields"] == own_json["fields"]  # every number unchanged
