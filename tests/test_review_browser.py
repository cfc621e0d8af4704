"""A whole review session in headless Chromium, driven by the keyboard only.

Two reviewers work at once (two browsers against one ``cxreval review serve``); the server is
killed with SIGKILL mid-session (one reviewer answers while it is down) and restarted; the other
reviewer reloads and resumes. Keys go through the DevTools protocol (``Input.dispatchKeyEvent``:
the page's own script handles them, nothing is POSTed by the test). Then ``review stats`` and
``review export`` run, and every figure is checked against one computed here, by hand, from the
answers the keys gave. Also writes ``docs/review.png`` when ``CXREVAL_REVIEW_SCREENSHOT`` is set.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from cxreval.evaluate import load_result
from cxreval.ontology import load_ontology

from .test_report_browser import Page, chromium, find_chromium, png_info
from .test_review_cli import db_rows, make_db, run_cli, server

FIELDS = ("presence", "location", "severity", "comparison")
CYCLE = {
    "presence": ["TP", "FP", "FN", "TN"],
    "location": ["aligned", "not-aligned", "not-available"],
    "severity": ["aligned", "not-aligned", "not-available"],
    "comparison": ["other", "adding-unmentioned-comparison", "missing-mentioned-comparison", "conflicting-comparison"],
}
IMPLICIT = {"presence": "TN", "location": "not-available", "severity": "not-available", "comparison": "other"}
KEYS = {
    "a": ("KeyA", 65),
    "p": ("KeyP", 80),
    "l": ("KeyL", 76),
    "s": ("KeyS", 83),
    "c": ("KeyC", 67),
    "j": ("KeyJ", 74),
    "n": ("KeyN", 78),
    "+": ("Equal", 187),
    "Enter": ("Enter", 13),
}

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="headless Chromium not installed")


def press(page: Page, key: str) -> None:
    code, vk = KEYS[key]
    text = "\r" if key == "Enter" else key
    page.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, windowsVirtualKeyCode=vk, text=text)
    page.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk)


def settle(page: Page) -> dict[str, Any]:
    """Wait until every answer the page took is committed (or queued while the server is down)."""
    page.js("window.cxrReview.idle()")
    return page.js("window.cxrReview.state()")


def open_page(page: Page, url: str) -> dict[str, Any]:
    page.send("Page.navigate", url=url)
    page.js(
        "new Promise(r => { const t = () => window.cxrReview && window.cxrReview.state().ready ? r() : setTimeout(t, 50); t(); })"
    )
    return settle(page)


class Reviewer:
    """Drives one browser page and records, independently of the page, what each key means."""

    def __init__(
        self, name: str, page: Page, engine: dict[str, dict[str, dict[str, str]]], attributes: dict[str, list[str]]
    ) -> None:
        self.name, self.page, self.engine, self.attributes = name, page, engine, attributes
        self.expected: dict[tuple[str, str], dict[str, str]] = {}
        self.checked: list[str] = []
        self.notes: dict[str, str] = {}

    def plan(self, position: int, index: int, entity: str) -> list[str]:
        """Keys for one row: corrections on some rows (by a fixed rule), acceptance elsewhere."""
        attrs = self.attributes[entity]
        if self.name == "alice":
            if (position + index) % 3 == 0:
                return ["p", "j"]
            if (position + index) % 5 == 2 and "location" in attrs:
                return ["l", "j"]
        else:
            if (2 * position + index) % 4 == 0:
                return ["p", "p", "j"]
            if index == 1 and "comparison" in attrs:
                return ["c", "j"]
        return ["a"]

    def apply(self, pair_id: str, entity: str, keys: list[str]) -> None:
        """What the keys do to the answer (the documented meaning of each key)."""
        for k in keys:
            base = dict(self.expected.get((pair_id, entity)) or self.engine[pair_id].get(entity) or IMPLICIT)
            if k == "a":
                self.expected[(pair_id, entity)] = dict(self.engine[pair_id][entity])
            elif k in ("p", "l", "s", "c"):
                field = {"p": "presence", "l": "location", "s": "severity", "c": "comparison"}[k]
                values = CYCLE[field]
                base[field] = values[(values.index(base[field]) + 1) % len(values)]
                self.expected[(pair_id, entity)] = base

    def answer_rows(self, limit: int | None = None, wait: bool = True) -> dict[str, Any]:
        """Answer the open rows of the current pair from the selected one on (``limit`` rows);
        ``wait=False``: do not wait for the answers to be committed (the server is down)."""
        state = settle(self.page)
        pair_id, position = state["pair_id"], state["position"]
        entities = [r["entity"] for r in state["rows"] if not r["added"]]
        assert entities == list(self.engine[pair_id]), "the page lists the engine's rows in order"
        start = state["sel"]
        for index in range(start, len(entities) if limit is None else min(len(entities), start + limit)):
            assert settle(self.page)["entity"] == entities[index]
            keys = self.plan(position, index, entities[index])
            for k in keys:
                press(self.page, k)
            self.apply(pair_id, entities[index], keys)
        return settle(self.page) if wait else self.page.js("window.cxrReview.state()")

    def add_entity(self, entity_name: str, entity_id: str, extra: list[str]) -> None:
        pair_id = settle(self.page)["pair_id"]
        press(self.page, "+")
        self.page.send("Input.insertText", text=entity_name)
        press(self.page, "Enter")
        for k in extra:
            press(self.page, k)
        answer = {**IMPLICIT, "presence": "FN"}
        for k in extra:
            field = {"p": "presence"}[k]
            answer[field] = CYCLE[field][(CYCLE[field].index(answer[field]) + 1) % len(CYCLE[field])]
        self.expected[(pair_id, entity_id)] = answer
        settle(self.page)

    def write_note(self, text: str) -> None:
        pair_id = settle(self.page)["pair_id"]
        press(self.page, "n")
        self.page.send("Input.insertText", text=text)
        press(self.page, "Enter")
        self.notes[pair_id] = text
        settle(self.page)

    def check_pair(self) -> None:
        pair_id = settle(self.page)["pair_id"]
        press(self.page, "Enter")
        settle(self.page)
        self.checked.append(pair_id)

    def review(self, pairs: int, add: dict[int, tuple[str, str, list[str]]], note: dict[int, str]) -> None:
        for _ in range(pairs):
            position = settle(self.page)["position"]
            self.answer_rows()
            if position in add:
                self.add_entity(*add[position])
            if position in note:
                self.write_note(note[position])
            self.check_pair()


@needs_chromium
def test_keyboard_review_session_with_a_crash(tmp_path: Path) -> None:
    db = make_db(tmp_path, sample=8, seed=3)
    onto = load_ontology()
    attributes = {e.id: list(e.attributes) for e in onto.entities}
    engine: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for pid, entity, *values in db_rows(
        db, "SELECT pair_id, entity, presence, location, severity, comparison FROM engine_rows ORDER BY pair_id, rowid"
    ):
        engine[pid][entity] = dict(zip(FIELDS, values))
    order = [pid for (pid,) in db_rows(db, "SELECT pair_id FROM pairs ORDER BY position")]
    for pid in order:
        engine.setdefault(pid, {})
    # an entity neither the engine nor the reports mention in the third pair: the one "missed"
    third = order[2]
    missed = next(e for e in onto.entities if e.critical and e.id not in engine[third])

    with server(db) as (proc, url):
        port = int(url.split(":")[2].split("/")[0])
        base = url.split("?")[0]
        with chromium(1400, 900) as page_a, chromium(1400, 900) as page_b:
            alice = Reviewer("alice", page_a, engine, attributes)
            bob = Reviewer("bob", page_b, engine, attributes)
            first = open_page(page_a, f"{base}?reviewer=alice")
            assert first["position"] == 1
            row = first["rows"][first["sel"]]  # the rule engine's rules of the selected row, under each report
            assert row["reference_rules"] or row["candidate_rules"]
            for side in ("reference", "candidate"):
                shown = page_a.js(f"document.getElementById('{side}-rules').textContent")
                assert (row[f"{side}_rules"] in shown) if row[f"{side}_rules"] else shown == ""
            assert open_page(page_b, f"{base}?reviewer=bob")["position"] == 1
            # both at once: pair by pair, turn about
            for _ in range(3):
                alice.review(1, {3: (missed.name, missed.id, [])}, {})
                bob.review(1, {3: (missed.name, missed.id, ["p"])}, {2: "side of the effusion?"})
            alice.review(1, {}, {})
            alice.answer_rows(limit=1)  # alice is half-way through pair 5 when the server dies
            bob_state = settle(page_b)
            assert bob_state["position"] == 4

            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            # bob answers while the server is down: the page keeps the answer and retries
            bob.answer_rows(limit=1, wait=False)
            shown = page_b.js(
                "new Promise(r => { const t0 = Date.now(); const t = () => { const s = "
                "document.getElementById('save-state').textContent; s.includes('unreachable') || "
                "Date.now() - t0 > 20000 ? r(s) : setTimeout(t, 50); }; t(); })"
            )
            assert "unreachable" in shown and "answers kept" in shown
            with server(db, port=port) as (proc2, url2):
                assert f":{port}/" in url2
                settle(page_b)  # the retried answer is committed now
                # alice reloads: she resumes on her first open pair, on its first open row
                resumed = open_page(page_a, f"{base}?reviewer=alice")
                assert resumed["position"] == 5 and resumed["sel"] == (1 if len(engine[order[4]]) > 1 else 0)
                assert resumed["checked"] == 4
                alice.answer_rows()
                alice.check_pair()
                alice.review(3, {}, {})
                bob.answer_rows()
                bob.check_pair()
                bob.review(4, {}, {7: "hedged wording"})
                assert settle(page_a)["checked"] == settle(page_b)["checked"] == 8
                assert "8 checked" in page_a.js("document.getElementById('progress-text').textContent")
                assert page_a.errors() == [], page_a.errors()  # alice's page never saw the server down
                hosts = {u.split("/")[2] for u in page_a.requests() + page_b.requests() if u.startswith("http")}
                assert hosts == {f"127.0.0.1:{port}"}, hosts  # nothing left the machine
                if os.environ.get("CXREVAL_REVIEW_SCREENSHOT"):
                    page_a.send("Page.navigate", url=f"{base}?reviewer=alice")
                    page_a.js("new Promise(r => setTimeout(r, 800))")
                    page_a.js("document.querySelectorAll('#strip a')[3].click()")
                    page_a.js("new Promise(r => setTimeout(r, 500))")
                    shot = base64.b64decode(page_a.send("Page.captureScreenshot", format="png")["data"])
                    Path(os.environ["CXREVAL_REVIEW_SCREENSHOT"]).write_bytes(shot)
                    assert png_info(shot)[2] > 50

    # nothing answered is lost: the database holds exactly what the keys gave
    stored = {
        (r, p, e): dict(zip(FIELDS, v))
        for r, p, e, *v in db_rows(db, "SELECT reviewer, pair_id, entity, presence, location, severity, comparison FROM answers")
    }
    expected = {("alice", p, e): v for (p, e), v in alice.expected.items()}
    expected |= {("bob", p, e): v for (p, e), v in bob.expected.items()}
    assert stored == expected
    assert sorted(db_rows(db, "SELECT reviewer, pair_id FROM checked")) == sorted(
        [("alice", p) for p in alice.checked] + [("bob", p) for p in bob.checked]
    )
    assert sorted(alice.checked) == sorted(bob.checked) == sorted(order)
    assert {(p, n) for _, p, n in db_rows(db, "SELECT reviewer, pair_id, note FROM notes")} == set(bob.notes.items())

    # -- stats, by hand ------------------------------------------------------------------------------
    size = dict(db_rows(db, "SELECT key, size FROM strata"))
    stratum = dict(db_rows(db, "SELECT pair_id, stratum FROM pairs"))
    per_stratum = Counter(stratum.values())
    weight = {p: size[stratum[p]] / per_stratum[stratum[p]] for p in order}

    def counts(field: str) -> tuple[int, int, float, float]:
        k = n = 0
        wk = wn = 0.0
        for (_reviewer, pid, entity), mine in expected.items():
            theirs = engine[pid].get(entity, IMPLICIT)
            if field != "presence" and (
                field not in attributes[entity] or (theirs["presence"] == "TN" and mine["presence"] == "TN")
            ):
                continue
            ok = theirs[field] == mine[field]
            k, n, wk, wn = k + ok, n + 1, wk + weight[pid] * ok, wn + weight[pid]
        return k, n, wk, wn

    done = run_cli(
        "review",
        "stats",
        db,
        "--json",
        "--resamples",
        "300",
        "--csv",
        tmp_path / "s.csv",
        "--latex",
        tmp_path / "s.tex",
        "--html",
        tmp_path / "s.html",
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["pairs_reviewed"] == 8 and stats["reviews"] == 16 and stats["reviewers"] == ["alice", "bob"]
    for row in stats["fields"]:
        k, n, wk, wn = counts(row["field"])
        assert (row["correct"], row["observations"]) == (k, n), row["field"]
        if n:
            assert row["accuracy"] == pytest.approx(k / n)
            assert row["weighted_accuracy"] == pytest.approx(wk / wn)
            assert row["low"] <= row["accuracy"] <= row["high"]
            assert "metric:review-accuracy" in row["signature"] and "ci:clopper-pearson" in row["signature"]
            assert "sample_seed:3" in row["weighted_signature"] and "resamples:300" in row["weighted_signature"]
    assert stats["fields"][0]["observations"] > 0 and stats["fields"][0]["correct"] < stats["fields"][0]["observations"]

    # Cohen's kappa by hand on presence: each (pair, entity) of either reviewer, both reviewers' values
    items = sorted({(p, e) for (_, p, e) in expected} | {(p, e) for p in order for e in engine[p]})
    a = [expected.get(("alice", p, e), IMPLICIT)["presence"] for p, e in items]
    b = [expected.get(("bob", p, e), IMPLICIT)["presence"] for p, e in items]
    observed = sum(x == y for x, y in zip(a, b)) / len(a)
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[c] * cb[c] for c in ca) / len(a) ** 2
    presence = next(g for g in stats["agreement"] if g["field"] == "presence")
    assert presence["method"] == "cohen" and presence["items"] == len(items)
    assert presence["observed"] == pytest.approx(observed)
    assert presence["kappa"] == pytest.approx((observed - chance) / (1 - chance))
    worst = stats["worst_entities"][0]
    assert worst["errors"] > 0 and worst["examples"] and "metric:review-errors" in worst["signature"]
    csv_text = (tmp_path / "s.csv").read_text()
    assert csv_text.startswith("section,name,value,low,high") and csv_text.count("review-accuracy") == 8
    assert "\\begin{tabular}" in (tmp_path / "s.tex").read_text()
    html = (tmp_path / "s.html").read_text()
    assert "default-src 'none'" in html and "http://" not in html and "https://" not in html
    for row in stats["fields"]:  # the page shows the same numbers, signed the same way
        if row["accuracy"] is not None:
            assert f"{100 * row['accuracy']:.1f} [{100 * row['low']:.1f}, {100 * row['high']:.1f}]" in html
    assert stats["fields"][0]["signature"].replace("'", "&#39;") in html

    # -- export: majority per field, ties to alice (alphabetical), read back as evaluate's output ---
    done = run_cli("review", "export", db, "--out", tmp_path / "gold")
    assert done.returncode == 0, done.stderr
    gold = load_result(tmp_path / "gold")
    assert sorted(gold.pair_ids) == sorted(order)
    want = {}
    for pid, entity in items:
        values = [expected.get((r, pid, entity), IMPLICIT) for r in ("alice", "bob")]
        row = {f: values[0][f] for f in FIELDS}  # two raters: agreement, or a tie that alice wins
        if entity in engine[pid] or row != IMPLICIT:
            want[(pid, entity)] = row
    assert {(r.pair_id, r.entity): {f: getattr(r, f) for f in FIELDS} for r in gold.judgements} == want
    assert missed.id in {r.entity for r in gold.judgements if r.pair_id == third}
    assert "engine:human-review" in str(gold.signature) and "reviewers:alice+bob" in str(gold.signature)
    # the gold folder is a results folder like any other: compare it with itself, and review it again
    done = run_cli("compare", tmp_path / "gold", tmp_path / "gold", "--json", "--resamples", "10", "--permutations", "10")
    assert done.returncode == 0, done.stderr


if __name__ == "__main__":  # python -m tests.test_review_browser OUT.png: the README's screenshot
    os.environ["CXREVAL_REVIEW_SCREENSHOT"] = str(Path(sys.argv[1]).resolve())
    sys.exit(pytest.main(["-q", "-x", __file__ + "::test_keyboard_review_session_with_a_crash"]))
