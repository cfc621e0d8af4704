"""The 80-column transcript in docs/cli-transcript.md is what a terminal really shows.

`cxreval evaluate --example` runs in a pseudo-terminal 80 columns wide; every line must fit, no
number may be squeezed to "0.…", the signature must stand whole on one line, and the output
must equal the transcript in the docs (regenerate it with CXREVAL_UPDATE_TRANSCRIPT=1).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli-transcript.md"
FENCE = "```text\n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_in_terminal(args: list[str], cwd: Path, columns: int = 80) -> str:
    """Run a command with a pseudo-terminal of ``columns`` as its stdout/stderr; the text it showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    text = ANSI.sub("", b"".join(chunks).decode("utf-8")).replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def test_example_at_80_columns_matches_the_docs(tmp_path: Path) -> None:
    shown = run_in_terminal([sys.executable, "-m", "cxreval", "evaluate", "--example", "--out", "cxreval-out"], tmp_path)
    lines = shown.splitlines()
    sig = [i for i, line in enumerate(lines) if line == "signature:"]
    assert sig, shown
    signature = lines[sig[0] + 1]
    assert signature.startswith("metric:spec-cxr|") and signature.endswith("|version:" + signature.split("version:")[1])
    assert "uncertain:positive" in signature  # whole, on one line, even past 80 columns
    for line in lines:
        if line is not signature:
            assert len(line) <= 80, line
    assert "0.…" not in shown and "…│" not in shown.replace(" …│", "")
    assert re.search(r"│ Pleural effusion +│ +3 │ +2 │ +0 │ 0\.600 │ 1\.000 │ 0\.750 │", shown)
    if os.environ.get("CXREVAL_UPDATE_TRANSCRIPT"):
        head = DOC.read_text(encoding="utf-8").split(FENCE)[0]
        DOC.write_text(f"{head}{FENCE}$ cxreval evaluate --example --out cxreval-out\n{shown}```\n", encoding="utf-8")
    documented = DOC.read_text(encoding="utf-8").split(FENCE, 1)[1].rsplit("```", 1)[0]
    assert documented == "$ cxreval evaluate --example --out cxreval-out\n" + shown, (
        "docs/cli-transcript.md is out of date: rerun with CXREVAL_UPDATE_TRANSCRIPT=1"
    )


def test_signature_is_whole_on_a_pipe(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cxreval", "evaluate", "--example", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "60"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    signature = lines[lines.index("signature:") + 1]
    scores = (tmp_path / "scores.json").read_text(encoding="utf-8")
    assert f'"signature": "{signature}"' in scores
