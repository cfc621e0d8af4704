"""The API key never reaches an output, the answer store or the terminal, in whatever encoding a
server echoes it (issue 27, item 3), and a malformed --llm-config never prints its lines.

The end-to-end test runs the CLI against a real HTTP server on 127.0.0.1 that quotes the key
back: in an answer with one character of it as a JSON ``\\u`` escape (decoded by the answer's
parser, so a matcher on the raw text misses it), without its ``sk-`` prefix in an error body, and
JSON-escaped twice (``/`` as ``\\\\/``) in an error body.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import quote, unquote

import pytest

from cxreval.llm.config import LLMConfig, LLMConfigError
from cxreval.testing.results import content

KEY = "sk-hostile/KQZJWXVBNM/0123456789/abcdefghij"
BODY = KEY[3:]  # the key's distinctive body, without its prefix


def _key_pieces(text: str, key: str = KEY, width: int = 8) -> list[str]:
    """Every piece of ``width`` characters of the key that ``text`` holds as it is."""
    return [key[i : i + width] for i in range(len(key) - width + 1) if key[i : i + width] in text]


def _decoded(text: str) -> str:
    """``text`` with JSON, Python, URL and HTML escapes decoded (any number of backslashes), so a
    test sees a key however it was escaped."""
    text = re.sub(r"\\+u([0-9a-fA-F]{4})|\\+x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    return unquote(html.unescape(re.sub(r"\\+([/\"'])", r"\1", text)))


def _u(text: str, at: int) -> str:
    """``text`` with its character ``at`` written as a JSON ``\\u`` escape."""
    return text[:at] + f"\\u{ord(text[at]):04x}" + text[at + 1 :]


# ------------------------------------------------------------------------------------------
# The redactor, through a backend's redact (the one every stored or printed string goes through)
# ------------------------------------------------------------------------------------------

ENCODINGS = {
    "as sent": KEY,
    "one character as a JSON \\u escape": _u(KEY, 4),
    "one character \\u-escaped inside a JSON answer": json.dumps({"evidence": f"key {KEY}"}).replace(KEY, _u(KEY, 7)),
    "every character \\u-escaped": "".join(f"\\u{ord(c):04x}" for c in KEY),
    "without its sk- prefix": BODY,
    "a long piece of it": KEY[11:31],
    "JSON-escaped twice, / as \\\\/": json.dumps(json.dumps({"detail": KEY}).replace("/", "\\/")),
    "the body JSON-escaped twice": json.dumps(json.dumps(BODY).replace("/", "\\/")),
    "Python \\x escapes": "".join(f"\\x{ord(c):02x}" for c in KEY),
    "URL-encoded, body only": quote(BODY, safe=""),
    "HTML character references": "".join(f"&#{ord(c)};" for c in BODY),
    "mixed: \\u, \\/ and plain": _u(KEY, 12).replace("/", "\\/"),
}


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_redact_matches_the_key_in_decoded_text(encoding, monkeypatch):
    from cxreval.llm.backends import OpenAIBackend

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    backend = OpenAIBackend(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))
    try:
        text = f"upstream said: {ENCODINGS[encoding]} (end)"
        for limit in (None, 40, 500):
            shown = backend.redact(text, limit)
            assert _key_pieces(_decoded(shown)) == [], (encoding, shown)
        whole = backend.redact(text, None)
        assert "[redacted]" in whole and whole.startswith("upstream said: ") and whole.endswith(" (end)")
    finally:
        asyncio.run(backend.aclose())


def test_redacted_json_stays_json_and_short_pieces_stay(monkeypatch):
    from cxreval.llm.backends import OpenAIBackend

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    backend = OpenAIBackend(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))
    try:
        answer = json.dumps({"entities": [{"entity": "pleural_effusion", "evidence": f"key {KEY}"}]})
        redacted = json.loads(backend.redact(answer.replace(KEY, _u(KEY, 5)), None))
        assert redacted["entities"][0] == {"entity": "pleural_effusion", "evidence": "key [redacted]"}
        # fewer than 8 characters of the key are not a key: a masked key and report text stay as they are
        assert (
            backend.redact("key sk-...ghij; Small left pleural effusion.", None) == "key sk-...ghij; Small left pleural effusion."
        )
    finally:
        asyncio.run(backend.aclose())


# ------------------------------------------------------------------------------------------
# End to end: llm-extract through the CLI, against a server that echoes the key
# ------------------------------------------------------------------------------------------


class _KeyEcho(ThreadingHTTPServer):
    """A chat-completions server on 127.0.0.1 that answers every extraction with one mention
    and quotes the request's key back where the report asks (``ECHO:answer``, ``ECHO:bare``,
    ``ECHO:double``)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _EchoHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        prompt = body["messages"][-1]["content"]
        key = self.headers.get("Authorization", "").split()[-1]
        if "ECHO:bare" in prompt:
            self._send(500, {"error": {"message": f"no such key: {key.split('-', 1)[1]}"}})
            return
        if "ECHO:double" in prompt:
            inner = json.dumps({"detail": f"upstream rejected {key}"}).replace("/", "\\/")
            self._send(500, {"error": {"message": inner}})
            return
        evidence = f"key {key}" if "ECHO:answer" in prompt else "effusion"
        mention = {
            "entity": "pleural_effusion",
            "status": "present",
            "side": "left",
            "zones": [],
            "severity": "none",
            "comparison": "none",
            "evidence": evidence,
        }
        # the answer's JSON text as a model may write it: one character of the key as a \u escape
        content = json.dumps({"entities": [mention]}).replace(key, _u(key, 5))
        self._send(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "model": "echo",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10},
            },
        )


def test_the_key_in_any_encoding_reaches_no_output_store_or_terminal(tmp_path):
    rows = [
        ("answer", "Small left pleural effusion. ECHO:answer"),
        ("bare", "Small left pleural effusion. ECHO:bare"),
        ("double", "Small left pleural effusion. ECHO:double"),
        ("plain", "Small left pleural effusion."),
    ]
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps({"id": i, "reference": "Left pleural effusion.", "candidate": c}) + "\n" for i, c in rows))
    out, cache = tmp_path / "o", tmp_path / "c.sqlite"
    with _KeyEcho() as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "cxreval",
                "evaluate",
                "--pairs",
                str(data),
                "--out",
                str(out),
                "--engine",
                "llm-extract",
                "--base-url",
                server.base_url,
                "--model",
                "echo",
                "--cache",
                str(cache),
                "--retries",
                "0",
                "--allow-failures",
                "1",
            ],
            check=False,
            capture_output=True,
            text=True,
            env={**os.environ, "OPENAI_API_KEY": KEY},
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    shown = {p.name: _readable(p) for p in out.iterdir() if p.is_file()}
    shown |= {
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "store": b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite*")).decode("latin-1"),
    }
    for where, text in shown.items():
        assert _key_pieces(text) == [] and _key_pieces(_decoded(text)) == [], where
    failures = {json.loads(x)["pair_id"]: json.loads(x) for x in shown["failures.jsonl"].splitlines()}
    assert set(failures) == {"bare", "double"}  # the 500s are listed, the echoed 200 is scored
    assert all("[redacted]" in f["error"] for f in failures.values())
    assert "key [redacted]" in shown["judgements.jsonl.gz"]  # the echo was decoded into the evidence, and caught


# ------------------------------------------------------------------------------------------
# A malformed --llm-config never prints its lines
# ------------------------------------------------------------------------------------------

SECRET = "sk-Pasted0123456789Abcdef"
BAD_YAML = {
    "unterminated quote": f'model: m\napi_key: "{SECRET}\ntemperature: 0\n',
    "mapping value in the value": f"model: m\napi_key: {SECRET}: x\n",
    "tab before the key": f"model: m\n\tapi_key: {SECRET}\n",
    "key as a tag": f"model: m\napi_key: !{SECRET} x\n",
    "key as an alias": f"model: m\napi_key: *{SECRET}\n",
    "unclosed flow sequence": f"model: m\nbase_url: [{SECRET}\n",
}


@pytest.mark.parametrize("case", list(BAD_YAML))
def test_a_malformed_config_gives_file_line_and_column_never_the_line(case, tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text(BAD_YAML[case])
    with pytest.raises(LLMConfigError) as exc:
        LLMConfig.load(path, env={})
    message = str(exc.value)
    assert str(path) in message and "line " in message and "column " in message, message
    assert _key_pieces(message, SECRET) == [], message
    assert "api_key" not in message, message  # not even the start of the line


def test_cli_never_prints_a_line_of_a_malformed_config(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text(BAD_YAML["unterminated quote"])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cxreval",
            "evaluate",
            "--example",
            "--out",
            str(tmp_path / "o"),
            "--engine",
            "llm-pairwise",
            "--llm-config",
            str(path),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    shown = " ".join((proc.stdout + proc.stderr).split())
    assert "line 4, column 1" in shown and "started at line 2, column 10" in shown
    assert _key_pieces(proc.stdout + proc.stderr, SECRET) == []


def test_a_bad_setting_in_the_file_is_placed_never_echoed(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text(f"model: m\ntemperature: 9\n{SECRET}: 1\ntemprature: 1\n")
    with pytest.raises(LLMConfigError) as exc:
        LLMConfig.load(path, env={})
    message = str(exc.value)
    assert f"temperature ({path}, line 2, column 1)" in message
    assert f"temprature ({path}, line 4, column 1)" in message  # a typo is named: it looks like a setting
    assert f"not shown (it may be a key) ({path}, line 3, column 1)" in message
    assert _key_pieces(message, SECRET) == []
    # a value set by a flag is not placed in the file
    with pytest.raises(LLMConfigError) as exc:
        LLMConfig.load(path, env={}, temperature=7.0)
    assert "temperature: " in str(exc.value) and "line 2" not in str(exc.value)


def _readable(path: Path) -> str:
    """A results file as text: a compressed one (judgements.jsonl.gz, .parquet) as what it holds."""
    if path.name.endswith(".gz"):
        return content(path).decode("utf-8")
    if path.suffix == ".parquet":
        return json.dumps(content(path), ensure_ascii=False)
    return path.read_text(errors="replace")
