"""Open the HTML report in headless Chromium and check what a reader would see.

Chromium (Debian's ``chromium`` package; ``.ci/install-browser`` installs it) is driven over the
DevTools protocol with a small standard-library websocket client, so the test needs no extra
Python package. The page is served by an ``http.server`` on 127.0.0.1 that the test starts and
that records every request it gets; nothing leaves the machine.

Checked: the leaderboard rows, the spider charts and heatmaps are in the rendered DOM; sorting,
the legend toggles and the drill-down work; no console errors or uncaught exceptions; no network
request other than the page itself (seen both by Chromium's Network domain and by the server);
and a screenshot is a real, non-blank PNG.

Run as a script to take a screenshot of a page:
``python tests/test_report_browser.py report.html out.png [width] [height]``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def find_chromium() -> str | None:
    """Path of a Chromium binary (``$CXREVAL_CHROMIUM``, ``chromium``, ``chromium-browser``)."""
    env = os.environ.get("CXREVAL_CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


# -- a minimal websocket client (RFC 6455, client side, text frames) ---------------------------


class WebSocket:
    """Just enough of a websocket client to speak the DevTools protocol."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port or 80)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return bytes(buf)

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytearray([0x81])
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < 1 << 16:
            header.append(0x80 | 126)
            header += struct.pack(">H", n)
        else:
            header.append(0x80 | 127)
            header += struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes(header) + mask + masked)

    def recv(self) -> str:
        message = bytearray()
        while True:
            b0, b1 = self._recv_exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            mask = self._recv_exact(4) if b1 & 0x80 else None
            data = self._recv_exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by peer")
            if opcode == 0x9:  # ping -> pong
                self.sock.sendall(bytes([0x8A, 0x80 | len(data)]) + b"\0\0\0\0" + data)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += data
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


# -- DevTools session ------------------------------------------------------------------------


class Page:
    """A DevTools session on one page target: commands, and the events seen so far."""

    def __init__(self, ws_url: str) -> None:
        self.ws = WebSocket(ws_url)
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for ev in self.events:
            if ev["method"] == method:
                return ev
        while time.monotonic() < deadline:
            self.ws.sock.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise TimeoutError(method)

    def drain(self, quiet: float = 0.5) -> None:
        """Collect events until none arrives for ``quiet`` seconds (lets late requests show)."""
        self.ws.sock.settimeout(quiet)
        try:
            while True:
                msg = json.loads(self.ws.recv())
                if "method" in msg:
                    self.events.append(msg)
        except TimeoutError:
            pass
        finally:
            self.ws.sock.settimeout(60)

    def js(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"JS error in {expression[:80]!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        out = []
        for ev in self.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                out.append(f"log: {e.get('source')}: {e.get('text')} {e.get('url', '')}")
        return out

    def requests(self) -> list[str]:
        return [ev["params"]["request"]["url"] for ev in self.events if ev["method"] == "Network.requestWillBeSent"]


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Page]:
    """Start headless Chromium with a DevTools port and yield a session on its blank page."""
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("chromium not found")
    with tempfile.TemporaryDirectory(prefix="cxreval-chromium-") as profile:
        cmd = [
            binary,
            *CHROMIUM_FLAGS,
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "about:blank",
        ]
        # its own process group: Chromium's helpers (zygote, crashpad) are stopped with it, so none
        # is still writing into the profile while the temporary directory is removed
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        page = None
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                if proc.poll() is not None:
                    raise RuntimeError(f"chromium exited: {proc.stderr.read().decode(errors='replace')[-2000:]}")  # type: ignore[union-attr]
                if time.monotonic() > deadline:
                    raise RuntimeError("chromium did not open its DevTools port")
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            targets: list[dict[str, Any]] = []
            while time.monotonic() < deadline:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
                    targets = [t for t in json.load(resp) if t.get("type") == "page"]
                if targets:
                    break
                time.sleep(0.1)
            page = Page(targets[0]["webSocketDebuggerUrl"])
            page.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
            for domain in ("Runtime", "Log", "Network", "Page"):
                page.send(f"{domain}.enable")
            yield page
        finally:
            if page is not None:
                page.ws.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # helpers that outlived the browser
            if proc.stderr:
                proc.stderr.close()


class _Handler(http.server.SimpleHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(self.path)
        super().do_GET()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``folder`` on 127.0.0.1 (any free port); yield the base URL and the paths requested."""
    seen: list[str] = []
    handler = functools.partial(type("H", (_Handler,), {"seen": seen}), directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def png_info(data: bytes) -> tuple[int, int, int]:
    """Width, height and number of distinct byte values in the decompressed image data."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        n = struct.unpack(">I", data[pos : pos + 4])[0]
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    return width, height, len(set(zlib.decompress(idat)))


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 1000, full_page: bool = False) -> Path:
    """Render ``html`` in headless Chromium and write a PNG screenshot to ``png``."""
    with serve(html.parent) as (base, _), chromium(width, height) as page:
        page.send("Page.navigate", url=f"{base}/{html.name}")
        page.wait_for("Page.loadEventFired")
        page.drain()
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            h = page.js("document.documentElement.scrollHeight")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": h, "scale": 1})
        data = base64.b64decode(page.send("Page.captureScreenshot", **params)["data"])
    png.parent.mkdir(parents=True, exist_ok=True)
    png.write_bytes(data)
    return png


# -- the test ----------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="headless Chromium not installed (apt-get install chromium, or run .ci/install-browser)",
)


@needs_chromium
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from cxreval.page import write_html

    from .report_support import make_result

    result = make_result(n_systems=8, datasets=["ReXGradient", "MIMIC-CXR"], n_sites=6)
    html = write_html(result, tmp_path / "site" / "report.html")
    width, height = 1400, 1000
    with serve(html.parent) as (base, served), chromium(width, height) as page:
        url = f"{base}/report.html"
        page.send("Page.navigate", url=url)
        page.wait_for("Page.loadEventFired")
        page.drain()

        # the leaderboard of the first dataset is visible, with one row per system
        rows = page.js(
            "Array.from(document.querySelectorAll('section.ds-panel:not([hidden]) .board:not([hidden]) "
            "table.leaderboard tbody tr')).map(r => r.dataset.system)"
        )
        assert sorted(rows) == sorted(result.systems)
        assert page.js("document.querySelectorAll('table.leaderboard tbody tr').length") == sum(
            len(lb.rows) for lb in result.leaderboards
        )
        # charts: 4 spider charts per dataset, site heatmaps, correlation heatmaps, all laid out
        assert page.js("document.querySelectorAll('svg.radar').length") == 4 * len(result.datasets)
        assert page.js("document.querySelectorAll('svg.heatmap').length") >= 1 + len(result.datasets)
        box = page.js(
            "(() => { const r = document.querySelector('section.ds-panel:not([hidden]) svg.radar').getBoundingClientRect(); return [r.width, r.height]; })()"
        )
        assert box[0] > 300 and box[1] > 300
        # top-5 polygons drawn by default on the visible presence chart; "All" shows every system
        visible = "document.querySelectorAll('section.ds-panel:not([hidden]) figure.chart:not(.attr-chart) g.series:not([style*=\"none\"])').length"
        assert page.js(visible) == 5
        page.js("document.querySelector('section.ds-panel:not([hidden]) .legend-tools [data-show=all]').click()")
        assert page.js(visible) == len(result.systems)

        # sorting: click the System header -> alphabetical; click the rank header -> by rank
        board = "section.ds-panel:not([hidden]) .board:not([hidden])"
        page.js(f"document.querySelectorAll('{board} table.leaderboard th')[1].click()")
        names = page.js(f"Array.from(document.querySelectorAll('{board} table.leaderboard tbody tr')).map(r => r.dataset.system)")
        assert names == sorted(names, key=str.lower)
        page.js(f"document.querySelectorAll('{board} table.leaderboard th')[0].click()")
        ranks = page.js(
            f"Array.from(document.querySelectorAll('{board} table.leaderboard tbody tr td.rank')).map(td => +td.dataset.v)"
        )
        assert ranks == sorted(ranks)

        # drill-down: click the first cell with examples; the pairs' sentences appear
        ds0 = result.datasets[0]
        target = next(e for e in result.entities if e.dataset == ds0 and e.examples)
        page.js(
            f"(() => {{ const b = document.querySelector('section.ds-panel:not([hidden]) .matrix-block');"
            f" const sys = JSON.parse(document.getElementById('cxr-data').textContent).datasets[0].systems;"
            f" const si = sys.indexOf({json.dumps(target.system)});"
            f" const tr = Array.from(b.querySelectorAll('tr[data-e]')).find(r => r.querySelector('th').title === {json.dumps(target.entity)});"
            f" tr.cells[si + 2].click(); }})()"
        )
        assert page.js("document.getElementById('drill').hidden") is False
        drill_text = page.js("document.querySelector('#drill .drill-body').innerText")
        assert target.system in drill_text and target.name in drill_text
        assert target.examples[0].reference in drill_text and target.examples[0].candidate in drill_text
        for rules in (target.examples[0].reference_rules, target.examples[0].candidate_rules):
            assert not rules or f"rules: {rules}" in drill_text  # the rule ids beside the evidence

        # switching tabs and strata works and shows the other dataset's leaderboard
        page.js("document.querySelectorAll('nav.tabs .tab')[1].click()")
        assert page.js("document.querySelector('section.ds-panel:not([hidden]) h2').textContent").endswith(result.datasets[1])
        assert page.js("document.getElementById('drill').hidden") is True
        page.js("document.querySelectorAll('nav.tabs .tab')[0].click()")
        page.js(
            "(() => { const s = document.querySelector('section.ds-panel:not([hidden]) .site-select'); s.value = s.options[1].value; s.dispatchEvent(new Event('change')); })()"
        )
        assert page.js(f"document.querySelector('{board}').dataset.stratum").startswith("site:")

        page.js("window.scrollTo(0, 0)")
        page.drain()
        png = base64.b64decode(page.send("Page.captureScreenshot", format="png")["data"])
        errors = page.errors()
        requests = page.requests()

    assert errors == [], errors
    # the only request is the page itself: nothing else loaded, from anywhere
    assert requests == [url], requests
    assert served == ["/report.html"], served

    shot = tmp_path / "report.png"
    shot.write_bytes(png)
    w, h, distinct = png_info(shot.read_bytes())
    assert (w, h) == (width, height)
    assert shot.stat().st_size > 20_000
    assert distinct > 100, "screenshot looks blank"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    args = [int(x) for x in sys.argv[3:5]]
    print(screenshot(Path(sys.argv[1]), Path(sys.argv[2]), *args, full_page=len(args) < 2))
