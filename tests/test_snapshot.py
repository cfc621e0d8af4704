"""The readings snapshot guards every reading of the corpus (IU X-ray, ReXrank IU, two systems).

The corpus is read at run time from the shared data (skipped without it); the snapshot file holds
one hash per text id, no text. A change of readings fails here until the snapshot is rewritten
(``cxreval snapshot update``) and committed with the reason; ``cxreval snapshot diff`` shows it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from cxreval.cli import app
from cxreval.datasets.corpus import readings_corpus
from cxreval.extract.models import Mention
from cxreval.extract.rules import RuleExtractor, load_rules
from cxreval.extract.snapshot import (
    SNAPSHOT_FORMAT,
    Snapshot,
    SnapshotError,
    compare,
    mention_reading,
    read_corpus,
    readings_at_revision,
    render_diff,
)
from cxreval.ontology import load_ontology
from tests.conftest import shared_data_dir

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "snapshots" / "readings.tsv"


@cache
def _corpus() -> dict[str, str]:
    root = shared_data_dir()
    if root is None:
        pytest.skip("shared data not present: the snapshot test reads IU X-ray and ReXrank at run time")
    return readings_corpus(root)


def _render(*parts: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    for part in parts:
        console.print(part)
    return console.export_text()


def _without_cue(tmp_path: Path, rule: str, phrase: str) -> Path:
    """A user rule file that removes one phrase from a packaged cue record."""
    path = tmp_path / "without.yaml"
    path.write_text(yaml.safe_dump({"rules": [{"id": rule, "remove_phrases": [phrase]}]}), encoding="utf-8")
    return path


def test_the_corpus_reads_as_the_snapshot_says() -> None:
    texts = _corpus()
    assert len(texts) > 7000 and sum(i.startswith("iu/") for i in texts) == 3851
    ex = RuleExtractor(load_ontology())
    now = read_corpus(ex.extract, texts)
    pinned = Snapshot.read(SNAPSHOT)
    found = compare(pinned, Snapshot.of(ex.signature, now))
    assert not found, (
        "the engine reads the corpus differently from tests/snapshots/readings.tsv; see "
        "`cxreval snapshot diff`, and commit `cxreval snapshot update` with the reason\n"
        + _render(*render_diff(found, texts, now, limit=10))
    )


def test_a_seeded_change_fails_the_guard_and_the_diff_names_its_texts(tmp_path: Path) -> None:
    """Removing one negation cue changes readings: the diff lists those texts and shows them."""
    texts = _corpus()
    onto = load_ontology()
    seeded = RuleExtractor(onto, load_rules(onto, _without_cue(tmp_path, "negation.pre", "free of")))
    now = read_corpus(seeded.extract, texts)
    found = compare(Snapshot.read(SNAPSHOT), Snapshot.of(seeded.signature, now))
    assert found.changed and not found.added and not found.removed
    plain = RuleExtractor(onto)
    for ident in found.changed:  # each listed text is one whose readings the seeded cue changed
        assert "free of" in texts[ident].lower() and plain.extract(texts[ident]).mentions != seeded.extract(texts[ident]).mentions
    shown = _render(*render_diff(found, texts, now, limit=3))
    first = found.changed[0]
    assert first in shown and texts[first][:40] in shown.replace("\n", " ")


def test_the_diff_command_shows_before_and_after(tmp_path: Path) -> None:
    """`cxreval snapshot diff` exits 1 on a changed reading and prints both sides; 0 when equal."""
    _corpus()
    if (
        shutil.which("git") is None
        or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, check=False, timeout=600).returncode
    ):
        pytest.skip("not a git checkout: no earlier engine to read with")
    runner = CliRunner()
    cues = _without_cue(tmp_path, "negation.pre", "free of")
    data = str(shared_data_dir())
    changed = runner.invoke(
        app,
        ["snapshot", "diff", "--snapshot", str(SNAPSHOT), "--data-dir", data, "--rules", str(cues), "--limit", "2"],
        env={"COLUMNS": "200"},
    )
    assert changed.exit_code == 1, changed.output
    assert "texts read differently" in changed.output and "before (HEAD: rules@" in changed.output
    assert "absent/negated" in changed.output  # the old reading of the denied finding, beside the new one
    same = runner.invoke(app, ["snapshot", "diff", "--snapshot", str(SNAPSHOT), "--data-dir", data])
    assert same.exit_code == 0, same.output
    assert "0 texts read differently" in same.output


# Without the shared data: the mechanism on hand-written texts ---------------------------------------

TEXTS = {
    "a": "No pleural effusion. The lungs are free of consolidation.",
    "b": "Small left pleural effusion, new since the prior study.",
    "c": "Heart size is normal. Free of pneumothorax.",
    "d": "",
}


def test_readings_round_trip_and_name_what_changed(tmp_path: Path) -> None:
    onto = load_ontology()
    plain = RuleExtractor(onto)
    before = read_corpus(plain.extract, TEXTS)
    path = tmp_path / "snap.tsv"
    Snapshot.of(plain.signature, before).write(path)
    read = Snapshot.read(path)
    assert read == Snapshot.of(plain.signature, before) and read.engine == plain.signature
    assert "No pleural" not in path.read_text(encoding="utf-8")  # hashes, never text
    assert before["d"] == ()  # an empty text reads nothing, and is pinned as such

    seeded = RuleExtractor(onto, load_rules(onto, _without_cue(tmp_path, "negation.pre", "free of")))
    after = read_corpus(seeded.extract, {**TEXTS, "e": "No pneumothorax."})
    found = compare(read, Snapshot.of(seeded.signature, after))
    assert found.changed == ["a", "c"] and found.added == ["e"] and found.removed == []
    shown = _render(*render_diff(found, TEXTS, after, before))
    assert "The lungs are free of consolidation." in shown
    assert "consolidation absent/negated" in shown and "consolidation present/definite" in shown
    assert "unchanged)" in shown  # the readings both sides share are counted, not repeated
    assert "1 ids new in the corpus: e" in shown


def test_provenance_is_no_reading() -> None:
    """The cue (and later rule ids) that decided a reading is left out, so adding it changes no hash."""
    m = Mention(entity="pneumothorax", status="absent", start=3, end=15, sentence_start=0, sentence_end=16)
    assert mention_reading(m.model_dump()) == mention_reading(m.model_copy(update={"cue": "no"}).model_dump())
    assert mention_reading(m.model_dump()) == "3-15 pneumothorax absent/negated section=body evidence=0-16"
    placed = m.model_copy(update={"side": "left", "zones": ("apical",), "historical": True})
    assert mention_reading(placed.model_dump()) == (
        "3-15 pneumothorax absent/negated side=left zones=apical section=body historical evidence=0-16"
    )


@pytest.mark.parametrize(
    "content, problem",
    [
        ("iu/1\tabcdef0123456789\n", "line 1: not a readings snapshot"),
        (SNAPSHOT_FORMAT + "\niu/1 abcdef0123456789\n", "line 2: expected 'id<TAB>16 hex digits'"),
        (SNAPSHOT_FORMAT + "\niu/1\tabcdef0123456789\niu/1\tabcdef0123456789\n", "line 3: a repeated id"),
    ],
)
def test_a_bad_snapshot_file_is_named_with_its_line(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "snap.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SnapshotError, match=problem) as info:
        Snapshot.read(path)
    assert str(path) in str(info.value)


def test_readings_at_a_git_revision_use_that_revisions_engine() -> None:
    """The 'before' side runs the committed engine in a child process, on texts whose readings it
    has not changed since: both sides agree line for line."""
    if (
        shutil.which("git") is None
        or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, check=False, timeout=600).returncode
    ):
        pytest.skip("not a git checkout")
    engine, old = readings_at_revision("HEAD", {"x": "No pneumothorax. Small right effusion."}, ROOT)
    assert engine.startswith("rules@")
    assert old["x"] == read_corpus(RuleExtractor(load_ontology()).extract, {"x": "No pneumothorax. Small right effusion."})["x"]
    with pytest.raises(SnapshotError, match="no-such-revision"):
        readings_at_revision("no-such-revision", {"x": "No pneumothorax."}, ROOT)
