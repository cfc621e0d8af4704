"""Kill a real ``cxreval evaluate`` run (SIGKILL) half-way and rerun it: no finished call repeats."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from cxreval.testing.loopback import LoopbackServer

from .llm_support import written_pairs

N_PAIRS = 30
HALF = 15


def _stored(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
    except sqlite3.OperationalError:  # table not created yet
        return 0


def _wait(cond, what: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_sigkill_half_way_then_rerun_repeats_no_finished_call(tmp_path):
    pairs = written_pairs(N_PAIRS, prefix="r")
    pairs_file = tmp_path / "pairs.csv"
    with pairs_file.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate"])
        w.writerows([p.pair_id, p.reference, p.candidate] for p in pairs)
    cache = tmp_path / "answers.sqlite"
    out = tmp_path / "out"
    # a small delay per call; after HALF answers the server holds further requests, so that the
    # kill lands while no answer is on its way (a finished call is one whose answer was sent)
    with LoopbackServer(latency=0.1, hold_after=HALF) as srv:
        cmd = [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--pairs",
            str(pairs_file),
            "--out",
            str(out),
            "--engine",
            "llm-pairwise",
            "--base-url",
            srv.base_url,
            "--model",
            "loopback",
            "--local-only",
            "--cache",
            str(cache),
            "--concurrency",
            "4",
            "--no-progress",
        ]
        env = {**os.environ, "OPENAI_API_KEY": ""}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait(lambda: srv.answered >= HALF and _stored(cache) >= HALF, "half of the answers to be stored")
            _wait(lambda: sum(e["status"] == "held" for e in srv.log) >= 1, "a held request")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        assert not (out / "scores.json").exists()  # the run really died before finishing
        finished_before = {e["request"] for e in srv.log if e["status"] == 200}
        assert len(finished_before) == HALF == _stored(cache)
        n_before = len(srv.log)
        srv.release()

        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        rerun = srv.log[n_before:]
        asked_again = {e["request"] for e in rerun}
        assert not asked_again & finished_before, "a finished call was repeated"
        assert len(rerun) == N_PAIRS - HALF and all(e["status"] == 200 for e in rerun)

        scores = json.loads((out / "scores.json").read_text())
        assert scores["n_pairs"] == N_PAIRS and scores["n_failed"] == 0
        assert (out / "failures.jsonl").read_text() == ""
        with (out / "errors.csv").open() as fh:
            assert {row["pair_id"] for row in csv.DictReader(fh)} == {p.pair_id for p in pairs}

        # a finished evaluation, run again: zero calls
        n = len(srv.log)
        again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert len(srv.log) == n
        assert "30 from cache" in again.stdout
