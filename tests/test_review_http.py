"""The review server over plain HTTP (urllib against the real ``cxreval review serve`` on
127.0.0.1): security headers, the API, answers committed before the reply, the token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .test_review_cli import db_rows, make_db, server

CSP = "default-src 'self'"


def call(
    url: str, body: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[int, dict[str, str], Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(
        url, data=data, headers={**hdrs, **(headers or {})}, method="POST" if data is not None else "GET"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, head, text = resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        status, head, text = exc.code, dict(exc.headers), exc.read()
    head = {k.lower(): v for k, v in head.items()}
    try:
        return status, head, json.loads(text)
    except ValueError:
        return status, head, text.decode(errors="replace")


def test_page_api_and_headers(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with server(db) as (_, url):
        base = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
        assert urlsplit(url).hostname == "127.0.0.1" and "token=" not in url
        for path in ("/", "/static/review.js", "/static/review.css", "/api/state?reviewer=ann"):
            status, head, _ = call(base + path)
            assert status == 200, path
            assert head["content-security-policy"].startswith(CSP) and "'unsafe-inline'" not in head["content-security-policy"]
            assert head["x-content-type-options"] == "nosniff" and head["referrer-policy"] == "no-referrer"
        status, _, page = call(base + "/")
        assert '<script src="/static/review.js"' in page and "http" not in page.split("<body>")[0].replace("http-equiv", "")
        _, _, js = call(base + "/static/review.js")
        assert "http://" not in js and "https://" not in js  # nothing loaded from anywhere else

        _, _, state = call(base + "/api/state?reviewer=ann")
        assert state["total"] == 8 and state["checked"] == 0 and len(state["entities"]) > 100
        first = state["pairs"][0]
        _, _, pair = call(base + f"/api/pair/{first['position']}?reviewer=ann")
        assert pair["pair_id"] == first["pair_id"] and pair["reference"] and pair["candidate"]
        row = pair["rows"][0]

        # an answer is committed before the reply: the database has it when the reply comes
        answer = {
            "reviewer": "ann",
            "pair_id": pair["pair_id"],
            "entity": row["entity"],
            **row["engine"],
            "presence": "FN" if row["engine"]["presence"] != "FN" else "TP",
        }
        status, _, saved = call(base + "/api/answer", answer)
        assert status == 200 and saved["saved"]["presence"] == answer["presence"]
        assert db_rows(db, "SELECT reviewer, entity, presence FROM answers") == [("ann", row["entity"], answer["presence"])]
        _, _, again = call(base + f"/api/pair/{first['position']}?reviewer=ann")
        assert again["rows"][0]["answer"]["presence"] == answer["presence"]
        _, _, other = call(base + f"/api/pair/{first['position']}?reviewer=bob")
        assert other["rows"][0]["answer"] is None  # reviewers do not see each other's answers

        # an added entity, a note, a pair checked only once every row is answered
        status, _, body = call(
            base + "/api/answer", {"reviewer": "ann", "pair_id": pair["pair_id"], "entity": "rib_fracture", "presence": "FN"}
        )
        assert status == 200 and body["saved"]["added"] is True
        status, _, body = call(base + "/api/note", {"reviewer": "ann", "pair_id": pair["pair_id"], "note": "side?"})
        assert status == 200
        if len(pair["rows"]) > 1:
            status, _, body = call(base + "/api/checked", {"reviewer": "ann", "pair_id": pair["pair_id"]})
            assert status == 400 and "not answered yet" in body["error"]
        for r in pair["rows"][1:]:
            call(base + "/api/answer", {"reviewer": "ann", "pair_id": pair["pair_id"], "entity": r["entity"], **r["engine"]})
        status, _, body = call(base + "/api/checked", {"reviewer": "ann", "pair_id": pair["pair_id"]})
        assert status == 200 and body["progress"] == 1
        assert db_rows(db, "SELECT reviewer, pair_id FROM checked") == [("ann", pair["pair_id"])]
        assert db_rows(db, "SELECT note FROM notes") == [("side?",)]

        # refusals name what is wrong
        status, _, body = call(base + "/api/answer", {**answer, "presence": "maybe"})
        assert status == 422 and "presence" in body["error"]
        status, _, body = call(base + "/api/answer", {**answer, "pair_id": "nope"})
        assert status == 400 and "nope" in body["error"]
        status, _, body = call(base + "/api/state?reviewer=<script>")
        assert status == 400 and "reviewer name" in body["error"]
        status, _, body = call(
            base + "/api/answer", raw=b"reviewer=ann", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert status == 415  # a cross-site form cannot post answers
        status, _, body = call(base + "/api/state?reviewer=ann", headers={"Host": "attacker.example"})
        assert status == 421  # DNS rebinding: only the server's own name is served
        status, _, body = call(base + "/api/pair/99?reviewer=ann")
        assert status == 404 and "no pair at position 99" in body["error"]


def test_non_loopback_address_needs_the_token(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    try:
        ctx = server(db, host="0.0.0.0")
        proc_url = ctx.__enter__()
    except AssertionError as exc:  # an environment without IPv4 "any" address
        pytest.skip(f"cannot bind 0.0.0.0: {exc}")
    try:
        _, url = proc_url
        parts = urlsplit(url)
        token = dict(p.split("=", 1) for p in parts.query.split("&"))["token"]
        assert len(token) >= 24
        base = f"http://127.0.0.1:{parts.port}"
        status, head, body = call(base + "/api/state?reviewer=ann")
        assert status == 403 and "token" in body["error"] and head["content-security-policy"].startswith(CSP)
        status, _, _ = call(base + "/api/state?reviewer=ann&token=wrong")
        assert status == 403
        status, _, body = call(base + f"/api/state?reviewer=ann&token={token}")
        assert status == 200 and body["total"] == 8
        status, _, _ = call(base + "/api/state?reviewer=ann", headers={"X-Review-Token": token})
        assert status == 200
    finally:
        ctx.__exit__(None, None, None)
