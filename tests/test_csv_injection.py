"""Issue 27, item 4: no CSV cxreval writes holds a cell a spreadsheet would run as a formula.

Ids, system and site names, kept columns and report texts that start with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return are written with a leading ``'`` (OWASP); genuine numbers
(``-0.5``) are left alone. cxreval's own readers undo it, so ids round-trip: ``load_result``,
review sampling, ``compare``, ``meta human`` on the review export, the perturbation suite. Input
ids are kept as given: ``"\\t=2+2"`` is not stripped into a live ``=2+2``.

The scan runs the real commands (subprocesses) on hostile input and reads every CSV they wrote
with the csv module.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cxreval.evaluate import load_result

#: What a spreadsheet reads as a formula (OWASP), written out here independently of cxreval.
LIVE_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.IGNORECASE)

#: Ids as a hostile input file gives them (the last ones are not hostile: a quote, a number).
IDS = ["=1+2", "+1", "-cmd", "@SUM(A1)", "\t=2+2", "\r=1+1", '=HYPERLINK("http://x","y")', "'=quoted", "''-x", "-0.5", "plain"]
REFERENCES = [
    '=HYPERLINK("http://evil","x") Small left pleural effusion.',
    "- No pneumothorax.",
    "+Moderate cardiomegaly.",
    "@cmd Large right pneumothorax.",
    "Clear lungs.",
    "\tRight lower lobe atelectasis.",
    "Mild cardiomegaly.",
    "-Small bilateral pleural effusions.",
    "=1+1 Heart size is normal.",
    "-2+3 Lungs are clear.",
    "No acute disease.",
]
CANDIDATES = [
    "- No pleural effusion.",
    "=cmd|' /C calc'!A0 Clear lungs.",
    "@Large left pneumothorax.",
    "+No pneumothorax.",
    "-Moderate cardiomegaly.",
    "Right lower lobe atelectasis.",
    "=SUM(1,2) Mild cardiomegaly.",
    "Clear lungs.",
    "Heart size is normal.",
    "Lungs are clear.",
    "-No acute disease.",
]
SITES = ["=1+1", "-x", "-3", "@a", "+b", "'=q", "plain", "=A1", "-0.5", "\t=x", "ok"]


def live(cell: str) -> bool:
    return cell[:1] in LIVE_START and not NUMBER.fullmatch(cell)


def run_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "120"},
    )


def write_rows(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def scan(root: Path) -> dict[str, list[list[str]]]:
    """Every CSV under ``root`` (relative name -> rows); fails naming each live cell."""
    tables = {}
    live_cells = []
    for path in sorted(root.rglob("*.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        name = path.relative_to(root).as_posix()
        tables[name] = rows
        live_cells += [(name, i, cell) for i, row in enumerate(rows, start=1) for cell in row if live(cell)]
    assert not live_cells, f"cells a spreadsheet would run as formulas: {live_cells[:10]}"
    return tables


def test_the_cell_guard_round_trips_and_leaves_numbers_alone() -> None:
    from cxreval.io.writers import csv_cell, csv_text, csv_value

    texts = [
        *IDS,
        *REFERENCES,
        *SITES,
        "",
        "'",
        "''",
        "'''=",
        "'abc",
        "=",
        "-",
        "- ",
        "1e5",
        "-1e-5",
        "+.5",
        "-inf",
        "--1",
        "-1-1",
        "@",
        "'\t",
        "a=b",
    ]
    for text in texts:
        cell = csv_cell(text)
        assert not live(str(cell)), (text, cell)
        assert csv_value(str(cell)) == text, (text, cell)
    assert csv_cell("-0.5") == "-0.5" and csv_cell(-0.5) == -0.5 and csv_cell(None) == ""
    assert csv_cell("'=x") == "''=x" and csv_value("''=x") == "'=x"  # an id that really starts with '=
    assert csv_value("'abc") == "'abc"  # a quote cxreval did not add stays
    parsed = list(csv.reader(io.StringIO(csv_text([["id"], *([t] for t in texts)]), newline="")))
    assert [csv_value(row[0]) for row in parsed[1:]] == texts


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every command that writes a CSV, run on hostile input; returns the folder of their outputs."""
    root = tmp_path_factory.mktemp("hostile")
    out = root / "out"
    n = len(IDS)
    single = write_rows(
        root / "single.csv",
        ["id", "reference", "candidate", "site"],
        [[IDS[i], REFERENCES[i], CANDIDATES[i], SITES[i]] for i in range(n)],
    )
    copied = write_rows(
        root / "copied.csv",
        ["id", "reference", "candidate"],
        [[IDS[i], REFERENCES[i], REFERENCES[(i + 1) % n]] for i in range(n)],
    )
    long = write_rows(
        root / "long.csv",
        ["id", "reference", "candidate", "model", "site"],
        [
            [IDS[i], REFERENCES[i], c, system, SITES[i]]
            for system, cands in (("=sysA", CANDIDATES), ("+sysB", REFERENCES[::-1]), ("-0.5", CANDIDATES[::-1]))
            for i, c in enumerate(cands)
        ],
    )
    for args in (
        ("--pairs", single, "--meta-col", "site", "--out", out / "single"),
        ("--pairs", copied, "--out", out / "copied"),
        ("--pairs", long, "--system-col", "model", "--meta-col", "site", "--out", out / "long"),
    ):
        done = run_cli("evaluate", *args, "--json")
        assert done.returncode == 0, done.stderr
    _review(root, out, single)
    _bench(root, out)
    _suite(out)
    return root


def _review(root: Path, out: Path, pairs: Path) -> None:
    """Sample the single run for review, check every pair, export the gold table, write the stats."""
    from cxreval.review.db import Answer, ReviewDB

    db = root / "review.db"
    done = run_cli("review", "init", out / "single", "--db", db, "--sample", len(IDS), "--pairs", pairs)
    assert done.returncode == 0, done.stderr
    with ReviewDB.open(db) as opened:
        for pair in opened.pairs():
            for r in opened.engine_rows(pair.pair_id):
                opened.save_answer(
                    Answer(
                        reviewer="ann",
                        pair_id=pair.pair_id,
                        entity=r.entity,
                        presence=r.presence,
                        location=r.location,
                        severity=r.severity,
                        comparison=r.comparison,
                    )
                )
            opened.set_checked("ann", pair.pair_id)
    done = run_cli("review", "export", db, "--out", out / "gold")
    assert done.returncode == 0, done.stderr
    done = run_cli("review", "stats", db, "--resamples", "20", "--csv", out / "review-stats.csv")
    assert done.returncode == 0, done.stderr


def _bench(root: Path, out: Path) -> None:
    """A benchmark whose dataset, systems, sites and ids are hostile."""
    n = len(IDS)
    write_rows(root / "refs.csv", ["id", "report"], [[IDS[i], REFERENCES[i]] for i in range(n)])
    write_rows(root / "meta.csv", ["id", "site"], [[IDS[i], ("=A", "-B", "@C")[i % 3]] for i in range(n)])
    write_rows(root / "good.csv", ["study", "text"], [[IDS[i], CANDIDATES[i]] for i in range(n)])
    write_rows(root / "bad.csv", ["study", "text"], [[IDS[i], CANDIDATES[::-1][i]] for i in range(n)])
    cfg = {
        "name": "=tiny",
        "out": str(out / "bench"),
        "metrics": ["spec-errors", "bleu2"],
        "rank_by": "spec-errors",
        "bootstrap": {"resamples": 0, "seed": 3},
        "datasets": [{"name": "=set", "references": {"path": "refs.csv"}, "metadata": {"path": "meta.csv", "site_col": "site"}}],
        "systems": [
            {"name": '=HYPERLINK("http://x")', "path": "good.csv", "id_col": "study", "text_col": "text"},
            {"name": "@bad", "path": "bad.csv", "id_col": "study", "text_col": "text"},
            {"name": "+oracle", "baseline": "copy-reference"},
        ],
    }
    (root / "bench.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    done = run_cli("bench", root / "bench.yaml", "--no-html", "--no-progress", cwd=root)
    assert done.returncode == 0, done.stderr


def _suite(out: Path) -> None:
    """A perturbation suite of hostile pairs, written as CSV."""
    from cxreval.meta.perturb import PerturbedPair, write_suite

    pairs = [
        PerturbedPair(
            pair_id=IDS[i],
            source_uid=IDS[-1 - i],
            perturbation="omit_finding",
            significant=True,
            expected="FN",
            description=SITES[i],
            reference=REFERENCES[i],
            candidate=CANDIDATES[i],
        )
        for i in range(len(IDS))
    ]
    write_suite(pairs, out / "suite.csv")


def test_no_csv_cxreval_writes_holds_a_live_formula(written: Path) -> None:
    tables = scan(written / "out")
    expected = {
        "single/errors.csv",
        "copied/errors.csv",
        "long/systems.csv",
        "gold/errors.csv",
        "gold/human_ratings.csv",
        "review-stats.csv",
        "bench/leaderboards.csv",
        "bench/sites.csv",
        "bench/groups.csv",
        "bench/entities.csv",
        "bench/correlations.csv",
        "suite.csv",
    }
    expected |= {f"long/systems/{name}/errors.csv" for name in ("sysA", "sysB", "-0.5")}
    assert expected <= set(tables), sorted(expected - set(tables))
    # the hostile values are there, guarded (the scan is not vacuous)
    errors = tables["single/errors.csv"]
    assert [row[0] for row in errors[1:]] == ["'" + i if live(i.lstrip("'")) and not NUMBER.fullmatch(i) else i for i in IDS]
    assert errors[1][-1] == "'=1+1" and errors[3][-1] == "-3"  # a kept column; a number stays a number
    assert {row[0] for row in tables["long/systems.csv"][1:]} == {"'=sysA", "'+sysB", "-0.5"}
    assert {row[3] for row in tables["bench/leaderboards.csv"][1:]} == {'\'=HYPERLINK("http://x")', "'@bad", "'+oracle"}
    assert {row[1] for row in tables["bench/sites.csv"][1:]} == {"'=A", "'-B", "'@C"}
    ratings = tables["gold/human_ratings.csv"]
    assert ratings[0][:3] == ["id", "reference", "candidate"] and len(ratings) == len(IDS) + 1
    assert '\'=HYPERLINK("http://evil","x") Small left pleural effusion.' in {row[1] for row in ratings}


def test_cxrevals_readers_give_the_ids_and_texts_back(written: Path) -> None:
    out = written / "out"
    assert load_result(out / "single").pair_ids == IDS  # "\t=2+2" kept as given, "'=quoted" whole
    assert load_result(out / "long" / "systems" / "sysA").pair_ids == IDS

    from cxreval.meta.human import read_plain_ratings
    from cxreval.review.db import ReviewDB

    with ReviewDB.open(written / "review.db") as opened:
        texts = {p.pair_id: (p.reference, p.candidate) for p in opened.pairs()}
    assert set(texts) == set(IDS)  # review sampling read errors.csv's ids back and found each in the input
    ratings = read_plain_ratings(out / "gold" / "human_ratings.csv")
    assert ratings.ids == list(ratings.ids) and set(ratings.ids) == set(IDS)
    assert [(r, c) for r, c in zip(ratings.references, ratings.candidates, strict=True)] == [texts[i] for i in ratings.ids]
    assert load_result(out / "gold").pair_ids == ratings.ids

    from cxreval.meta.perturb import read_suite

    suite = read_suite(out / "suite.csv")
    assert [(p.pair_id, p.source_uid, p.description, p.reference, p.candidate) for p in suite] == [
        (IDS[i], IDS[-1 - i], SITES[i], REFERENCES[i], CANDIDATES[i]) for i in range(len(IDS))
    ]

    done = run_cli("compare", out / "single", out / "copied", "--resamples", "20", "--permutations", "20", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n_pairs"] == len(IDS)
