"""``cxreval review``: sampling, the database's guards, bad input (exit 2 with a clear message),
statistics against reference implementations, and the gold export. Helpers here are shared by
the HTTP and browser tests of the review server."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import cxreval
from cxreval.cli import example_path
from cxreval.ontology import load_ontology

EXAMPLE = example_path()


def run_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def make_results(folder: Path) -> Path:
    """The shipped example scored by the rule engine, as ``cxreval evaluate --rows full`` writes it
    (every row: the reviewers see the true negatives too)."""
    cxreval.evaluate(cxreval.read_pairs(EXAMPLE)).save(folder, rows="full")
    return folder


def make_db(tmp: Path, sample: int = 8, seed: int = 3) -> Path:
    results = make_results(tmp / "results")
    db = tmp / "review.db"
    done = run_cli("review", "init", results, "--db", db, "--sample", str(sample), "--seed", str(seed), "--pairs", EXAMPLE)
    assert done.returncode == 0, done.stderr
    return db


@contextlib.contextmanager
def server(
    db: Path, port: int = 0, host: str = "127.0.0.1", options: Sequence[str] = ()
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``cxreval review serve`` (with ``options``) in a subprocess; yields it and the URL it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cxreval", "review", "serve", str(db), "--host", host, "--port", str(port), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("review page: "), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield proc, line.split(": ", 1)[1].strip()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def db_rows(db: Path, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


# -- sampling ------------------------------------------------------------------------------------


def test_sample_is_seeded_stratified_and_weighted(tmp_path: Path) -> None:
    from cxreval.evaluate import load_result
    from cxreval.review.sampling import draw_sample

    res = load_result(make_results(tmp_path / "r"))
    onto = load_ontology()
    a = draw_sample(res.judgements, res.pair_ids, onto, 8, seed=5)
    b = draw_sample(res.judgements, res.pair_ids, onto, 8, seed=5)
    c = draw_sample(res.judgements, res.pair_ids, onto, 8, seed=6)
    assert a == b and [p.pair_id for p in a.pairs] != [p.pair_id for p in c.pairs]
    assert len(a.pairs) == 8 and len({p.pair_id for p in a.pairs}) == 8
    assert sorted(p.position for p in a.pairs) == list(range(1, 9))
    # every pair is in one stratum; each drawn pair's weight is N_h / n_h; weights add up to N
    assert sum(s.size for s in a.strata) == 20
    for s in a.strata:
        drawn = [p for p in a.pairs if p.stratum == s.key]
        assert len(drawn) == s.sampled and all(p.weight == pytest.approx(s.size / s.sampled) for p in drawn)
    assert sum(p.weight for p in a.pairs) == pytest.approx(sum(s.size for s in a.strata if s.sampled))
    # asking for more than there is takes everything, with weight 1
    everything = draw_sample(res.judgements, res.pair_ids, onto, 100, seed=0)
    assert len(everything.pairs) == 20 and all(p.weight == 1 for p in everything.pairs)


def test_critical_strata_are_over_sampled() -> None:
    from cxreval.review.sampling import allocate

    sizes = {"FN/critical": 10, "TN/lungs": 90}
    critical = {"FN/critical": True, "TN/lungs": False}
    plain = allocate(sizes, critical, 20, critical_boost=1.0)
    boosted = allocate(sizes, critical, 20, critical_boost=3.0)
    assert sum(plain.values()) == sum(boosted.values()) == 20
    assert plain["FN/critical"] in (2, 3) and boosted["FN/critical"] >= 2 * plain["FN/critical"]
    assert boosted["FN/critical"] <= 10
    # never more than a stratum holds, and one pair per stratum first
    assert allocate({"a": 1, "b": 50}, {"a": False, "b": False}, 2, 3.0) == {"a": 1, "b": 1}


# -- bad input: exit 2 and a message naming the problem -----------------------------------------


def test_results_folder_without_judgements(tmp_path: Path) -> None:
    folder = tmp_path / "not-results"
    folder.mkdir()
    (folder / "scores.json").write_text("{}")
    done = run_cli("review", "init", folder, "--db", tmp_path / "r.db", "--sample", "5", "--pairs", EXAMPLE)
    assert done.returncode == 2
    assert "no judgements.jsonl.gz" in done.stderr and str(folder) in done.stderr
    assert not (tmp_path / "r.db").exists()


def test_texts_are_required_and_must_be_the_evaluated_ones(tmp_path: Path) -> None:
    results = make_results(tmp_path / "results")
    done = run_cli("review", "init", results, "--db", tmp_path / "r.db", "--sample", "5")
    assert done.returncode == 2 and "--pairs" in done.stderr
    other = tmp_path / "other.csv"
    other.write_text(EXAMPLE.read_text().replace("Small left pleural effusion", "Small right pleural effusion"))
    done = run_cli("review", "init", results, "--db", tmp_path / "r.db", "--sample", "5", "--pairs", other)
    assert done.returncode == 2 and "not those" in done.stderr
    assert not (tmp_path / "r.db").exists()


def test_another_tools_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    results = make_results(tmp_path / "results")
    foreign = tmp_path / "other.sqlite"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
        conn.commit()
    before = foreign.read_bytes()
    for args in (
        ("review", "init", results, "--db", foreign, "--sample", "3", "--pairs", EXAMPLE),
        ("review", "serve", foreign, "--port", "0"),
        ("review", "stats", foreign),
        ("review", "export", foreign, "--out", tmp_path / "gold"),
    ):
        done = run_cli(*args)
        assert done.returncode == 2, args
        assert "not a cxreval review database" in done.stderr and "invoices" in done.stderr, done.stderr
    assert foreign.read_bytes() == before
    text = tmp_path / "notes.db"
    text.write_text("hello, not a database\n" * 100)
    done = run_cli("review", "stats", text)
    assert done.returncode == 2 and "not an SQLite database" in done.stderr


def test_second_init_on_the_same_database(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    assert db_rows(db, "PRAGMA application_id")[0][0] == 0x43585276
    assert db_rows(db, "PRAGMA journal_mode")[0][0] == "wal"
    before = db_rows(db, "SELECT pair_id, weight FROM pairs ORDER BY position")
    done = run_cli("review", "init", tmp_path / "results", "--db", db, "--sample", "4", "--pairs", EXAMPLE)
    assert done.returncode == 2 and "already holds a review sample" in done.stderr
    assert db_rows(db, "SELECT pair_id, weight FROM pairs ORDER BY position") == before


def test_port_in_use(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = run_cli("review", "serve", db, "--port", str(port))
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr


def test_serve_without_the_extra_names_it(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    # the interpreter refuses to import uvicorn, as it would were the extra not installed
    code = (
        "import sys; sys.modules['uvicorn'] = None\nfrom cxreval.cli import app\n"
        f"app(['review', 'serve', {str(db)!r}, '--port', '0'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "optional extra 'review': pip install 'cxreval[review]'" in done.stderr


def test_answers_are_validated_naming_the_field(tmp_path: Path) -> None:
    from cxreval.review.db import Answer, ReviewDB, ReviewDBError

    db = make_db(tmp_path)
    with ReviewDB.open(db) as opened:
        pair = opened.pairs()[0]
        with pytest.raises(ReviewDBError, match="not in the review sample"):
            opened.save_answer(Answer(reviewer="ann", pair_id="nope", entity="pneumothorax", presence="FN"))
        with pytest.raises(ReviewDBError, match="not in the ontology"):
            opened.save_answer(Answer(reviewer="ann", pair_id=pair.pair_id, entity="unicorn", presence="FN"))
        with pytest.raises(ValueError, match="reviewer name"):
            Answer(reviewer="a b<script>", pair_id=pair.pair_id, entity="pneumothorax", presence="FN")
        with pytest.raises(ValueError, match="presence"):
            Answer(reviewer="ann", pair_id=pair.pair_id, entity="pneumothorax", presence="maybe")
        if opened.engine_rows(pair.pair_id):
            with pytest.raises(ReviewDBError, match="not answered yet"):
                opened.set_checked("ann", pair.pair_id)


# -- statistics against reference implementations (kappas, Clopper-Pearson: test_review_stats_shared) --


def test_weighted_estimate_with_equal_weights_is_the_plain_one() -> None:
    from cxreval.review.accuracy import Observation, weighted_accuracy

    obs = [Observation(f"p{i}", "ann", "e", "presence", "TP", "TP" if i % 3 else "FN", 2.5, "s") for i in range(12)]
    est, low, high = weighted_accuracy(obs, resamples=500, seed=1)
    assert est == pytest.approx(8 / 12)
    assert low is not None and high is not None and low < est < high
    assert weighted_accuracy(obs, resamples=500, seed=1) == (est, low, high)  # seeded


def test_stats_and_export_before_any_review(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    done = run_cli("review", "stats", db, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["pairs_reviewed"] == 0 and all(f["accuracy"] is None for f in data["fields"])
    done = run_cli("review", "export", db, "--out", tmp_path / "gold")
    assert done.returncode == 2 and "no pair has been checked yet" in done.stderr


def test_export_writes_each_reviewers_error_counts_for_meta_human(tmp_path: Path) -> None:
    """The gold folder holds human_ratings.csv; `cxreval meta human` reads it, and each rater's
    count is that reviewer's errors by the SPEC rule (here: ann accepts the engine, bob marks one
    extra false positive on the first pair; only ann checks the second)."""
    import csv

    from cxreval.review.db import Answer, ReviewDB

    db = make_db(tmp_path)
    with ReviewDB.open(db) as opened:
        pairs = [p for p in opened.pairs() if opened.engine_rows(p.pair_id)][:2]
        expected: dict[str, dict[str, int]] = {p.pair_id: {} for p in pairs}
        for k, pair in enumerate(pairs):
            rows = opened.engine_rows(pair.pair_id)
            for reviewer in ("ann", "bob") if k == 0 else ("ann",):
                errors = 0
                for r in rows:
                    answer = Answer(
                        reviewer=reviewer,
                        pair_id=pair.pair_id,
                        entity=r.entity,
                        presence=r.presence,
                        location=r.location,
                        severity=r.severity,
                        comparison=r.comparison,
                    )
                    opened.save_answer(answer)
                    errors += (
                        (answer.presence in ("FP", "FN"))
                        + (answer.location == "not-aligned")
                        + (answer.severity == "not-aligned")
                        + (answer.comparison != "other")
                    )
                if reviewer == "bob":
                    extra = next(e for e in opened.entities() if e not in {r.entity for r in rows})
                    opened.save_answer(Answer(reviewer="bob", pair_id=pair.pair_id, entity=extra, presence="FP"))
                    errors += 1
                opened.set_checked(reviewer, pair.pair_id)
                expected[pair.pair_id][reviewer] = errors
    done = run_cli("review", "export", db, "--out", tmp_path / "gold")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "gold" / "human_ratings.json").read_text()) == {"raters": {"rater_1": "ann", "rater_2": "bob"}}
    with (tmp_path / "gold" / "human_ratings.csv").open(newline="", encoding="utf-8") as fh:
        rows = {r["id"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {p.pair_id for p in pairs}
    first, second = (p.pair_id for p in pairs)
    assert int(rows[first]["rater_1"]) == expected[first]["ann"]
    assert int(rows[first]["rater_2"]) == expected[first]["bob"] == expected[first]["ann"] + 1
    assert int(rows[first]["rater_2_fp"]) == int(rows[first]["rater_1_fp"]) + 1
    assert rows[second]["rater_2"] == ""  # bob did not check it
    done = run_cli(
        "meta", "human", tmp_path / "gold" / "human_ratings.csv", "--resamples", "50", "--out", tmp_path / "alignment.json"
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "alignment.json").is_file()
