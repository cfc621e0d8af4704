"""Readings snapshots: what the rule engine reads in a corpus, pinned one line per text.

A snapshot file holds, for every text id of a corpus, a hash of the engine's readings of that
text: each mention's span, entity, status and certainty grade, side, zones, severity, change,
tip and sizes, section, history and implied flags, and evidence span. Provenance (the cue that decided a
reading, later rule ids) is left out, so adding provenance changes no hash. No text is kept: the
corpus is read again when the snapshot is checked (IU X-ray is CC BY-NC-ND).

A change of readings then shows as a list of ids; :func:`readings_at_revision` reads the same
texts with the engine of an earlier git revision, so :func:`render_diff` can print each changed
text with its old and new readings side by side (``cxreval snapshot diff``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from cxreval.extract.models import Extraction
from cxreval.io.writers import atomic_write_text

#: The first line of every snapshot file; a file without it is refused (another format, or none).
SNAPSHOT_FORMAT = "# cxreval readings snapshot, format 1"

#: Readings of one text: one line per mention, in the engine's order.
Readings = tuple[str, ...]


class SnapshotError(ValueError):
    """A snapshot file that cannot be read, named with its path and line."""


def mention_reading(m: Mapping[str, Any]) -> str:
    """One mention as a line: ``start-end entity status/grade`` then its attributes and flags.

    ``m`` is a mention's ``model_dump()``: a mapping, so that readings of an older engine (another
    process, another version of the package) are written by this same function.
    """
    parts = [f"{m['start']}-{m['end']} {m['entity']} {m['status']}/{m['certainty']}"]
    for key in ("side", "severity", "comparison"):
        if m.get(key):
            parts.append(f"{key}={m[key]}")
    if m.get("zones"):
        parts.append("zones=" + ",".join(m["zones"]))
    for key in ("tip", "tip_mm", "size_mm"):
        if m.get(key) is not None:
            parts.append(f"{key}={m[key]:g}" if isinstance(m[key], float) else f"{key}={m[key]}")
    parts.append(f"section={m.get('section', 'body')}")
    parts.extend(flag for flag in ("historical", "implied") if m.get(flag))
    parts.append(f"evidence={m.get('sentence_start', -1)}-{m.get('sentence_end', -1)}")
    return " ".join(parts)


def readings_of(extraction: Extraction) -> Readings:
    """The readings of one extraction (no provenance: see :func:`mention_reading`)."""
    return tuple(mention_reading(m.model_dump()) for m in extraction.mentions)


def readings_hash(readings: Readings) -> str:
    """16 hex digits of SHA-256 over the reading lines: a stand-in for them in the file."""
    return hashlib.sha256("\n".join(readings).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Snapshot:
    """Text id -> hash of its readings, with the engine signature that wrote them."""

    engine: str
    hashes: dict[str, str]

    @classmethod
    def of(cls, engine: str, readings: Mapping[str, Readings]) -> Snapshot:
        return cls(engine, {ident: readings_hash(r) for ident, r in readings.items()})

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the file atomically: a header, then ``id<TAB>hash`` per text, sorted by id."""
        head = [
            SNAPSHOT_FORMAT,
            f"# engine: {self.engine}; texts: {len(self.hashes)}",
            "# One line per text: its id and a hash of the rule engine's readings of it. The texts are",
            "# read at run time (no report text is kept here). `cxreval snapshot diff` shows what changed;",
            "# `cxreval snapshot update` rewrites this file.",
        ]
        body = [f"{ident}\t{h}" for ident, h in sorted(self.hashes.items())]
        atomic_write_text(path, "\n".join(head + body) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Snapshot:
        """Read a snapshot file; raises :class:`SnapshotError` naming the file and line."""
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot read the snapshot ({exc.strerror or exc})") from None
        if not lines or lines[0] != SNAPSHOT_FORMAT:
            raise SnapshotError(
                f"{path}: line 1: not a readings snapshot of this format "
                f"(expected {SNAPSHOT_FORMAT!r}); rewrite it with `cxreval snapshot update`"
            )
        engine = lines[1].removeprefix("# engine: ").split(";")[0] if len(lines) > 1 else ""
        hashes: dict[str, str] = {}
        for number, line in enumerate(lines, 1):
            if not line or line.startswith("#"):
                continue
            ident, tab, h = line.partition("\t")
            if not tab or not ident or len(h) != 16 or ident in hashes:
                problem = "a repeated id" if ident in hashes else "expected 'id<TAB>16 hex digits'"
                raise SnapshotError(f"{path}: line {number}: {problem}: {line[:80]!r}")
            hashes[ident] = h
        return cls(engine, hashes)


@dataclass(frozen=True)
class SnapshotDiff:
    """Ids whose readings changed, and ids only one side has (the corpus itself changed)."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def summary(self) -> str:
        return f"{len(self.changed)} texts read differently, {len(self.added)} new, {len(self.removed)} gone from the corpus"


def compare(snapshot: Snapshot, current: Snapshot) -> SnapshotDiff:
    """What ``current`` reads differently from ``snapshot`` (ids in snapshot order)."""
    old, new = snapshot.hashes, current.hashes
    return SnapshotDiff(
        changed=sorted(i for i in old.keys() & new.keys() if old[i] != new[i]),
        added=sorted(new.keys() - old.keys()),
        removed=sorted(old.keys() - new.keys()),
    )


def read_corpus(extract: Callable[[str], Extraction], texts: Mapping[str, str]) -> dict[str, Readings]:
    """Readings of every text by ``extract`` (an engine's ``extract`` method)."""
    return {ident: readings_of(extract(text)) for ident, text in texts.items()}


#: Run in a child process on an older source tree: text id -> mention dumps, as JSON.
_OLD_ENGINE = """
import json, sys
from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import load_ontology
texts = json.load(sys.stdin)
ex = RuleExtractor(load_ontology())
out = {i: [m.model_dump(mode="json") for m in ex.extract(t).mentions] for i, t in texts.items()}
json.dump({"engine": ex.signature, "readings": out}, sys.stdout)
"""


def _git(repo: Path, *args: str) -> bytes:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    if run.returncode:
        raise SnapshotError(f"git {' '.join(args[:2])}: {run.stderr.decode(errors='replace').strip()}")
    return run.stdout


def _source_at(revision: str, repo: Path, into: Path) -> None:
    """Unpack ``src/`` of ``revision`` into ``into`` (``git archive``; the work tree is untouched)."""
    top = Path(_git(repo, "rev-parse", "--show-toplevel").decode().strip())
    with tarfile.open(fileobj=BytesIO(_git(top, "archive", "--format=tar", revision, "src"))) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuse links and paths out of ``into``
            tar.extractall(into, filter="data")
        else:  # pragma: no cover - our own repository's archive
            tar.extractall(into)


def readings_at_revision(
    revision: str,
    texts: Mapping[str, str],
    repo: str | os.PathLike[str] = ".",
) -> tuple[str, dict[str, Readings]]:
    """(engine signature, readings) of ``texts`` by the packaged engine of git ``revision`` of ``repo``.

    The revision's ``src/`` is unpacked into a temporary folder and run in a child process, so
    the old engine's rules and ontology are its own; the lines are written by this version's
    :func:`mention_reading`, so both sides compare field by field.
    """
    with tempfile.TemporaryDirectory(prefix="cxreval-snapshot-") as tmp:
        _source_at(revision, Path(repo), Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        run = subprocess.run(
            [sys.executable, "-c", _OLD_ENGINE],
            input=json.dumps(dict(texts)),
            capture_output=True,
            text=True,
            env=env,
            check=False,
            cwd=tmp,
        )
    if run.returncode:
        raise SnapshotError(f"the engine of {revision} failed: {run.stderr.strip().splitlines()[-1:]}")
    data = json.loads(run.stdout)
    return data["engine"], {i: tuple(mention_reading(m) for m in ms) for i, ms in data["readings"].items()}


def _with_words(line: str, text: str) -> str:
    """A reading line with the words its span covers, for the eye (the hash never sees them)."""
    span = line.split(" ", 1)[0]
    start, _, end = span.partition("-")
    if not (start.isdigit() and end.isdigit()) or not line:
        return line
    return f'{line} "{text[int(start) : int(end)]}"'


def _side_by_side(old: Readings, new: Readings, text: str) -> list[tuple[str, str]]:
    """Rows (before, after) for the lines that differ; equal runs become one count row."""
    rows: list[tuple[str, str]] = []
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            rows.append((f"({a1 - a0} unchanged)", f"({b1 - b0} unchanged)"))
            continue
        left = [_with_words(x, text) for x in old[a0:a1]]
        right = [_with_words(x, text) for x in new[b0:b1]]
        width = max(len(left), len(right))
        rows.extend(zip(left + [""] * (width - len(left)), right + [""] * (width - len(right))))
    return rows


def _readings_table(text: str, new: Readings, old: Readings | None, labels: tuple[str, str]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", expand=True)
    if old is None:
        table.add_column(f"{labels[1]} (no earlier readings to show)", overflow="fold")
        for line in new or ("(nothing read)",):
            table.add_row(_with_words(line, text))
        return table
    table.add_column(labels[0], overflow="fold")
    table.add_column(labels[1], overflow="fold")
    for before, after in _side_by_side(old, new, text):
        table.add_row(
            Text(before, style="" if before.startswith("(") else "red"),
            Text(after, style="" if after.startswith("(") else "green"),
        )
    return table


def render_diff(
    diff: SnapshotDiff,
    texts: Mapping[str, str],
    new: Mapping[str, Readings],
    old: Mapping[str, Readings] | None = None,
    *,
    limit: int = 50,
    labels: tuple[str, str] = ("before", "after"),
) -> Iterable[Any]:
    """Rich renderables: per changed text, the text and its old and new readings side by side.

    Ids with the same text (generated reports repeat) are shown once, with the others counted.
    Without ``old`` (no earlier engine to run) only the new readings are shown.
    """
    from rich.text import Text

    yield Text(diff.summary(), style="bold")
    by_text: dict[str, list[str]] = {}
    for ident in diff.changed:
        by_text.setdefault(texts.get(ident, ""), []).append(ident)
    for text, ids in list(by_text.items())[:limit]:
        more = f" and {len(ids) - 1} more ids with this text" if len(ids) > 1 else ""
        yield Text(f"\n{ids[0]}{more}", style="bold cyan")
        yield Text(text, style="dim")
        yield _readings_table(text, new[ids[0]], None if old is None else old.get(ids[0]), labels)
    if len(by_text) > limit:
        yield Text(f"\n... and {len(by_text) - limit} more changed texts (--limit)")
    for what, ids in (("new in the corpus", diff.added), ("gone from the corpus", diff.removed)):
        if ids:
            yield Text(f"\n{len(ids)} ids {what}: {', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}")
