"""The command line with an LLM engine: flags, --max-cost exit code, --runs, the cache command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cxreval.testing.loopback import LoopbackServer


def _cli(*args: str, key: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": key, "CXREVAL_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "cxreval", *args], check=False, capture_output=True, text=True, env=env, timeout=300
    )


def test_cli_llm_engines_budget_runs_and_cache(tmp_path):
    cache = tmp_path / "c.sqlite"
    with LoopbackServer() as srv:
        common = ["--example", "--base-url", srv.base_url, "--model", "loopback", "--local-only", "--cache", str(cache)]
        # --max-cost without prices is refused before anything is sent
        bad = _cli("evaluate", "--out", str(tmp_path / "x"), "--engine", "llm-pairwise", *common, "--max-cost", "1")
        assert bad.returncode == 2 and "--price-input" in bad.stderr and not srv.log
        # a small budget: stops early with exit code 3, saves what it has, lists the rest; a hard cap
        out = tmp_path / "budget"
        stopped = _cli(
            "evaluate",
            "--out",
            str(out),
            "--engine",
            "llm-pairwise",
            *common,
            "--concurrency",
            "1",
            "--price-input",
            "0.25",
            "--price-output",
            "1",
            "--max-cost",
            "0.05",
        )
        assert stopped.returncode == 3, stopped.stderr
        assert "--max-cost" in stopped.stderr and "rerunning the same command resumes" in stopped.stderr
        scores = json.loads((out / "scores.json").read_text())
        failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
        assert scores["n_pairs"] + scores["n_failed"] == 20 and scores["n_failed"] == len(failures) > 0
        assert {f["reason"] for f in failures} == {"budget"}
        assert 0 < scores["usage"]["cost"] <= 0.05 and "engine:llm-pairwise@" in scores["signature"]
        # --runs 2 with the extract engine: per-run outputs and a mean +- sd summary
        runs = _cli(
            "evaluate",
            "--out",
            str(tmp_path / "runs"),
            "--engine",
            "llm-extract",
            *common,
            "--runs",
            "2",
            "--temperature",
            "0.5",
            "--schema",
            "dense",
        )
        assert runs.returncode == 0, runs.stderr
        summary = json.loads((tmp_path / "runs" / "runs.json").read_text())
        assert summary["runs"] == 2 and summary["n_failed"] == [0, 0]
        assert "runs:2" in summary["signature"] and "schema:dense" in summary["signature"]
        assert (tmp_path / "runs" / "run-2" / "judgements.jsonl.gz").exists()
        assert "mean +- sd" in runs.stdout
    shown = _cli("cache", "--path", str(cache))
    assert shown.returncode == 0 and "llm-pairwise@4" in shown.stdout and "llm-extract@4" in shown.stdout
    cleared = _cli("cache", "--path", str(cache), "--clear", "--model", "loopback")
    assert cleared.returncode == 0 and "deleted" in cleared.stdout
    assert "no cache yet" in _cli("cache", "--path", str(tmp_path / "none.sqlite")).stdout
