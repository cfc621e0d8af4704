"""Explainable readings and user rules end to end (issue 29, items 2 and 3).

``cxreval extract --explain`` names the rule and cue behind each reading; a user rule file (a local
abbreviation and a local cue) reaches every place the rule engine is built (``cxreval evaluate
--rules``, ``Evaluator(rules=...)``, worker processes, bench configs, the reward), its ids appear
beside the evidence (``judgements.jsonl``, the bench drill-down, the review page) and its hash in
the signature; a bad rule file stops the run with exit 2 naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import yaml

import cxreval
from cxreval import Evaluator, ReportPair
from cxreval.bench.config import load_config
from cxreval.bench.runner import Runner, run_benchmark
from cxreval.engines import PARALLEL_MIN_PAIRS, get_engine
from cxreval.evaluate import load_result
from cxreval.extract.explain import explain_mention, rules_line
from cxreval.extract.rules import RuleExtractor, RulesError, load_rules
from cxreval.io import InputError
from cxreval.judge.table import JudgementTable
from cxreval.ontology import load_ontology
from cxreval.review.db import ReviewDB
from cxreval.reward import ClinicalReward
from cxreval.scores import Signature
from cxreval.testing.results import judgement_lines

from .test_review_cli import server
from .test_review_http import call

#: A local abbreviation (a name rule) and a local cue (a denial): neither is packaged.
LOCAL_RULES = (Path(__file__).parent / "rules" / "local.yaml").read_text(encoding="utf-8")
#: The second record (line 7) has a kind no rule has: the error must point at it.
BAD_RULES = """\
rules:
  - id: local.ok
    kind: name
    entity: pneumothorax
    phrases: [pnx]
    doc: fine
  - id: local.broken
    kind: abbreviation
    phrases: [x]
    doc: no such kind
"""
BAD_LINE = 7
PAIRS = [
    ("1", "Small left pneumothorax.", "No PNX."),  # FN: the candidate denies it in local words
    ("2", "Nil effusion.", "Small pleural effusion."),  # FP: the reference denies it with the local cue
    ("3", "Large right PNX.", "Large right pneumothorax."),  # TP: read only through the local name
]


def run_cli(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


@pytest.fixture()
def rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "local-rules.yaml"
    path.write_text(LOCAL_RULES, encoding="utf-8")
    return path


@pytest.fixture()
def bad_rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad-rules.yaml"
    path.write_text(BAD_RULES, encoding="utf-8")
    return path


@pytest.fixture()
def pairs_csv(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.csv"
    lines = ["id,reference,candidate", *(f"{i},{r},{c}" for i, r, c in PAIRS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- cxreval extract -------------------------------------------------------------------------------


def test_extract_explain_names_the_rule_its_cue_and_its_doc() -> None:
    done = run_cli("extract", "--explain", "No pleural effusion.")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "pleural_effusion  absent/negated  'No pleural effusion.'"
    doc = load_rules(load_ontology()).doc("negation.pre")
    assert doc and f"    status: negation.pre 'no' \u2014 {doc}" in lines
    assert any(line.startswith("    entity: finding.name") for line in lines)
    assert lines[-1].startswith("engine: rules@")


def test_extract_without_explain_shows_the_readings_only() -> None:
    done = run_cli("extract", "Small left pneumothorax, increased.", "Heart size is normal.")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "# 1" in out and "# 2" in out  # several reports: one heading each
    assert "pneumothorax  present/definite  side=left  severity=mild  change=increased" in out
    assert "cardiomegaly  absent/negated  implied" in out
    assert "negation.pre" not in out and "finding.name" not in out


def test_extract_json_lines_carry_the_rules() -> None:
    done = run_cli("extract", "--json", "No pleural effusion.")
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["entity"] == "pleural_effusion" and row["status"] == "absent" and row["cue"] == "no"
    assert row["rules"]["status"] == "negation.pre" and row["rules"]["entity"] == "finding.name"
    assert row["evidence"] == "No pleural effusion." and row["id"] == "1"


def test_extract_reads_a_table_or_a_text_file(tmp_path: Path) -> None:
    table = tmp_path / "reports.csv"
    table.write_text("study,text\na,No pneumothorax.\nb,Small right pleural effusion.\n", encoding="utf-8")
    done = run_cli("extract", "--file", table, "--id-col", "study", "--text-col", "text")
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("# a") < done.stdout.index("pneumothorax  absent") < done.stdout.index("# b")
    text = tmp_path / "report.txt"
    text.write_text("FINDINGS: No pneumothorax.\nIMPRESSION: Normal chest.\n", encoding="utf-8")
    done = run_cli("extract", "--file", text)
    assert done.returncode == 0, done.stderr
    assert "pneumothorax  absent" in done.stdout and done.stdout.count("\n") >= 2  # a mention and the engine line
    assert run_cli("extract", "--file", "-", stdin="No pneumothorax.").stdout.startswith("pneumothorax  absent")
    refused = run_cli("extract", "Text.", "--file", text)
    assert refused.returncode == 2 and "not both" in refused.stderr


def test_extract_with_a_user_rule_file(rule_file: Path) -> None:
    text = "Small left PNX. Nil effusion."
    plain = run_cli("extract", "--explain", text)
    assert plain.returncode == 0 and "pneumothorax" not in plain.stdout and "local." not in plain.stdout
    done = run_cli("extract", "--explain", "--rules", rule_file, text)
    assert done.returncode == 0, done.stderr
    assert "pneumothorax  present/definite  side=left  severity=mild  'Small left PNX.'" in done.stdout
    assert "    entity: local.pnx \u2014 Our radiologists write PNX for pneumothorax." in done.stdout
    assert "pleural_effusion  absent/negated  'Nil effusion.'" in done.stdout
    assert "    status: local.nil 'nil' \u2014 Nil before a finding denies it." in done.stdout
    assert done.stdout.splitlines()[-1] == f"engine: rules@{RuleExtractor().signature.split('@')[1]}.u{digest(rule_file)}"


def test_explain_helpers_give_one_line_and_the_per_reading_lines(rule_file: Path) -> None:
    onto = load_ontology()
    rules = load_rules(onto, rule_file)
    (m,) = RuleExtractor(onto, rules).extract("No PNX.").mentions
    assert rules_line(m.rule_ids, m.cue) == "local.pnx; negation.pre 'no'"
    assert rules_line(m.rules, m.cue) == rules_line(m.rule_ids, m.cue)  # the named view, the same line
    assert rules_line(None) == ""
    lines = explain_mention(m, rules)
    assert lines[0].startswith("status: negation.pre 'no' \u2014 ") and lines[1].startswith("entity: local.pnx \u2014 ")
    implied = RuleExtractor(onto).extract("Heart size is normal.").mentions[0]
    (line,) = explain_mention(implied)  # one rule set both readings: one line
    assert line.startswith("entity, status: normal.")


# -- user rules in a run ---------------------------------------------------------------------------


def test_evaluate_with_user_rules(tmp_path: Path, rule_file: Path, pairs_csv: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("evaluate", "--pairs", pairs_csv, "--rules", rule_file, "--out", out)
    assert done.returncode == 0, done.stderr
    hash_part = f".u{digest(rule_file)}|"
    assert hash_part in done.stdout.replace("\n", "")  # the printed signature
    scores = json.loads((out / "scores.json").read_text())
    assert hash_part in scores["signature"] and all(hash_part in m["signature"] for m in scores["metrics"])
    rows = {(r["pair_id"], r["entity"]): r for r in judgement_lines(out)}
    fn, fp, tp = rows["1", "pneumothorax"], rows["2", "pleural_effusion"], rows["3", "pneumothorax"]
    assert (fn["presence"], fp["presence"], tp["presence"]) == ("FN", "FP", "TP")
    assert fn["candidate_rules"] == "local.pnx; negation.pre 'no'"
    assert fn["reference_rules"] == "finding.name; finding.stated; attribute.side; attribute.severity"
    assert fp["reference_rules"] == "finding.name; local.nil 'nil'"
    assert tp["reference_rules"].startswith("local.pnx; finding.stated") and tp["location"] == "aligned"
    # the API reads the same file to the same signature and the same rows
    result = Evaluator(rules=rule_file).evaluate([ReportPair(pair_id=i, reference=r, candidate=c) for i, r, c in PAIRS])
    assert str(result.signature) == scores["signature"]
    # and the results folder reads back with its rule ids, and with its evidence given the input
    pairs = [ReportPair(pair_id=i, reference=r, candidate=c) for i, r, c in PAIRS]
    loaded = load_result(out, pairs=pairs)
    spans = {"reference_span", "candidate_span"}
    assert str(loaded.signature) == scores["signature"]
    assert [j.model_dump(exclude=spans) for j in loaded.judgements] == [
        j.model_dump(exclude=spans) for j in result.judgements if not j.implied
    ]


def test_a_bad_rule_file_stops_the_run_naming_file_and_line(tmp_path: Path, bad_rule_file: Path, pairs_csv: Path) -> None:
    where = f"{bad_rule_file}:{BAD_LINE}"
    out = tmp_path / "out"
    done = run_cli("evaluate", "--pairs", pairs_csv, "--rules", bad_rule_file, "--out", out)
    assert done.returncode == 2 and where in done.stderr.replace("\n", ""), done.stderr
    assert not out.exists()  # nothing was written
    done = run_cli("extract", "--rules", bad_rule_file, "No pneumothorax.")
    assert done.returncode == 2 and where in done.stderr.replace("\n", "")
    missing = run_cli("evaluate", "--pairs", pairs_csv, "--rules", tmp_path / "none.yaml", "--out", out)
    assert missing.returncode == 2 and "none.yaml" in missing.stderr
    with pytest.raises(RulesError, match=where):
        Evaluator(rules=bad_rule_file)


def test_rules_apply_to_the_rule_engine_only(tmp_path: Path, rule_file: Path, pairs_csv: Path) -> None:
    done = run_cli(
        "evaluate",
        "--pairs",
        pairs_csv,
        "--rules",
        rule_file,
        "--engine",
        "llm-pairwise",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--out",
        tmp_path / "out",
    )
    assert done.returncode == 2 and "--rules applies to the rule engine" in done.stderr
    with pytest.raises(ValueError, match="applies to the rules engine"):
        get_engine("llm-pairwise", load_ontology(), rules=rule_file)


def test_worker_processes_read_with_the_user_rules(rule_file: Path) -> None:
    base = [
        ReportPair(pair_id=f"{n}-{i}", reference=r, candidate=c)
        for i, r, c in PAIRS
        for n in range(PARALLEL_MIN_PAIRS // len(PAIRS) + 4)
    ]
    one = Evaluator(rules=rule_file, workers=1).evaluate(base)
    two = Evaluator(rules=rule_file, workers=2).evaluate(base)  # judged in two worker processes
    assert len(base) >= PARALLEL_MIN_PAIRS and str(one.signature) == str(two.signature)
    assert [j.model_dump() for j in two.judgements] == [j.model_dump() for j in one.judgements]
    assert {j.candidate_rules for j in two.judgements if j.entity == "pneumothorax"} >= {"local.pnx; negation.pre 'no'"}


def test_the_reward_reads_with_the_user_rules(rule_file: Path) -> None:
    reward = ClinicalReward("neg-errors", rules=rule_file)
    assert f".u{digest(rule_file)}" in str(reward.signature)
    assert reward.score_one("Small left pneumothorax.", "Small left PNX.") == 0.0
    assert ClinicalReward("neg-errors").score_one("Small left pneumothorax.", "Small left PNX.") == -1.0


# -- bench -----------------------------------------------------------------------------------------


def _bench_config(folder: Path, rules: str | None) -> Path:
    (folder / "refs.csv").write_text("id,report\n" + "".join(f"{i},{r}\n" for i, r, _ in PAIRS), encoding="utf-8")
    (folder / "cands.csv").write_text("id,report\n" + "".join(f"{i},{c}\n" for i, _, c in PAIRS), encoding="utf-8")
    cfg = {
        "name": "local",
        "out": str(folder / "out"),
        "metrics": ["spec-errors"],
        "bootstrap": {"resamples": 20, "seed": 0},
        "engine": {"name": "rules", "workers": 1, **({"rules": rules} if rules else {})},
        "datasets": [{"name": "d", "references": {"path": "refs.csv"}}],
        "systems": [{"name": "s", "path": "cands.csv"}],
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def test_bench_config_rules_and_a_rerun_with_another_file(tmp_path: Path, rule_file: Path) -> None:
    config = _bench_config(tmp_path, rule_file.name)  # relative to the config file
    cfg = load_config(config)
    assert cfg.engine.rules == rule_file.resolve()
    result, stats = run_benchmark(cfg)
    assert f".u{digest(rule_file)}" in result.engine_signature and stats.judged == len(PAIRS)
    examples = {(x.pair_id, x.kind): x for e in result.entities for x in e.examples}
    assert examples["1", "FN"].candidate_rules == "local.pnx; negation.pre 'no'"
    assert examples["2", "FP"].reference_rules == "finding.name; local.nil 'nil'"
    assert run_benchmark(cfg)[1].judged == 0  # the same file: every judgement from the cache
    rule_file.write_text(LOCAL_RULES.replace("[pnx]", "[pnx, ptx]"), encoding="utf-8")
    again, stats = run_benchmark(cfg)  # another file: another signature, judged again, not reused
    assert again.engine_signature != result.engine_signature and stats.judged == len(PAIRS)


def test_bench_config_rules_errors(tmp_path: Path, bad_rule_file: Path) -> None:
    with pytest.raises(RulesError, match=f"{bad_rule_file}:{BAD_LINE}"):
        Runner(load_config(_bench_config(tmp_path, bad_rule_file.name)))
    done = run_cli("bench", _bench_config(tmp_path, bad_rule_file.name))
    assert done.returncode == 2 and f"{bad_rule_file}:{BAD_LINE}" in done.stderr.replace("\n", "")
    config = _bench_config(tmp_path, "x.yaml")
    data = yaml.safe_load(config.read_text())
    data["engine"] = {"name": "llm-pairwise", "rules": "x.yaml", "llm": {"model": "m"}}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError, match="applies to the rules engine"):
        load_config(config)


# -- older files -------------------------------------------------------------------------------------


def test_files_written_before_the_rule_ids_still_read(tmp_path: Path) -> None:
    result = cxreval.evaluate(
        [ReportPair(pair_id="1", reference="Small left pleural effusion.", candidate="No pleural effusion.")]
    )
    result.save(tmp_path, rows="full")
    lines = judgement_lines(tmp_path)
    assert lines[0]["candidate_rules"] == "finding.name; negation.pre 'no'"
    old = [{k: v for k, v in row.items() if not k.endswith("_rules")} for row in lines]
    # a folder of cxreval 0.7 or before: judgements.jsonl, every row, evidence as text
    (tmp_path / "judgements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    (tmp_path / "judgements.jsonl.gz").unlink()
    loaded = load_result(tmp_path)
    assert loaded.judgements[0].candidate_rules == "" and loaded.errors.loc["1", "errors"] == 1
    # a bench cache row of seven fields (no rules) is read with empty rules
    table = JudgementTable.from_compact(
        ["p"], [[["pneumothorax", "FN", "not-available", "not-available", "other", "ref", "cand"]]]
    )
    assert table.rows()[0].reference == "ref" and table.rows()[0].reference_rules == ""


def test_the_review_page_gets_the_rules_and_old_databases_still_open(tmp_path: Path, rule_file: Path, pairs_csv: Path) -> None:
    results = tmp_path / "results"
    assert run_cli("evaluate", "--pairs", pairs_csv, "--rules", rule_file, "--out", results).returncode == 0
    db = tmp_path / "review.db"
    done = run_cli("review", "init", results, "--db", db, "--sample", "3", "--pairs", pairs_csv)
    assert done.returncode == 0, done.stderr
    with ReviewDB.open(db) as opened:
        rows = {(r.pair_id, r.entity): r for r in opened.engine_rows()}
    assert rows["1", "pneumothorax"].candidate_rules == "local.pnx; negation.pre 'no'"
    with server(db) as (_, url):
        base, query = url.split("?")[0].rstrip("/"), url.split("?")[1] if "?" in url else ""
        position = next(p["position"] for p in call(f"{base}/api/state?reviewer=ann&{query}")[2]["pairs"] if p["pair_id"] == "1")
        pair = call(f"{base}/api/pair/{position}?reviewer=ann&{query}")[2]
    (row,) = [r for r in pair["rows"] if r["entity"] == "pneumothorax"]
    assert row["candidate_rules"] == "local.pnx; negation.pre 'no'" and row["reference_rules"].startswith("finding.name")
    # a database made before the rule columns: its rows read with empty rules
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript("""
            CREATE TABLE old_rows AS SELECT pair_id, entity, presence, location, severity, comparison,
                reference_evidence, candidate_evidence FROM engine_rows;
            DROP TABLE engine_rows;
            ALTER TABLE old_rows RENAME TO engine_rows;""")
    with ReviewDB.open(db) as opened:
        old = opened.engine_rows()
    assert old and {r.candidate_rules for r in old} == {""}
    assert Signature.parse(str(Evaluator(rules=rule_file).signature)).engine.endswith(f".u{digest(rule_file)}")
