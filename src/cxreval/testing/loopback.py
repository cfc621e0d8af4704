"""A chat-completions server on 127.0.0.1 that answers with the rule engine, or fails on demand.

For tests, benchmarks and dry runs of the LLM engines without an LLM: it speaks the OpenAI
chat-completions API (``POST /v1/chat/completions``) and the Anthropic Messages API
(``POST /v1/messages``), reads the reports out of cxreval's prompts, and answers in the
requested schema (dense or sparse, pairwise or extract) with what the rule engine reads, so an
LLM engine run against it must reproduce the rule engine's judgements exactly. Reports are read
out of their fences with :func:`cxreval.llm.prompts.read_fenced`, whole whatever they contain
(fenced blocks it cannot read exactly get a 400); the mode and options come from the prompt text
before the first fence only, never from report text.

Faults are asked for by writing ``FAULT:<name>`` in a report: ``timeout`` (first request sleeps past
the client's timeout), ``429`` (first request: 429 with ``Retry-After: 1``), ``500`` (first two
requests), ``drop`` (first request: connection closed without an answer), ``truncate`` (first answer
cut in half), ``whitespace-loop`` (first answer cut in half and followed by whitespace up to its
limit, finish reason ``length``: guided decoding's whitespace loop), ``schema`` (first answer has a
value outside the enum), ``unknown`` (first answer names an entity that does not exist),
``duplicate`` / ``duplicate-tie`` (an entity judged three times, majority = the right verdict /
twice, right verdict first), the malformed HTTP 200s of :data:`MALFORMED` (``cut-body``,
``no-message``, ``content-not-string``, ``usage-not-int``, ``no-usage``, ``negative-usage``,
``zero-usage`` (0 tokens in and out), ``not-a-message``, ``bad-block``, ``deep-body`` (the body
nested 3,000 deep), ``long-int-body`` (the body holds a 5,000-digit integer)), ``deep-answer`` /
``long-int-answer`` (first answer's content nested 3,000 deep / holding a 5,000-digit integer;
Anthropic: as a text block), ``echo-key-answer`` (a 200 whose answer quotes the key), ``huge`` (an
answer with a 3 MB extra field), ``empty`` (first answer lists no entity: ``{"entities": []}``;
dense: every entity TN / not-mentioned), ``echo-key`` (a 500 whose body quotes the request's
Authorization header), ``echo-key-pad-<N>`` (the same, after N dots: the key lands where an error
message may be cut), ``echo-key-escaped`` (a 500 whose body, cut-off JSON, quotes the credentials
JSON-escaped: ``/`` as ``\\/``). ``<name>-always`` repeats the
fault on every request (``echo-key-pad-<N>`` and ``echo-key-escaped`` always do). ``latency``
delays every answer; ``hold_after`` holds every request after the first N until
:meth:`LoopbackServer.release` (to kill a client at a moment when no answer is in flight);
``script`` answers a prompt with a scripted object instead of the rule engine's (faults apply).

It binds to 127.0.0.1 only. ``python -m cxreval.testing.loopback --port 8011 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cxreval.extract.models import Extraction
from cxreval.extract.rules import RuleExtractor
from cxreval.judge.compare import compare_extractions
from cxreval.llm.prompts import FENCE_OPEN, read_fenced
from cxreval.ontology import Ontology, load_ontology

HOST = "127.0.0.1"
_FAULT = re.compile(r"FAULT:([a-z0-9\-]+)")
_TAG = {name: re.compile(rf"<{name}>\n?(.*?)\n?</{name}>", re.DOTALL) for name in ("reference", "candidate", "report")}
_UNCERTAIN_NEG = "counts as absent"
_LABEL_TASK = "LABEL TASK"


class Oracle:
    """Builds the answer a perfect judge would give, from the rule engine."""

    def __init__(self, ontology: Ontology) -> None:
        self.ontology = ontology
        self.extractor = RuleExtractor(ontology)
        self.extract = lru_cache(maxsize=4096)(self._extract)

    def _extract(self, text: str) -> Extraction:
        return self.extractor.extract(text)

    def pairwise(self, reference: str, candidate: str, uncertain: str) -> list[dict[str, Any]]:
        # spec_compat: the pairwise schema holds SPEC-CXR's three comparison values only
        rows = compare_extractions(
            "x",
            self.extract(reference),
            self.extract(candidate),
            self.ontology,
            uncertain,  # type: ignore[arg-type]
            spec_compat=True,
        )
        return [
            {
                "entity": r.entity,
                "reference_quote": r.reference,
                "candidate_quote": r.candidate,
                "presence": r.presence,
                "specificity": r.specificity,
                "location": r.location,
                "severity": r.severity,
                "comparison": r.comparison,
            }
            for r in rows
        ]

    def mentions(self, text: str, max_evidence: int) -> list[dict[str, Any]]:
        out = []
        for m in self.extract(text).mentions:
            if m.historical and m.status != "absent":
                continue
            item: dict[str, Any] = {
                "entity": m.entity,
                "status": m.status,
                "side": m.side or "none",
                "zones": list(m.zones[:3]),
                "severity": m.severity or "none",
                "comparison": m.comparison or "none",
            }
            if max_evidence:
                item["evidence"] = m.sentence[:max_evidence]
            out.append(item)
        return out

    def labels(self, text: str, prompt: str) -> dict[str, int]:
        """A labeler's answer: the rule engine's projection (present 1, uncertain -1, anything else 0)."""
        from cxreval.labelers import label_key
        from cxreval.scores.labels import project_extraction

        keys = set(re.findall(r"^- ([a-z0-9_]+) \(", prompt, flags=re.MULTILINE))
        labelset = next(
            (
                ls
                for ls, spec in self.ontology.labelsets.items()
                if spec.kind == "labels" and {label_key(x) for x in spec.labels} == keys
            ),
            "ran21",
        )
        values = project_extraction(self.extract(text), self.ontology, labelset)
        return {label_key(k): 1 if v == 1 else -1 if v == -1 else 0 for k, v in values.items()}

    def states(self, text: str) -> dict[str, dict[str, Any]]:
        return {
            e: {
                "status": s.status,
                "side": s.side or "none",
                "zones": list(s.zones[:3]),
                "severity": s.severity or "none",
                "comparison": s.comparison or "none",
            }
            for e, s in self.extract(text).states().items()
        }


def read_prompt(user: str) -> tuple[dict[str, str], str]:
    """(report texts by fence name, the instructions before the first report) of a cxreval prompt.

    Fenced prompts are read exactly (:func:`read_fenced`; :class:`ValueError` otherwise); prompts
    in plain ``<report>`` tags (written by hand, e.g. in benchmarks) are read with those.
    """
    first = FENCE_OPEN.search(user)
    if first is None:
        return {name: m.group(1) for name, rx in _TAG.items() if (m := rx.search(user))}, user
    return read_fenced(user) or {}, user[: first.start()]


def _schema_info(schema: dict[str, Any] | None, reports: dict[str, str]) -> tuple[str, str, int, int]:
    """(mode, style, max_items, max_evidence) from the schema the client sent (or the prompt)."""
    mode = "pairwise" if "candidate" in reports else "extract"
    if not schema:
        return mode, "sparse", 40, 200
    props = schema.get("properties", {})
    if "entities" in props and props["entities"].get("type") == "array":
        items = props["entities"]
        fields = items["items"]["properties"]
        ev = (fields.get("evidence") or fields.get("reference_quote") or {}).get("maxLength", 0)
        return mode, "sparse", int(items.get("maxItems", 40)), int(ev)
    return mode, "dense", 0, 0


#: The request fields a test may look at in ``log`` (``params``): sampling and length settings.
_SAMPLING_PARAMS = ("temperature", "max_tokens", "max_completion_tokens", "seed")


def _classic_param(body: dict[str, Any]) -> str:
    """OpenAI's words for a reasoning model refusing ``max_tokens`` or a temperature ("" if none)."""
    if "max_tokens" in body:
        return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    if body.get("temperature", 1) != 1:
        return "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."
    return ""


def _cut_at_limit(text: str, finish: str, body: dict[str, Any], entry: dict[str, Any], *, on: bool) -> tuple[str, str]:
    """An answer cut at the request's output-token limit (a token per 4 characters), as a real
    server cuts it (``on``: the server does): the text and finish reason."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if not on or not isinstance(limit, int) or len(text) // 4 + 1 <= limit:
        return text, finish
    entry["fault"] = entry["fault"] or "cut-at-max-tokens"
    return text[: limit * 4], "length"


class LoopbackServer(ThreadingHTTPServer):
    """The server; start with :meth:`start` (a daemon thread), stop with :meth:`stop`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(
        self,
        port: int = 0,
        *,
        ontology: Ontology | None = None,
        latency: float = 0.0,
        timeout_sleep: float = 5.0,
        retry_after: str = "1",
        hold_after: int | None = None,
        reject_json_schema: bool = False,
        reasoning_model: bool = False,
        cut_at_max_tokens: bool = False,
        max_output_tokens: int | None = None,
        script: Callable[[dict[str, str], str], dict[str, Any] | None] | None = None,
    ) -> None:
        super().__init__((HOST, port), _Handler)
        #: ``script(reports, instructions)``: a scripted answer object for a prompt, or None for
        #: the rule-engine answer (tests of LLM metrics whose answers the rule engine cannot give).
        self.script = script
        self.oracle = Oracle(ontology or load_ontology())
        self.latency = latency
        self.timeout_sleep = timeout_sleep
        self.retry_after = retry_after
        self.hold_after = hold_after
        self.reject_json_schema = reject_json_schema  # answer like llama-cpp-python's server does
        #: refuse ``max_tokens`` and ``temperature`` with a 400, as OpenAI's reasoning models do
        self.reasoning_model = reasoning_model
        #: cut an answer longer than the request's output-token limit, as a real server does
        self.cut_at_max_tokens = cut_at_max_tokens
        #: refuse a request asking for more output tokens than this with vLLM's 400
        self.max_output_tokens = max_output_tokens
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.attempts: dict[str, int] = {}
        self.answered = 0
        self.admitted = 0
        self._released = threading.Event()
        self._thread: threading.Thread | None = None
        self.dead = False

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(target=self.serve_forever, name="cxreval-loopback", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        self.shutdown()
        self.server_close()

    def kill(self) -> None:
        """Die as a crashed server does: refuse new connections and drop every open one (a
        request on a kept-alive connection gets no answer, only a closed socket)."""
        self.dead = True
        self.stop()

    def release(self) -> None:
        """Answer again after ``hold_after`` held requests."""
        self.hold_after = None
        self._released.set()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def finished(self) -> list[dict[str, Any]]:
        """Log entries of requests that got a 200 answer."""
        with self.lock:
            return [e for e in self.log if e["status"] == 200]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        pass

    # -- plumbing --------------------------------------------------------------------------
    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _reply_raw(self, entry: dict[str, Any], status: int, data: bytes) -> None:
        """Send bytes as they are (a malformed body), logged like :meth:`_reply`."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            entry["status"] = "client-gone"
            self.close_connection = True
            return
        entry["status"] = status

    def _reply(self, entry: dict[str, Any], status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Send and log; a client that already hung up (it timed out) is logged as gone."""
        try:
            self._send(status, body, headers)
        except OSError:
            entry["status"] = "client-gone"
            self.close_connection = True
            return
        entry["status"] = status

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "cxreval-loopback", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        if self.server.dead:  # killed: drop the connection without a word
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        path = self.path.rstrip("/")
        if path == "/v1/chat/completions":
            self._answer(body, anthropic=False)
        elif path == "/v1/messages":
            self._answer(body, anthropic=True)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    # -- one request -----------------------------------------------------------------------
    def _refused_as_a_reasoning_model(self, entry: dict[str, Any], body: dict[str, Any], anthropic: bool) -> bool:
        """Answer a 400 as OpenAI's reasoning models do to ``max_tokens`` / a temperature (when the
        server plays one), or as vLLM does to more output tokens than its context holds; True when
        it did."""
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        cap = self.server.max_output_tokens
        if cap is not None and isinstance(limit, int) and limit > cap:
            entry["fault"] = "too-many-tokens"
            self._reply(
                entry,
                400,
                {
                    "error": {
                        "message": f"'max_tokens' or 'max_completion_tokens' is too large: "
                        f"{limit}. This model's maximum context length is {cap} tokens.",
                        "type": "BadRequestError",
                    }
                },
            )
            return True
        refused = self.server.reasoning_model and not anthropic and _classic_param(body)
        if refused:
            entry["fault"] = "reasoning-model"
            self._reply(
                entry,
                400,
                {
                    "error": {
                        "message": refused,
                        "type": "invalid_request_error",
                        "param": refused.split("'")[1],
                        "code": "unsupported_parameter",
                    }
                },
            )
        return bool(refused)

    def _refused_json_schema(self, entry: dict[str, Any], body: dict[str, Any], anthropic: bool) -> bool:
        """A server that knows no ``json_schema`` response format answers 500, as vLLM's older ones did."""
        rf_type = (body.get("response_format") or {}).get("type")
        refused = self.server.reject_json_schema and not anthropic and rf_type == "json_schema"
        if refused:
            entry["fault"] = "reject-json-schema"
            self._reply(
                entry,
                500,
                {
                    "error": {
                        "message": "1 validation error: ('body', 'response_format', 'type') "
                        "Input should be 'text' or 'json_object'",
                        "type": "internal_server_error",
                    }
                },
            )
        return bool(refused)

    def _transport_fault(self, entry: dict[str, Any], faults: set[str], on: Callable[..., bool], reask: bool) -> bool:
        """Answer with a fault of the transport (a timeout, a dropped connection, 429, 500, a key
        echoed in an error) when the prompt asks for one; whether one was sent."""
        srv = self.server
        if on("timeout") and not reask:
            entry["fault"], entry["status"] = "timeout", "timed-out"
            time.sleep(srv.timeout_sleep)  # past the client's timeout; then hang up unanswered
            self.close_connection = True
            return True
        if on("drop") and not reask:
            entry["fault"], entry["status"] = "drop", "dropped"
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        if on("429") and not reask:
            entry["fault"] = "429"
            self._reply(
                entry, 429, {"error": {"message": "rate limited", "type": "rate_limit_error"}}, {"Retry-After": srv.retry_after}
            )
            return True
        if on("500", first=2) and not reask:
            entry["fault"] = "500"
            self._reply(entry, 500, {"error": {"message": "internal error", "type": "server_error"}})
            return True
        if on("echo-key"):
            entry["fault"] = "echo-key"
            auth = self.headers.get("Authorization") or self.headers.get("x-api-key") or ""
            self._reply(entry, 500, {"error": {"message": f"upstream rejected credentials {auth}", "type": "server_error"}})
            return True
        pad = next((int(f.rsplit("-", 1)[1]) for f in faults if re.fullmatch(r"echo-key-pad-\d{1,6}", f)), None)
        if pad is not None:
            entry["fault"] = f"echo-key-pad-{pad}"
            auth = self.headers.get("Authorization") or self.headers.get("x-api-key") or ""
            self._reply(entry, 500, {"error": {"message": "." * pad + auth, "type": "server_error"}})
            return True
        if "echo-key-escaped" in faults:
            entry["fault"] = "echo-key-escaped"
            auth = self.headers.get("Authorization") or self.headers.get("x-api-key") or ""
            escaped = json.dumps(f"upstream rejected credentials {auth}").replace("/", "\\/")
            self._reply_raw(entry, 500, ('{"error": {"message": ' + escaped + ', "type": "server_').encode("utf-8"))
            return True
        return False

    def _answer(self, body: dict[str, Any], anthropic: bool) -> None:
        srv = self.server
        messages = body.get("messages", [])
        users = [_text(m["content"]) for m in messages if m.get("role") == "user"]
        # the call's own message is the last one with fenced reports: worked examples come before
        # it, a re-ask after it (a re-ask quotes no report)
        fenced = [i for i, u in enumerate(users) if FENCE_OPEN.search(u)]
        own = fenced[-1] if fenced else 0
        first_user = users[own] if users else ""
        reask = len(users) > own + 1
        system = _system_text(body, messages, anthropic)
        schema = _answer_schema(body, anthropic)
        faults = set(_FAULT.findall(first_user))
        convo = hashlib.sha256(first_user.encode("utf-8")).hexdigest()[:16]
        request_sha = hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        with srv.lock:
            attempt = srv.attempts.get(request_sha, 0) + 1
            srv.attempts[request_sha] = attempt
            entry: dict[str, Any] = {
                "n": len(srv.log) + 1,
                "convo": convo,
                "request": request_sha,
                "reask": reask,
                "attempt": attempt,
                "status": None,
                "fault": None,
                "reask_text": users[-1] if reask else "",
                "auth": bool(self.headers.get("Authorization") or self.headers.get("x-api-key")),
                "params": {k: v for k, v in body.items() if k in _SAMPLING_PARAMS},
                "cached_prefix": _cache_marked(body),
            }
            srv.log.append(entry)
            hold = srv.hold_after is not None and srv.admitted >= srv.hold_after
            if not hold:
                srv.admitted += 1
        if hold:
            entry["status"] = "held"
            srv._released.wait()

        if self._refused_as_a_reasoning_model(entry, body, anthropic) or self._refused_json_schema(entry, body, anthropic):
            return

        def on(name: str, first: int = 1) -> bool:
            return f"{name}-always" in faults or (name in faults and attempt <= first)

        if srv.latency:
            time.sleep(srv.latency)
        if self._transport_fault(entry, faults, on, reask):
            return

        try:
            reports, instructions = read_prompt(first_user)
            instructions = system + "\n" + instructions
        except ValueError as exc:
            entry["fault"] = "unreadable-prompt"
            self._reply(entry, 400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        mode, style, max_items, max_evidence = _schema_info(schema, reports)
        uncertain = _policy(instructions)
        scripted = srv.script(reports, instructions) if srv.script is not None else None
        if scripted is not None:
            mode, style = "scripted", "dense"
            answer: dict[str, Any] = scripted
        elif _LABEL_TASK in instructions:
            mode, style = "labels", "dense"
            answer = srv.oracle.labels(reports.get("report", ""), instructions)
        else:
            answer = self._oracle_answer(srv.oracle, first_user, mode, style, max_items, max_evidence, uncertain)
        text = json.dumps(answer)
        finish = "stop"
        first_answer = not reask
        if first_answer or any(f.endswith("-always") for f in faults):
            text, finish, fault = _corrupt(text, answer, faults, mode, style, reask)
            entry["fault"] = fault or entry["fault"]
        if on("echo-key-answer"):  # a 200 whose answer quotes the key back
            auth = self.headers.get("Authorization") or self.headers.get("x-api-key") or ""
            answer = {**answer, "note": f"received {auth}"}
            text, entry["fault"] = json.dumps(answer), "echo-key-answer"
        if on("huge") and (not reask or "huge-always" in faults):  # far over the schema's bounds (+3 MB)
            answer = {**answer, "padding": "x" * 3_000_000}
            text, entry["fault"] = json.dumps(answer), "huge"
        text, finish = _cut_at_limit(text, finish, body, entry, on=srv.cut_at_max_tokens)
        with srv.lock:
            srv.answered += 1
        payload = _payload(body, messages, text, finish, request_sha, anthropic)
        malformed = next((name for name in MALFORMED if on(name)), None)
        if malformed is None:
            self._reply(entry, 200, payload)
            return
        entry["fault"] = malformed
        data = _malform(malformed, payload, anthropic)
        if isinstance(data, bytes):
            self._reply_raw(entry, 200, data)
        else:
            self._reply(entry, 200, data)

    @staticmethod
    def _oracle_answer(
        oracle: Oracle, user: str, mode: str, style: str, max_items: int, max_evidence: int, uncertain: str
    ) -> dict[str, Any]:
        reports, _ = read_prompt(user)

        def tag(name: str) -> str:
            return reports.get(name, "")

        if mode == "pairwise":
            items = oracle.pairwise(tag("reference"), tag("candidate"), uncertain)
            if style == "sparse":  # what a report states, quoted (a true negative is not listed)
                listed = [{**i, **_quotes(i, max_evidence)} for i in items if i["presence"] != "TN"]
                return {"entities": listed[:max_items]}
            verdict = ("presence", "location", "severity", "comparison")
            dense = {
                e: {"presence": "TN", "location": "not-available", "severity": "not-available", "comparison": "other"}
                for e in oracle.ontology.entity_ids
            }
            for i in items:
                dense[i["entity"]] = {k: i[k] for k in verdict}
            return dense
        text = tag("report")
        if style == "sparse":
            return {"entities": oracle.mentions(text, max_evidence)[:max_items]}
        states: dict[str, dict[str, Any]] = {
            e: {"status": "not-mentioned", "side": "none", "zones": [], "severity": "none", "comparison": "none"}
            for e in oracle.ontology.entity_ids
        }
        states.update(oracle.states(text))
        return states


def _quotes(item: dict[str, Any], max_evidence: int) -> dict[str, str]:
    """A sparse pairwise item's quotes as the schema bounds them (none when evidence is off)."""
    if not max_evidence:
        return {"reference_quote": "", "candidate_quote": ""}
    return {side: item[side][:max_evidence] for side in ("reference_quote", "candidate_quote")}


#: HTTP 200 answers that are not what the API promises (each a ``FAULT:<name>``).
MALFORMED = (
    "cut-body",
    "no-message",
    "content-not-string",
    "usage-not-int",
    "no-usage",
    "negative-usage",
    "zero-usage",
    "not-a-message",
    "bad-block",
    "deep-body",
    "long-int-body",
)
#: How deep ``deep-*`` faults nest, and how many digits ``long-int-*`` faults' integer has.
DEEP = 3000
LONG_INT_DIGITS = 5000


def _malform(name: str, payload: dict[str, Any], anthropic: bool) -> dict[str, Any] | list[Any] | bytes:
    """``payload`` broken the way fault ``name`` says (bytes where the body is not even JSON)."""
    usage_key = ("input_tokens", "output_tokens") if anthropic else ("prompt_tokens", "completion_tokens")
    if name == "cut-body":
        data = json.dumps(payload).encode("utf-8")
        return data[: len(data) // 2]
    if name in ("deep-body", "long-int-body"):  # valid JSON that a reader chokes on
        bad = "[" * DEEP + "]" * DEEP if name == "deep-body" else "9" * LONG_INT_DIGITS
        return json.dumps({**payload, "x_extra": "@@"}).replace('"@@"', bad).encode("utf-8")
    if name == "zero-usage":
        return {
            **payload,
            "usage": {**payload["usage"], usage_key[0]: 0, usage_key[1]: 0} | ({} if anthropic else {"total_tokens": 0}),
        }
    if name == "no-usage":
        return {k: v for k, v in payload.items() if k != "usage"}
    if name == "usage-not-int":
        return {**payload, "usage": {k: str(v) for k, v in payload["usage"].items()}}
    if name == "negative-usage":
        return {**payload, "usage": {**payload["usage"], usage_key[0]: -1_000_000, usage_key[1]: -5}}
    if anthropic:
        if name == "not-a-message":
            return [payload]
        if name in ("no-message", "bad-block"):
            return {**payload, "content": ["not a block"] if name == "bad-block" else None}
        return {**payload, "content": [{"type": "text", "text": 42}]}  # content-not-string
    choice = payload["choices"][0]
    if name == "no-message":
        return {**payload, "choices": [{k: v for k, v in choice.items() if k != "message"}]}
    if name == "content-not-string":
        return {**payload, "choices": [{**choice, "message": {"role": "assistant", "content": {"entities": []}}}]}
    if name == "not-a-message":
        return {**payload, "choices": "none"}
    return {**payload, "choices": ["not a choice"]}  # bad-block


def _payload(
    body: dict[str, Any], messages: list[dict[str, Any]], text: str, finish: str, request_sha: str, anthropic: bool
) -> dict[str, Any]:
    """The response body of an answer ``text``: an Anthropic message (a tool call where ``text`` reads
    as JSON) or an OpenAI chat completion, with token counts of about four characters a token."""
    in_tokens = sum(len(_text(m.get("content", ""))) for m in messages) // 4
    out_tokens = len(text) // 4 + 1
    if anthropic:
        tool = (body.get("tools") or [{}])[0].get("name", "answer")
        try:
            content = [{"type": "tool_use", "id": "toolu_loopback", "name": tool, "input": json.loads(text)}]
        except (ValueError, RecursionError):  # a truncated / unreadable answer cannot be a tool input: text
            content = [{"type": "text", "text": text}]
        return {
            "id": f"msg_{request_sha}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": "max_tokens" if finish == "length" else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
        }
    return {
        "id": f"chatcmpl-{request_sha}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": in_tokens, "completion_tokens": out_tokens, "total_tokens": in_tokens + out_tokens},
    }


def _answer_schema(body: dict[str, Any], anthropic: bool) -> dict[str, Any] | None:
    """The JSON schema a request asks its answer to follow (Anthropic: its tool's input schema)."""
    if anthropic:
        tools = body.get("tools") or []
        return tools[0].get("input_schema") if tools else None
    rf = body.get("response_format") or {}
    return rf.get("json_schema", {}).get("schema") if rf.get("type") == "json_schema" else rf.get("schema")


def _policy(instructions: str) -> str:
    """The uncertainty policy a prompt states: a graded one by name, else negative or positive."""
    graded = re.search(r"graded \(policy ([a-z-]+)\)", instructions)
    if graded:
        return graded.group(1)
    return "negative" if _UNCERTAIN_NEG in instructions else "positive"


def _cache_marked(body: dict[str, Any]) -> bool:
    """Whether the request marks its system prompt for the provider's prompt cache (Anthropic's
    ``cache_control`` on a system block)."""
    system = body.get("system")
    return isinstance(system, list) and any(isinstance(b, dict) and "cache_control" in b for b in system)


def _system_text(body: dict[str, Any], messages: list[dict[str, Any]], anthropic: bool) -> str:
    """The system prompt of a request: Anthropic's ``system`` (text or blocks), or the system messages."""
    if anthropic:
        return _text(body.get("system", ""))
    return "\n".join(_text(m["content"]) for m in messages if m.get("role") == "system")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def _corrupt(
    text: str, answer: dict[str, Any], faults: set[str], mode: str, style: str, reask: bool
) -> tuple[str, str, str | None]:
    """Apply answer-level faults: (text, finish_reason, fault name)."""

    def want(name: str) -> bool:
        return f"{name}-always" in faults or (name in faults and not reask)

    if want("truncate"):
        return text[: max(1, len(text) // 2)], "length", "truncate"
    if want("whitespace-loop"):  # guided decoding that allows whitespace between tokens, run away
        return text[: max(1, len(text) // 2)] + " \n" * 200, "length", "whitespace-loop"
    if want("deep-answer"):
        return '{"entities": ' + "[" * DEEP + "]" * DEEP + "}", "stop", "deep-answer"
    if want("long-int-answer"):
        return '{"entities": [{"entity": ' + "9" * LONG_INT_DIGITS + "}]}", "stop", "long-int-answer"
    if mode == "scripted":  # a scripted answer: "schema" sends a value of the wrong type
        if want("schema"):
            return json.dumps({k: "MAYBE" for k in answer} or {"unexpected": "MAYBE"}), "stop", "schema"
        return text, "stop", None
    if mode == "labels":
        return _corrupt_labels(text, want)
    corrupted = _corrupt_entities(text, answer, want, mode, style)
    if corrupted is None and mode == "pairwise":
        corrupted = _duplicate_entity(answer, want, style)
    return corrupted or (text, "stop", None)


_Want = Callable[[str], bool]


def _corrupt_labels(text: str, want: _Want) -> tuple[str, str, str | None]:
    """A labeler's answer with a value out of its schema, or a label that does not exist."""
    bad = json.loads(text)
    if want("schema") and bad:
        bad[next(iter(bad))] = 2
        return json.dumps(bad), "stop", "schema"
    if want("unknown"):
        bad["pleural_efusion_of_doom"] = 1
        return json.dumps(bad), "stop", "unknown"
    return text, "stop", None


def _corrupt_entities(
    text: str, answer: dict[str, Any], want: _Want, mode: str, style: str
) -> tuple[str, str, str | None] | None:
    """An entity answer emptied, with a verdict out of its schema, or with an unknown entity; None if no such fault."""
    verdict_key = "presence" if mode == "pairwise" else "status"
    if want("empty"):
        if style == "sparse":
            return json.dumps({"entities": []}), "stop", "empty"
        nothing = (
            {"presence": "TN", "location": "not-available", "severity": "not-available", "comparison": "other"}
            if mode == "pairwise"
            else {"status": "not-mentioned", "side": "none", "zones": [], "severity": "none", "comparison": "none"}
        )
        return json.dumps({e: nothing for e in answer}), "stop", "empty"
    if want("schema"):
        bad = json.loads(text)
        target = bad["entities"][0] if style == "sparse" and bad["entities"] else next(iter(bad.values()), None)
        if target is not None:
            target[verdict_key] = "MAYBE"
        else:
            bad = {"entities": "none"}
        return json.dumps(bad), "stop", "schema"
    if want("unknown"):
        bad = json.loads(text)
        fake = (
            {
                "entity": "pleural_efusion_of_doom",
                "presence": "TP",
                "location": "not-available",
                "severity": "not-available",
                "comparison": "other",
            }
            if mode == "pairwise"
            else {
                "entity": "pleural_efusion_of_doom",
                "status": "present",
                "side": "none",
                "zones": [],
                "severity": "none",
                "comparison": "none",
            }
        )
        if style == "sparse":
            bad["entities"].append(fake)
        else:
            bad["pleural_efusion_of_doom"] = {k: v for k, v in fake.items() if k != "entity"}
        return json.dumps(bad), "stop", "unknown"
    return None


def _duplicate_entity(answer: dict[str, Any], want: _Want, style: str) -> tuple[str, str, str | None] | None:
    """A pairwise answer that names its first entity again with another verdict ("duplicate": then the
    first verdict once more, so a majority exists; "duplicate-tie": no majority); None if not asked."""
    flip = {"TP": "FN", "FN": "TP", "FP": "TN", "TN": "FP"}
    for name in ("duplicate", "duplicate-tie"):
        if not want(name):
            continue
        if style == "sparse" and answer["entities"]:
            first = answer["entities"][0]
            wrong = {**first, "presence": flip[first["presence"]]}
            extra = [wrong, first] if name == "duplicate" else [wrong]
            return json.dumps({"entities": [first, *extra, *answer["entities"][1:]]}), "stop", name
        if style == "dense":
            eid, v = next(iter(answer.items()))
            wrong = {**v, "presence": flip[v["presence"]]}
            dups = [(eid, v), (eid, wrong)] + ([(eid, v)] if name == "duplicate" else [])
            parts = [f"{json.dumps(k)}: {json.dumps(x)}" for k, x in dups]
            parts += [f"{json.dumps(k)}: {json.dumps(x)}" for k, x in list(answer.items())[1:]]
            return "{" + ", ".join(parts) + "}", "stop", name
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--ontology", default=None, help="ontology YAML (default: the packaged one)")
    args = parser.parse_args()
    server = LoopbackServer(args.port, ontology=load_ontology(args.ontology), latency=args.latency)
    print(f"listening on {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
