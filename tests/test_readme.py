"""Every command in README.md works as written (and the docs snippets marked runnable).

What is run
- README.md: every fenced ``bash`` / ``sh`` / ``shell`` / ``console`` block and every ``python``
  block, in document order.
- docs/*.md: only the blocks right after a ``<!-- readme-test: run -->`` comment.
- A block right after ``<!-- readme-test: skip (REASON) -->`` is not run: it shows up as a
  skipped test with its reason (``pytest -ra`` lists them). Use it only for what cannot run
  here (an LLM endpoint, an API key).
- Lines that are never run, each listed as a skipped test too: installs (``python3 -m venv``,
  ``. .venv/bin/activate``, ``pip install ...``; the rest of an ``&&`` chain still runs) and the
  test suite itself (``pytest``).

Where
- One workspace per module: ``WS/repo`` is the working directory, holding links to the
  repository's ``benchmarks``, ``src``, ``docs``, ``tests``, ``.ci``, ``pyproject.toml`` and
  ``README.md`` (outputs land in the workspace, never in the repository), and ``WS/shared/data``
  links to the shared data: ``$CXREVAL_DATA_DIR``, else ``../shared/data`` beside the repository.
  So ``../shared/data`` in a README command resolves as it does from the repository root.
- ``cxreval``, ``python`` and ``python3`` are the console script and the interpreter of the
  environment running the tests; ``CXREVAL_DATA_DIR`` is set to the data folder and
  ``XDG_CACHE_HOME`` to the workspace (no LLM answer store in the user's home).
- Shell blocks run in one ``bash`` each (``set -euo pipefail``, commands in order, so ``$!``
  and ``cd`` carry within a block; background jobs are killed at the end). Python blocks run with
  this interpreter as a script. The loopback LLM server's port in the README (8011) is replaced
  by a free port, so parallel runs cannot talk to each other's server. Blocks share the workspace, so a later block may read what an
  earlier one wrote (run the whole module, not one test of it).

Checks
- Exit status 0.
- Every file or folder a command says it writes exists afterwards: ``--out``, ``-o``, ``--html``,
  ``--failures-out`` values (``scores.json`` inside an ``evaluate --out`` folder; ``systems.csv``
  with ``--system-col``), a ``bench`` config's ``out`` folder with ``report.html``, ``> FILE``
  redirections, and in Python the paths given to ``.save(...)``, ``.to_csv(...)``,
  ``write_html(...)``.
- Without the shared data, blocks that read it (and blocks that read what those write) are
  skipped with the reason.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BLOCK_TIMEOUT_S = 300
SHELL_LANGS = {"bash", "sh", "shell", "console"}
PYTHON_LANGS = {"python", "py", "python3"}
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(run|skip)\s*(?:\((.+?)\))?\s*-->$")
LINKED = ("benchmarks", "src", "docs", "tests", ".ci", "pyproject.toml", "README.md")
DATA_HINTS = ("../shared/data", "benchmarks/configs/")
LOOPBACK_PORT = r"(?<=--port )8011\b|(?<=127\.0\.0\.1:)8011\b"


def data_dir() -> Path | None:
    env = os.environ.get("CXREVAL_DATA_DIR")
    path = Path(env) if env else ROOT.parent / "shared" / "data"
    return path.resolve() if path.is_dir() else None


# --------------------------------------------------------------------------------------------
# Markdown -> blocks -> commands
# --------------------------------------------------------------------------------------------


@dataclass
class Block:
    file: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: tuple[str, str] | None  # ("run" | "skip", reason)


def read_blocks(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown file, each with the readme-test marker right above it."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence[0] * len(fence)):
            body.append(lines[i])
            i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        marker = None
        if prev >= 0:
            mm = MARKER.match(lines[prev].strip())
            if mm:
                marker = (mm.group(1), (mm.group(2) or "").strip())
        blocks.append(Block(str(path.relative_to(ROOT)), start + 1, lang, "\n".join(body), marker))
        i += 1
    return blocks


@dataclass
class Command:
    line: int  # 1-based line in the Markdown file
    text: str  # as written (continuation lines and heredoc bodies included)
    skipped: list[str] = field(default_factory=list)  # parts not run, with the reason


def split_commands(block: Block) -> list[Command]:
    """Logical shell commands: backslash continuations joined, heredoc bodies kept with theirs."""
    lines = block.text.split("\n")
    if block.lang == "console":  # only "$ " lines are commands; "> " continues one
        kept: list[str] = []
        for ln in lines:
            if ln.startswith("$ "):
                kept.append(ln[2:])
            elif ln.startswith("> ") and kept:
                kept.append(ln[2:])
            else:
                kept.append("")
        lines = kept
    out: list[Command] = []
    i = 0
    while i < len(lines):
        first = lines[i]
        if not first.strip() or first.lstrip().startswith("#"):
            i += 1
            continue
        start = i
        parts = [first]
        while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            parts.append(lines[i])
        for strip_tabs, word in re.findall(r"<<(-?)\s*['\"]?(\w+)['\"]?", "\n".join(parts)):
            while i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
                if (lines[i].lstrip("\t") if strip_tabs else lines[i]) == word:
                    break
        out.append(Command(block.line + 1 + start, "\n".join(parts)))
        i += 1
    return out


def split_and(command: str) -> list[str]:
    """``a && b && c`` -> [a, b, c], quotes respected."""
    parts, buf, quote, i = [], [], None, 0
    while i < len(command):
        c = command[i]
        if quote:
            buf.append(c)
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            buf.append(c)
        elif command.startswith("&&", i):
            parts.append("".join(buf).strip())
            buf = []
            i += 2
            continue
        else:
            buf.append(c)
        i += 1
    parts.append("".join(buf).strip())
    return [p for p in parts if p]


def _words(segment: str) -> list[str]:
    try:
        words = shlex.split(segment, comments=True)
    except ValueError:
        return segment.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value prefixes
        words = words[1:]
    return words


def classify(segment: str) -> str | None:
    """Why a command segment is not run (None: it is run)."""
    w = _words(segment)
    if not w:
        return None
    if w[0] == "pytest" or w[1:3] == ["-m", "pytest"]:
        return "runs the test suite itself (.ci/run runs it)"
    if w[0] in (".", "source") and len(w) > 1 and w[1].endswith("activate"):
        return "installs (activates the new virtual environment)"
    if w[0].startswith("python") and w[1:3] == ["-m", "venv"]:
        return "installs (creates a virtual environment)"
    if (w[0] in ("pip", "pip3") and w[1:2] == ["install"]) or (w[1:4] == ["-m", "pip", "install"]):
        return "installs (pip install)"
    return None


def runnable(cmd: Command) -> str | None:
    """The part of a command that is run, with ``cmd.skipped`` filled in; None when nothing is."""
    if "<<" in cmd.text:  # heredocs are run whole
        return cmd.text
    segments = split_and(cmd.text.replace("\\\n", " "))
    reasons = [(s, classify(s)) for s in segments]
    for _, r in reasons:
        if r and r.startswith("runs the test suite"):
            cmd.skipped.append(f"{cmd.text.strip()}  ->  {r}")
            return None
    for s, r in reasons:
        if r:
            cmd.skipped.append(f"{s}  ->  {r}")
    kept = [s for s, r in reasons if not r]
    return " && ".join(kept) if kept else None


# --------------------------------------------------------------------------------------------
# What a block says it writes
# --------------------------------------------------------------------------------------------

OUT_OPTIONS = ("--out", "-o", "--html", "--failures-out")


def _option(words: list[str], names: tuple[str, ...]) -> list[str]:
    found = []
    for i, w in enumerate(words):
        for n in names:
            if w == n and i + 1 < len(words):
                found.append(words[i + 1])
            elif w.startswith(n + "="):
                found.append(w.split("=", 1)[1])
    return found


def shell_outputs(command: str, cwd: Path) -> list[str]:
    """Paths (relative to ``cwd``) that a shell command says it writes."""
    first = command.split("\n", 1)[0] if "<<" in command else command.replace("\\\n", " ")
    words = _words(first)
    out: list[str] = []
    for i, w in enumerate(words):
        if w in (">", ">>") and i + 1 < len(words):
            out.append(words[i + 1])
        elif re.match(r"^>>?\S", w):
            out.append(w.lstrip(">"))
    pieces: list[list[str]] = [[]]
    for w in words:
        if w == "|":
            pieces.append([])
        else:
            pieces[-1].append(w)
    for pw in pieces:
        if not pw or Path(pw[0]).name != "cxreval":
            continue
        out += _option(pw, OUT_OPTIONS)
        sub = pw[1] if len(pw) > 1 else ""
        if sub == "evaluate":
            for folder in _option(pw, ("--out", "-o")):
                runs = _option(pw, ("--runs",))
                name = (
                    "systems.csv"
                    if "--system-col" in " ".join(pw)
                    else "runs.json"
                    if runs and int(runs[0]) > 1
                    else "scores.json"
                )
                out.append(str(Path(folder) / name))
        if sub == "bench" and not _option(pw, ("--out",)) and len(pw) > 2:
            config = cwd / pw[2]
            if config.is_file():
                folder = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("out")
                if folder:
                    out += [str(Path(folder) / "result.json")]
                    if "--no-html" not in pw:
                        out.append(str(Path(folder) / "report.html"))
    return out


PY_WRITES = [
    re.compile(r"\.(?:save|to_csv|to_parquet|to_json|write_text)\(\s*[\"']([^\"']+)[\"']"),
    re.compile(r"write_html\([^,()]+,\s*[\"']([^\"']+)[\"']"),
]


def python_outputs(code: str) -> list[str]:
    out: list[str] = []
    for rx in PY_WRITES:
        out += rx.findall(code)
    out += [str(Path(p) / "scores.json") for p in re.findall(r"\.save\(\s*[\"']([^\"']+)[\"']", code)]
    return out


# --------------------------------------------------------------------------------------------
# The cases: one per block, and one per line that is not run
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    block: Block
    skip: str | None = None  # reason, for blocks and lines that are not run


def collect() -> list[Case]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    cases: list[Case] = []
    for path in files:
        readme = path.name == "README.md" and path.parent == ROOT
        for b in read_blocks(path):
            if b.lang not in SHELL_LANGS | PYTHON_LANGS:
                continue
            if not readme and (b.marker is None or b.marker[0] != "run"):
                continue
            cid = f"{b.file}:{b.line}:{b.lang}"
            if b.marker is not None and b.marker[0] == "skip":
                cases.append(Case(cid, b, skip=f"{cid}: {b.marker[1] or 'marked skip'}"))
                continue
            if b.lang in SHELL_LANGS:
                for cmd in split_commands(b):
                    runnable(cmd)
                    for note in cmd.skipped:
                        cases.append(Case(f"{b.file}:{cmd.line}:line", b, skip=f"{b.file}:{cmd.line}: {note}"))
            cases.append(Case(cid, b))
    return cases


CASES = collect()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    ws = tmp_path_factory.mktemp("readme")
    repo = ws / "repo"
    repo.mkdir()
    for name in LINKED:
        if (ROOT / name).exists():
            (repo / name).symlink_to(ROOT / name)
    data = data_dir()
    if data is not None:
        (ws / "shared").mkdir()
        (ws / "shared" / "data").symlink_to(data)
    shims = ws / "bin"
    shims.mkdir()
    script = Path(sys.executable).parent / "cxreval"
    found = str(script) if script.exists() else shutil.which("cxreval")
    assert found, "the cxreval console script is not installed (pip install -e '.[test]')"
    # wrappers, not links: a link to a virtual environment's python would lose the environment
    for name, target in (("cxreval", found), ("python", sys.executable), ("python3", sys.executable)):
        (shims / name).write_text(f'#!/bin/sh\nexec {shlex.quote(str(target))} "$@"\n', encoding="utf-8")
        (shims / name).chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(shims), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["XDG_CACHE_HOME"] = str(ws / "cache")
    env.pop("CXREVAL_CACHE_DIR", None)
    if data is not None:
        env["CXREVAL_DATA_DIR"] = str(data)
    return {"ws": ws, "cwd": repo, "env": env, "data": data, "unavailable": set()}


def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def _needs_missing(text: str, state: dict) -> str | None:
    if state["data"] is None and any(h in text for h in DATA_HINTS):
        return "shared data not found (../shared/data beside the repository, or set CXREVAL_DATA_DIR)"
    for produced in state["unavailable"]:
        if produced in text:
            return f"reads {produced}, which a block skipped for lack of shared data writes"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_shell(block: Block, state: dict) -> tuple[subprocess.CompletedProcess, list[str]]:
    cwd = state["cwd"]
    port = str(free_port())
    script = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    outputs: list[str] = []
    for cmd in split_commands(block):
        text = runnable(cmd)
        if text is None:
            continue
        text = re.sub(LOOPBACK_PORT, port, text)  # the README's fixed port: a free one here
        script.append("printf '%s\\n' " + shlex.quote(f"+ {text}"))
        script.append(text)
        outputs += shell_outputs(text, cwd)
    path = state["ws"] / f"block-{Path(block.file).stem}-{block.line}.sh"
    path.write_text("\n".join(script) + "\n", encoding="utf-8")
    proc = subprocess.run(
        ["bash", str(path)],
        cwd=cwd,
        env=state["env"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    return proc, outputs


def run_python(block: Block, state: dict) -> tuple[subprocess.CompletedProcess, list[str]]:
    path = state["ws"] / f"block-{Path(block.file).stem}-{block.line}.py"
    path.write_text(block.text + "\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=state["cwd"],
        env=state["env"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    return proc, python_outputs(block.text)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_snippet(case: Case, workspace: dict) -> None:
    if case.skip:
        pytest.skip(f"not run: {case.skip}")
    block = case.block
    shell = block.lang in SHELL_LANGS
    missing = _needs_missing(block.text, workspace)
    if missing:
        cmds = [runnable(c) for c in split_commands(block)] if shell else []
        produced = [p for t in cmds if t for p in shell_outputs(t, workspace["cwd"])] if shell else python_outputs(block.text)
        workspace["unavailable"].update(p.rstrip("/") for p in produced)
        pytest.skip(f"{case.id}: {missing}")
    proc, outputs = (run_shell if shell else run_python)(block, workspace)
    log = f"--- stdout\n{_tail(proc.stdout)}\n--- stderr\n{_tail(proc.stderr)}"
    print(log)
    assert proc.returncode == 0, f"{case.id} exited {proc.returncode}\n{log}"
    if shell:
        assert proc.stdout.strip(), f"{case.id} printed nothing\n{log}"
    for rel in outputs:
        target = workspace["cwd"] / rel
        assert target.exists(), f"{case.id}: {rel} was not written\n{log}"
        if target.is_file() and target.suffix in (".json", ".jsonl", ".csv", ".html"):
            assert target.stat().st_size > 0, f"{case.id}: {rel} is empty"


# --------------------------------------------------------------------------------------------
# The README's front matter and links
# --------------------------------------------------------------------------------------------


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's second command is, character for character, the last line of .ci/run."""
    first = read_blocks(ROOT / "README.md")[0]
    commands = [c.text for c in split_commands(first)]
    assert len(commands) == 2, commands
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").split("\n") if ln.strip()]
    assert commands[1] == ci[-1]
    assert "cxreval evaluate --example" in commands[0]


def test_markers_are_well_formed() -> None:
    """Every readme-test comment parses and sits right above a fenced block."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if "readme-test" not in line or not line.lstrip().startswith("<!--"):
                continue
            where = f"{path.relative_to(ROOT)}:{i + 1}"
            assert MARKER.match(line.strip()), f"{where}: malformed marker {line!r}"
            nxt = i + 1
            while nxt < len(lines) and not lines[nxt].strip():
                nxt += 1
            assert nxt < len(lines) and FENCE.match(lines[nxt]), f"{where}: marker not followed by a fenced block"
            if "skip" in line:
                assert MARKER.match(line.strip()).group(2), f"{where}: a skip marker needs a reason"


def _slug(heading: str) -> str:
    text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    fenced = False
    out = set()
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def test_links_resolve() -> None:
    """Relative links and images in README.md and docs/*.md point at files (and headings) that exist."""
    bad = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                bad.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not bad, "\n".join(bad)
