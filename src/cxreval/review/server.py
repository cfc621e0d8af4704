"""The review page: a local web server (Starlette + uvicorn, extra ``review``).

Imported only by ``cxreval review serve`` (``import cxreval`` never loads starlette). Nothing
leaves the machine: the page, its script and style are files of this package served by this
server, and every response carries a Content-Security-Policy that allows nothing but this
origin. Bound to 127.0.0.1 by default; bound to any other address, every API request must carry
a random token (printed in the URL). The Host header must name the server (no DNS rebinding),
and POSTs must be JSON (a cross-site form cannot send one without the browser asking first).

API (JSON; ``reviewer`` in the query or body):

- ``GET  /api/state?reviewer=R``: the sample, the entity list, R's progress;
- ``GET  /api/pair/{position}?reviewer=R``: both reports, the engine's rows, R's answers and note;
- ``POST /api/answer``: one verdict on one entity (all four fields), committed before the reply;
- ``POST /api/remove``: withdraw an entity R added; ``POST /api/note``; ``POST /api/checked``.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cxreval.review.db import IMPLICIT, Answer, ReviewDB, ReviewDBError, connect, check_reviewer

EXTRA_MESSAGE = "optional extra 'review': pip install 'cxreval[review]'"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
STATIC = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}


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


class _Remove(BaseModel):
    reviewer: str
    pair_id: str
    entity: str


class _Note(BaseModel):
    reviewer: str
    pair_id: str
    note: str


class _Checked(BaseModel):
    reviewer: str
    pair_id: str
    checked: bool = True


def create_app(db_path: str | Path, *, token: str | None = None, hosts: set[str] | None = None) -> Any:
    """The Starlette application over one review database (checked once here).

    ``token``: required on every ``/api/`` request (header ``X-Review-Token`` or ``?token=``).
    ``hosts``: the Host header values accepted (None: any, for a server bound to all addresses,
    where the token protects it).
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    path = Path(db_path)
    ReviewDB.open(path).close()  # refuses another tool's file before the server starts
    page = _asset("review.html")
    assets = {name: _asset(name) for name in STATIC}

    def with_db(fn: Callable[[ReviewDB], Any]) -> Any:
        db = ReviewDB(path, connect(path))
        try:
            return fn(db)
        finally:
            db.close()

    async def call(fn: Callable[[ReviewDB], Any]) -> Response:
        try:
            return JSONResponse(await run_in_threadpool(with_db, fn))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
            return JSONResponse({"error": problems}, status_code=422)
        except ReviewDBError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    async def body(request: Request) -> Any:
        try:
            return await request.json()
        except ValueError:
            return None

    def reviewer_of(request: Request) -> str:
        return check_reviewer(request.query_params.get("reviewer", ""))

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(assets[name], media_type=STATIC[name], headers={"cache-control": "no-cache"})

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)

    async def state(request: Request) -> Response:
        def run(db: ReviewDB) -> dict[str, Any]:
            reviewer = reviewer_of(request)
            done = {pid for _, pid in db.checked(reviewer)}
            pairs = db.pairs()
            meta = db.meta()
            return {
                "reviewer": reviewer,
                "results_signature": meta["results_signature"],
                "pairs": [{"position": p.position, "pair_id": p.pair_id, "checked": p.pair_id in done} for p in pairs],
                "checked": len(done),
                "total": len(pairs),
                "entities": [e.model_dump() for e in db.entities().values()],
                "implicit": IMPLICIT,
            }
        return await call(run)

    async def pair(request: Request) -> Response:
        def run(db: ReviewDB) -> Any:
            reviewer = reviewer_of(request)
            try:
                info = db.pair(int(request.path_params["position"]))
            except ValueError:
                info = None
            if info is None:
                raise ReviewDBError(f"no pair at position {request.path_params['position']}")
            answers = {a.entity: a for a in db.answers(reviewer, info.pair_id)}
            rows = [{"entity": r.entity, "engine": {f: getattr(r, f) for f in IMPLICIT},
                     "reference_evidence": r.reference_evidence, "candidate_evidence": r.candidate_evidence,
                     "answer": _answer(answers.pop(r.entity, None)), "added": False}
                    for r in db.engine_rows(info.pair_id)]
            rows += [{"entity": e, "engine": None, "reference_evidence": "", "candidate_evidence": "",
                      "answer": _answer(a), "added": True} for e, a in sorted(answers.items())]
            return {"pair_id": info.pair_id, "position": info.position, "reference": info.reference,
                    "candidate": info.candidate, "rows": rows,
                    "note": db.notes(reviewer).get((reviewer, info.pair_id), ""),
                    "checked": (reviewer, info.pair_id) in db.checked(reviewer)}
        return await call(run)

    async def answer(request: Request) -> Response:
        data = await body(request)
        return await call(lambda db: {"saved": db.save_answer(Answer.model_validate(data)).model_dump()})

    async def remove(request: Request) -> Response:
        data = await body(request)

        def run(db: ReviewDB) -> dict[str, Any]:
            r = _Remove.model_validate(data)
            return {"removed": db.remove_added(r.reviewer, r.pair_id, r.entity)}
        return await call(run)

    async def note(request: Request) -> Response:
        data = await body(request)

        def run(db: ReviewDB) -> dict[str, Any]:
            n = _Note.model_validate(data)
            db.save_note(n.reviewer, n.pair_id, n.note)
            return {"saved": True}
        return await call(run)

    async def checked(request: Request) -> Response:
        data = await body(request)

        def run(db: ReviewDB) -> dict[str, Any]:
            c = _Checked.model_validate(data)
            db.set_checked(c.reviewer, c.pair_id, c.checked)
            return {"checked": c.checked, "progress": len(db.checked(c.reviewer))}
        return await call(run)

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/favicon.ico", favicon),
        Route("/api/state", state),
        Route("/api/pair/{position}", pair),
        Route("/api/answer", answer, methods=["POST"]),
        Route("/api/remove", remove, methods=["POST"]),
        Route("/api/note", note, methods=["POST"]),
        Route("/api/checked", checked, methods=["POST"]),
    ]
    return _Guard(Starlette(routes=routes), token=token, hosts=hosts)


def _answer(a: Any) -> dict[str, str] | None:
    return None if a is None else {f: getattr(a, f) for f in IMPLICIT}


class _Guard:
    """ASGI wrapper: Host check, token check on the API, JSON-only POSTs, security headers."""

    def __init__(self, app: Any, *, token: str | None, hosts: set[str] | None) -> None:
        self.app, self.token, self.hosts = app, token, hosts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qs

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}

        async def send_secure(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items())]
            await send(message)

        async def refuse(status: int, text: str) -> None:
            from starlette.responses import JSONResponse

            await JSONResponse({"error": text}, status_code=status)(scope, receive, send_secure)

        if self.hosts is not None and headers.get("host", "").lower() not in self.hosts:
            await refuse(421, "unknown Host header: open the URL the server printed")
            return
        path = scope.get("path", "")
        if self.token is not None and path.startswith("/api/"):
            given = headers.get("x-review-token") or parse_qs(scope.get("query_string", b"").decode()).get(
                "token", [""])[0]
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                await refuse(403, "missing or wrong token: open the URL the server printed (it carries ?token=)")
                return
        if scope.get("method") == "POST" and not headers.get("content-type", "").startswith("application/json"):
            await refuse(415, "POST bodies must be application/json")
            return
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
            raise PortInUse(f"port {port} on {host} is in use by another program; give another --port "
                            "(or --port 0 for any free one)") from None
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(db_path: str | Path, host: str = "127.0.0.1", port: int = 8765,
          announce: Callable[[str], None] = print) -> None:
    """Serve the review page until interrupted. ``announce`` gets the URL to open (with
    ``?token=`` when bound to a non-loopback address)."""
    require_extra()
    import uvicorn

    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    sock = bind(host, port)
    real_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{h}:{real_port}" for h in ("127.0.0.1", "localhost", "[::1]", shown)} if token is None else None
    app = create_app(db_path, token=token, hosts=hosts)
    url = f"http://{shown}:{real_port}/?reviewer=YOUR_NAME" + (f"&token={token}" if token else "")
    announce(url)
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
