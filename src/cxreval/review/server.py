"""The review page: a local web server (Starlette + uvicorn, extra ``review``).

Imported only by ``cxreval review serve`` (``import cxreval`` never loads starlette). Nothing
leaves the machine: the page, its script and style are files of this package served by this
server, and every response carries a Content-Security-Policy that allows nothing but this
origin. Bound to 127.0.0.1 by default; bound to any other address, every API request must carry
a random token (printed in the URL). The Host header must name the server (no DNS rebinding),
and POSTs must be JSON (a cross-site form cannot send one without the browser asking first)
of at most ``MAX_BODY`` bytes (a larger body is refused, 413, before it is read).

API (JSON; ``reviewer`` in the query or body):

- ``GET  /api/state?reviewer=R``: the sample (and its ``sample_id``), the entity list, R's progress;
- ``GET  /api/pair/{position}?reviewer=R``: both reports, the engine's rows, R's answers and note
  (404 for a position that is not in the sample);
- ``POST /api/answer``: one verdict on one entity (all four fields), committed before the reply;
- ``POST /api/remove``: withdraw an entity R added; ``POST /api/note``; ``POST /api/checked``.

Every POST may carry ``op_id``: a write sent again with the same id is applied once (the reply
says ``"duplicate": true``). A request refused for what it says is a 4xx (400, 404, 413, 422);
a write the database cannot take now (read-only, locked past the lock timeout, disk full) is a
503 whose ``error`` says why: the page keeps the answer and sends it again.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import secrets
import socket
import sqlite3
import sys
from collections.abc import Callable, MutableMapping
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator

from cxreval.review.db import (
    IMPLICIT,
    Answer,
    ReviewDB,
    ReviewDBError,
    check_op_id,
    check_reviewer,
    connect,
)
from cxreval.sqlite_store import LOCK_TIMEOUT, describe_error

EXTRA_MESSAGE = "optional extra 'review': pip install 'cxreval[review]'"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
STATIC = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}
#: The largest request body taken, in bytes: a note (10,000 characters, up to 6 bytes each as
#: JSON escapes) with room to spare. Larger bodies are refused before they are read.
MAX_BODY = 128 * 1024
#: A pair position in a URL: digits only, at most 9 (SQLite integers end at 2**63).
POSITION_RE = re.compile(r"[0-9]{1,9}")
READ_FAILING = "cannot read the review database now, try again"


class MissingExtra(RuntimeError):
    """starlette or uvicorn is not installed."""


class PortInUse(OSError):
    """The address is taken by another program."""


def require_extra() -> None:
    """Raise :class:`MissingExtra` (naming the extra) unless starlette and uvicorn import."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingExtra(EXTRA_MESSAGE) from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _asset(name: str) -> bytes:
    return resources.files("cxreval.review").joinpath("static", name).read_bytes()


class _NotFound(LookupError):
    """A path naming something the sample does not hold (404)."""


class _Write(BaseModel):
    reviewer: str
    pair_id: str

    @field_validator("reviewer")
    @classmethod
    def _reviewer_name(cls, value: str) -> str:
        return check_reviewer(value)


class _Remove(_Write):
    entity: str


class _Note(_Write):
    note: str


class _Checked(_Write):
    checked: bool = True


def _save_answer(db: ReviewDB, a: Answer) -> dict[str, Any]:
    return {"saved": db.save_answer(a).model_dump()}


def _remove(db: ReviewDB, r: _Remove) -> dict[str, Any]:
    return {"removed": db.remove_added(r.reviewer, r.pair_id, r.entity)}


def _save_note(db: ReviewDB, n: _Note) -> dict[str, Any]:
    db.save_note(n.reviewer, n.pair_id, n.note)
    return {"saved": True}


def _set_checked(db: ReviewDB, c: _Checked) -> dict[str, Any]:
    db.set_checked(c.reviewer, c.pair_id, c.checked)
    return {"checked": c.checked, "progress": len(db.checked(c.reviewer))}


#: The writes: path, the body's model, what it does (through :meth:`ReviewDB.once`).
WRITES: dict[str, tuple[type[BaseModel], Callable[[ReviewDB, Any], dict[str, Any]]]] = {
    "answer": (Answer, _save_answer),
    "remove": (_Remove, _remove),
    "note": (_Note, _save_note),
    "checked": (_Checked, _set_checked),
}


def _position(text: str) -> int:
    """A pair position from a URL; :class:`_NotFound` for anything that cannot be one."""
    if not POSITION_RE.fullmatch(text):
        raise _NotFound(f"no pair at position {text[:40]!r}")
    return int(text)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse(data, status_code=status, headers=headers)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())


async def _body(request: Any) -> Any:
    """The request's JSON, or None for a body that is not JSON (or nested past the parser's depth)."""
    try:
        return await request.json()
    except (ValueError, RecursionError):
        return None


def _reviewer_of(request: Any) -> str:
    return check_reviewer(request.query_params.get("reviewer", ""))


class _Api:
    """The endpoints over one review database: a connection per request, and every failure turned
    into a status and a message (4xx: the request is wrong; 503: the database cannot take it now)."""

    def __init__(self, path: Path, lock_timeout: float, sample_id: str) -> None:
        self.path, self.lock_timeout, self.sample_id = path, lock_timeout, sample_id
        self.page = _asset("review.html")
        self.assets = {name: _asset(name) for name in STATIC}

    def _with_db(self, fn: Callable[[ReviewDB], Any]) -> Any:
        db = ReviewDB(self.path, connect(self.path, self.lock_timeout))
        try:
            return fn(db)
        finally:
            db.close()

    async def call(self, fn: Callable[[ReviewDB], Any], failing: str = "not saved, try again") -> Any:
        """Run ``fn`` on a connection of its own; ``failing`` leads the message of a 503."""
        from starlette.concurrency import run_in_threadpool

        try:
            return _json(await run_in_threadpool(self._with_db, fn))
        except ValidationError as exc:
            return _json({"error": _problems(exc)}, 422)
        except ReviewDBError as exc:
            return _json({"error": str(exc)}, 400)
        except _NotFound as exc:
            return _json({"error": str(exc)}, 404)
        except sqlite3.Error as exc:  # the database cannot take it now: the page keeps it and retries
            reason = f"{failing}: {describe_error(self.path, exc, self.lock_timeout)}"
            return _json({"error": reason}, 503, {"retry-after": "2"})

    async def index(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(self.page, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})

    async def static(self, request: Any) -> Any:
        from starlette.responses import Response

        name = request.path_params["name"]
        if name not in self.assets:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(self.assets[name], media_type=STATIC[name], headers={"cache-control": "no-cache"})

    async def favicon(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(status_code=204)

    async def state(self, request: Any) -> Any:
        def run(db: ReviewDB) -> dict[str, Any]:
            reviewer = _reviewer_of(request)
            done = {pid for _, pid in db.checked(reviewer)}
            pairs = db.pairs()
            return {
                "reviewer": reviewer,
                "sample_id": self.sample_id,
                "results_signature": db.meta()["results_signature"],
                "pairs": [{"position": p.position, "pair_id": p.pair_id, "checked": p.pair_id in done} for p in pairs],
                "checked": len(done),
                "total": len(pairs),
                "entities": [e.model_dump() for e in db.entities().values()],
                "implicit": IMPLICIT,
            }

        return await self.call(run, READ_FAILING)

    async def pair(self, request: Any) -> Any:
        def run(db: ReviewDB) -> Any:
            reviewer = _reviewer_of(request)
            info = db.pair(_position(request.path_params["position"]))
            if info is None:
                raise _NotFound(f"no pair at position {request.path_params['position']}")
            answers = {a.entity: a for a in db.answers(reviewer, info.pair_id)}
            rows = [
                {
                    "entity": r.entity,
                    "engine": {f: getattr(r, f) for f in IMPLICIT},
                    "reference_evidence": r.reference_evidence,
                    "candidate_evidence": r.candidate_evidence,
                    "reference_rules": r.reference_rules,
                    "candidate_rules": r.candidate_rules,
                    "answer": _answer(answers.pop(r.entity, None)),
                    "added": False,
                }
                for r in db.engine_rows(info.pair_id)
            ]
            rows += [
                {
                    "entity": e,
                    "engine": None,
                    "reference_evidence": "",
                    "candidate_evidence": "",
                    "reference_rules": "",
                    "candidate_rules": "",
                    "answer": _answer(a),
                    "added": True,
                }
                for e, a in sorted(answers.items())
            ]
            return {
                "pair_id": info.pair_id,
                "position": info.position,
                "reference": info.reference,
                "candidate": info.candidate,
                "rows": rows,
                "note": db.notes(reviewer).get((reviewer, info.pair_id), ""),
                "checked": (reviewer, info.pair_id) in db.checked(reviewer),
            }

        return await self.call(run, READ_FAILING)

    def write(self, action: str) -> Callable[[Any], Any]:
        """The endpoint of one kind of write: validated, applied once per ``op_id``, committed."""
        model, apply = WRITES[action]

        async def endpoint(request: Any) -> Any:
            data = await _body(request)

            def run(db: ReviewDB) -> dict[str, Any]:
                item: Any = model.model_validate(data)
                op_id = check_op_id(data.get("op_id")) if isinstance(data, dict) else None
                return db.once(op_id, item.reviewer, action, lambda: apply(db, item))

            return await self.call(run)

        return endpoint


def create_app(
    db_path: str | Path, *, token: str | None = None, hosts: set[str] | None = None, lock_timeout: float = LOCK_TIMEOUT
) -> Any:
    """The Starlette application over one review database (checked here: a review database this
    process can write to, or :class:`ReviewDBError` saying what is wrong).

    ``token``: required on every ``/api/`` request (header ``X-Review-Token`` or ``?token=``).
    ``hosts``: the Host header values accepted (None: any, for a server bound to all addresses,
    where the token protects it). ``lock_timeout``: seconds a write waits for another program's
    lock on the database before the page is told (503) that it was not saved.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    path = Path(db_path)
    with ReviewDB.open(path, lock_timeout) as opened:  # refuses another tool's file before the server starts
        opened.check_writable()
        sample_id = opened.sample_id()
    api = _Api(path, lock_timeout, sample_id)
    routes = [
        Route("/", api.index),
        Route("/static/{name}", api.static),
        Route("/favicon.ico", api.favicon),
        Route("/api/state", api.state),
        Route("/api/pair/{position}", api.pair),
        *(Route(f"/api/{action}", api.write(action), methods=["POST"]) for action in WRITES),
    ]
    return _Guard(Starlette(routes=routes), token=token, hosts=hosts)


def _answer(a: Any) -> dict[str, str] | None:
    return None if a is None else {f: getattr(a, f) for f in IMPLICIT}


async def _bounded_body(receive: Any, limit: int) -> bytes | None:
    """The request body, read as it comes; None as soon as it passes ``limit`` bytes (the rest is
    never read, so a huge body costs no memory)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives the body already read, then waits on the real one."""
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _declared_too_large(headers: dict[str, str]) -> bool:
    declared = headers.get("content-length", "").strip()
    return re.fullmatch(r"[0-9]+", declared) is not None and int(declared) > MAX_BODY


class _Guard:
    """ASGI wrapper: Host check, token check on the API, JSON-only POSTs of bounded size, security
    headers."""

    def __init__(self, app: Any, *, token: str | None, hosts: set[str] | None) -> None:
        self.app, self.token, self.hosts = app, token, hosts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qs

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}

        async def send_secure(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
                ]
            await send(message)

        async def refuse(status: int, text: str) -> None:
            from starlette.responses import JSONResponse

            await JSONResponse({"error": text}, status_code=status)(scope, receive, send_secure)

        if self.hosts is not None and headers.get("host", "").lower() not in self.hosts:
            await refuse(421, "unknown Host header: open the URL the server printed")
            return
        path = scope.get("path", "")
        if self.token is not None and path.startswith("/api/"):
            given = headers.get("x-review-token") or parse_qs(scope.get("query_string", b"").decode()).get("token", [""])[0]
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                await refuse(403, "missing or wrong token: open the URL the server printed (it carries ?token=)")
                return
        if scope.get("method") == "POST" and not headers.get("content-type", "").startswith("application/json"):
            await refuse(415, "POST bodies must be application/json")
            return
        too_large = f"request body larger than {MAX_BODY} bytes, the most this server takes: refused"
        if _declared_too_large(headers):
            await refuse(413, too_large)
            return
        if scope.get("method") == "POST":
            body = await _bounded_body(receive, MAX_BODY)
            if body is None:
                await refuse(413, too_large)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send_secure)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); :class:`PortInUse` names the address when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is in use by another program; give another --port (or --port 0 for any free one)"
            ) from None
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(
    db_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    announce: Callable[[str], None] = print,
    lock_timeout: float = LOCK_TIMEOUT,
) -> None:
    """Serve the review page until interrupted. ``announce`` gets the URL to open (with
    ``?token=`` when bound to a non-loopback address); ``lock_timeout`` as in :func:`create_app`."""
    require_extra()
    import uvicorn

    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    sock = bind(host, port)
    real_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{h}:{real_port}" for h in ("127.0.0.1", "localhost", "[::1]", shown)} if token is None else None
    try:
        app = create_app(db_path, token=token, hosts=hosts, lock_timeout=lock_timeout)
    except BaseException:
        sock.close()
        raise
    url = f"http://{shown}:{real_port}/?reviewer=YOUR_NAME" + (f"&token={token}" if token else "")
    announce(url)
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
