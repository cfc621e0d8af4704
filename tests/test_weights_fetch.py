"""``cxreval weights`` against a local stand-in of the hub's file API (127.0.0.1, ``HF_ENDPOINT``).

The real huggingface_hub talks to a real HTTP server in a thread that serves small synthetic
files under the manifest's repo ids: ``GET /api/models/{repo}/revision/{rev}`` (file sizes, git
blob ids, LFS sha256) and ``HEAD``/``GET /{repo}/resolve/{rev}/{file}`` (the hub's headers, Range).
The server can advertise a wrong hash, or drop the connection mid-body. The command runs in a
subprocess with its own environment (huggingface_hub reads some settings at import).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from typer.testing import CliRunner

from cxreval.cli import app
from cxreval.weights import WeightsInputError, digest, load_manifest, parse_revisions, select

RRG = "StanfordAIMI/RRG_scorers"
BERT = "google-bert/bert-base-uncased"
ROBERTA = "distilbert/distilroberta-base"
ENCODER = "test-org/tiny-encoder"
RADGRAPH_PIN = "d97745aa136e5beb927da7e768e99de6ae807902"
CHEXBERT_PIN = "6646433b3ad83a10f6e141db76d0ece44312b236"
BERT_PIN = "86b5e0934494bd15c9632b12f734a8a67f723594"


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _radgraph_archive() -> bytes:
    members = {
        "config.json": json.dumps({"model": {"embedder": {"token_embedders": {"bert": {"model_name": ENCODER}}}}}).encode(),
        "weights.th": os.urandom(3000),
        "vocabulary/radgraph__ner_labels.txt": b"\nANAT-DP\nOBS-DP\nOBS-U\nOBS-DA\n",
        "vocabulary/radgraph__relation_labels.txt": b"suggestive_of\nlocated_at\nmodify\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class Repo:
    files: dict[str, bytes]
    lfs: set[str]
    main: str


@dataclass
class Hub:
    """The stand-in's repos and behaviour, and what it was asked."""

    url: str = ""
    repos: dict[str, Repo] = field(default_factory=dict)
    #: (repo, file) -> the sha256 advertised instead of the real one
    lie: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (repo, file) -> what the next GETs do: "half" (half the body, then the connection drops) or "503"
    script: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    log: list[tuple[str, str, str]] = field(default_factory=list)

    def advertised(self, repo: str, name: str) -> tuple[str | None, str]:
        """(LFS sha256 or None, git blob id) the API and headers report."""
        data = self.repos[repo].files[name]
        sha = self.lie.get((repo, name), hashlib.sha256(data).hexdigest())
        return (sha if name in self.repos[repo].lfs else None), _git_sha1(data)

    def downloads(self) -> list[tuple[str, str, str]]:
        return [entry for entry in self.log if "/resolve/" in entry[1]]


def _repos() -> dict[str, Repo]:
    def commit(name: str) -> str:
        return hashlib.sha1(name.encode()).hexdigest()

    model = {"model.safetensors"}
    return {
        ROBERTA: Repo(
            {
                "config.json": b'{"model_type": "roberta"}',
                "model.safetensors": os.urandom(200_000),
                "vocab.json": b'{"a": 0}',
                "merges.txt": b"#version: 0.2\n",
            },
            model,
            commit(ROBERTA),
        ),
        RRG: Repo(
            {"chexbert.pth": os.urandom(150_000), "radgraph.tar.gz": _radgraph_archive()},
            {"chexbert.pth", "radgraph.tar.gz"},
            commit(RRG),
        ),
        BERT: Repo({"vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nlung\n"}, set(), commit(BERT)),
        ENCODER: Repo(
            {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\nx\n", "tokenizer_config.json": b"{}"},
            set(),
            commit(ENCODER),
        ),
    }


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

        def _info(self, path: str) -> None:
            repo, _, rev = path[len("/api/models/") :].partition("/revision/")
            rev = unquote(rev)
            if repo not in hub.repos:
                return self._json(404, {"error": "Repository not found"})
            r = hub.repos[repo]
            siblings = []
            for name, data in r.files.items():
                sha, blob = hub.advertised(repo, name)
                entry: dict[str, object] = {"rfilename": name, "size": len(data), "blobId": blob}
                if sha is not None:
                    entry["lfs"] = {"size": len(data), "sha256": sha, "pointerSize": 134}
                siblings.append(entry)
            sha = rev if len(rev) == 40 else r.main
            self._json(200, {"id": repo, "modelId": repo, "sha": sha, "private": False, "siblings": siblings})

        def _resolve(self, path: str) -> None:
            repo, _, rest = path.lstrip("/").partition("/resolve/")
            rev, _, name = rest.partition("/")
            rev, name = unquote(rev), unquote(name)
            if repo not in hub.repos or name not in hub.repos[repo].files:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            r = hub.repos[repo]
            data = r.files[name]
            sha, blob = hub.advertised(repo, name)
            step = hub.script.get((repo, name), []).pop(0) if self.command == "GET" and hub.script.get((repo, name)) else ""
            if step == "503":
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(self.headers["Range"].split("=")[1].split("-")[0]) if self.headers.get("Range") else 0
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", rev if len(rev) == 40 else r.main)
            self.send_header("ETag", f'"{sha or blob}"')
            if sha is not None:
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if self.command != "GET":
                return
            if step == "half":
                self.wfile.write(data[start : start + (len(data) - start) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(data[start:])

        def _route(self) -> None:
            path = urlsplit(self.path).path
            hub.log.append((self.command, path, self.headers.get("Range", "")))
            if path.startswith("/api/models/"):
                self._info(path)
            elif "/resolve/" in path:
                self._resolve(path)
            else:
                self._json(404, {"error": "not found"})

        do_GET = _route
        do_HEAD = _route

    return Handler


@pytest.fixture
def hub() -> Iterator[Hub]:
    state = Hub(repos=_repos())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


_DROP = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "CXREVAL_WEIGHTS", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _cli(hub: Hub, tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP + _PROXIES}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_HOME=str(tmp / "hf-home"),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="127.0.0.1,localhost",
        **extra,
    )
    return subprocess.run(
        [sys.executable, "-m", "cxreval", "weights", *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _row(stdout: str, metric: str, folder: str) -> str:
    return next(line for line in stdout.splitlines() if f" {metric} " in line and f"{folder}/" in line)


def test_fetch_verifies_places_what_the_metrics_read_and_a_second_fetch_downloads_nothing(hub: Hub, tmp_path: Path) -> None:
    root = tmp_path / "weights"
    done = _cli(hub, tmp_path, "fetch", "radcliq-v1", "--to", str(root))
    assert done.returncode == 0, done.stderr
    files = hub.repos
    # the three folders RadCliQ-v1 reads, in the layouts docs/weight-metrics.md describes
    assert (root / "chexbert/chexbert.pth").read_bytes() == files[RRG].files["chexbert.pth"]
    assert (root / "chexbert/vocab.txt").read_bytes() == files[BERT].files["vocab.txt"]
    assert (root / "distilroberta-base/model.safetensors").read_bytes() == files[ROBERTA].files["model.safetensors"]
    for name in ("config.json", "vocab.json", "merges.txt"):
        assert (root / "distilroberta-base" / name).is_file()
    assert not (root / "distilroberta-base/tokenizer.json").exists()  # optional, absent at the commit
    for name in ("config.json", "weights.th", "vocabulary/radgraph__ner_labels.txt", "encoder/config.json", "encoder/vocab.txt"):
        assert (root / "radgraph" / name).is_file(), name
    assert not (root / "radgraph/radgraph.tar.gz").exists()  # unpacked, then removed
    assert not (root / ".cxreval-download").exists()
    # pinned commits used; the encoder's branch resolved once, printed and recorded
    gets = {(path, rng) for method, path, rng in hub.downloads() if method == "GET"}
    assert (f"/{RRG}/resolve/{RADGRAPH_PIN}/radgraph.tar.gz", "") in gets
    assert (f"/{RRG}/resolve/{CHEXBERT_PIN}/chexbert.pth", "") in gets
    lock = json.loads((root / "chexbert/.cxreval-weights.json").read_text())
    assert lock["complete"] is True and lock["revisions"] == {RRG: CHEXBERT_PIN, BERT: BERT_PIN}
    assert lock["files"]["chexbert.pth"]["sha256"] == _sha(files[RRG].files["chexbert.pth"])
    assert lock["files"]["vocab.txt"]["hub_hash"] == _git_sha1(files[BERT].files["vocab.txt"])  # non-LFS: git blob sha1
    radgraph_lock = json.loads((root / "radgraph/.cxreval-weights.json").read_text())
    assert radgraph_lock["revisions"] == {RRG: RADGRAPH_PIN, ENCODER: files[ENCODER].main}
    assert f"{ENCODER}: the default branch is commit {files[ENCODER].main}" in done.stderr
    assert radgraph_lock["files"]["weights.th"]["hub_file"] == "radgraph.tar.gz"

    listed = _cli(hub, tmp_path, "list", "--dir", str(root), "--hash")
    assert listed.returncode == 0, listed.stderr
    assert " present " in _row(listed.stdout, "sembscore", "chexbert")
    assert " present " in _row(listed.stdout, "radgraph-f1", "radgraph")
    assert " missing " in _row(listed.stdout, "ratescore", "RaTE-NER-Deberta")

    before = len(hub.downloads())
    again = _cli(hub, tmp_path, "fetch", "radcliq-v1", "--to", str(root))
    assert again.returncode == 0, again.stderr
    assert hub.downloads()[before:] == []  # neither HEAD nor GET of any file
    assert "(0 downloaded" in again.stdout

    # a file changed by hand: list says so, and a fetch replaces that one file only
    with (root / "chexbert/vocab.txt").open("ab") as fh:
        fh.write(b"extra\n")
    listed = _cli(hub, tmp_path, "list", "--dir", str(root))
    assert " unverified " in _row(listed.stdout, "sembscore", "chexbert")
    before = len(hub.downloads())
    fixed = _cli(hub, tmp_path, "fetch", "chexbert", "--to", str(root))
    assert fixed.returncode == 0, fixed.stderr
    assert [p for m, p, _ in hub.downloads()[before:] if m == "GET"] == [f"/{BERT}/resolve/{BERT_PIN}/vocab.txt"]
    assert (root / "chexbert/vocab.txt").read_bytes() == files[BERT].files["vocab.txt"]


def test_a_file_whose_bytes_do_not_match_the_hubs_hash_is_refused(hub: Hub, tmp_path: Path) -> None:
    root = tmp_path / "weights"
    wrong = "ab" * 32
    hub.lie[(RRG, "chexbert.pth")] = wrong
    done = _cli(hub, tmp_path, "fetch", "sembscore", "--to", str(root))
    assert done.returncode == 5, done.stderr
    actual = _sha(hub.repos[RRG].files["chexbert.pth"])
    assert "chexbert.pth" in done.stderr and wrong in done.stderr and actual in done.stderr
    assert "refused" in done.stderr
    assert not (root / "chexbert/chexbert.pth").exists()
    assert [p for p in root.rglob("*") if p.is_file()] == []  # nothing left, not even in the staging folder
    listed = _cli(hub, tmp_path, "list", "--dir", str(root))
    assert " missing " in _row(listed.stdout, "sembscore", "chexbert")


def test_a_dropped_connection_is_retried_within_the_run(hub: Hub, tmp_path: Path) -> None:
    root = tmp_path / "weights"
    hub.script[(ROBERTA, "model.safetensors")] = ["half"]
    done = _cli(hub, tmp_path, "fetch", "distilroberta-base", "--to", str(root))
    assert done.returncode == 0, done.stderr
    data = hub.repos[ROBERTA].files["model.safetensors"]
    assert (root / "distilroberta-base/model.safetensors").read_bytes() == data
    ranges = [rng for m, p, rng in hub.downloads() if m == "GET" and p.endswith("/model.safetensors")]
    # the first GET was cut; huggingface_hub asked again (from the bytes it had written: a Range, or
    # from the start when the cut came inside its first read) and the result is whole and verified
    assert len(ranges) == 2 and ranges[0] == "" and ranges[1] in ("", f"bytes={len(data) // 2}-")


def test_an_interrupted_download_leaves_nothing_complete_looking_and_a_rerun_ends_verified(hub: Hub, tmp_path: Path) -> None:
    root = tmp_path / "weights"
    hub.script[(RRG, "chexbert.pth")] = ["half", "503"]
    done = _cli(hub, tmp_path, "fetch", "chexbert", "--to", str(root))
    assert done.returncode == 5, done.stderr
    assert "chexbert.pth" in done.stderr and "rerun" in done.stderr
    assert not (root / "chexbert/chexbert.pth").exists()
    assert [p for p in root.rglob("*") if p.is_file()] == []  # no partial file under any name
    rerun = _cli(hub, tmp_path, "fetch", "chexbert", "--to", str(root))
    assert rerun.returncode == 0, rerun.stderr
    assert digest(root / "chexbert/chexbert.pth").sha256 == _sha(hub.repos[RRG].files["chexbert.pth"])
    assert json.loads((root / "chexbert/.cxreval-weights.json").read_text())["complete"] is True


def test_offline_mode_refuses_before_any_request(hub: Hub, tmp_path: Path) -> None:
    done = _cli(hub, tmp_path, "fetch", "chexbert", "--to", str(tmp_path / "w"), HF_HUB_OFFLINE="1")
    assert done.returncode == 2
    assert "HF_HUB_OFFLINE" in done.stderr
    assert hub.log == []


def test_revision_override_pins_another_commit(hub: Hub, tmp_path: Path) -> None:
    other = "1" * 40
    done = _cli(hub, tmp_path, "fetch", "radgraph", "--to", str(tmp_path / "w"), "--revision", f"{RRG}={other}")
    assert done.returncode == 0, done.stderr
    assert ("GET", f"/{RRG}/resolve/{other}/radgraph.tar.gz", "") in hub.log
    assert json.loads((tmp_path / "w/radgraph/.cxreval-weights.json").read_text())["revisions"][RRG] == other


def test_unknown_names_and_missing_settings_are_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    near = runner.invoke(app, ["weights", "fetch", "radgraf", "--to", str(tmp_path)])
    assert near.exit_code == 2 and "did you mean radgraph" in near.output
    unknown = runner.invoke(app, ["weights", "fetch", "zzz", "--to", str(tmp_path)])
    assert unknown.exit_code == 2 and "RaTE-NER-Deberta" in unknown.output and "radcliq-v1" in unknown.output
    nowhere = runner.invoke(app, ["weights", "fetch", "chexbert"], env={"CXREVAL_WEIGHTS": ""})
    assert nowhere.exit_code == 2 and "--to" in nowhere.output and "CXREVAL_WEIGHTS" in nowhere.output
    bare = runner.invoke(app, ["weights", "fetch", "chexbert", "--to", str(tmp_path), "--revision", "1" * 40])
    assert bare.exit_code == 2 and "REPO=" in bare.output
    assert list(tmp_path.iterdir()) == []


def test_list_marks_a_hand_placed_folder_unverified(tmp_path: Path) -> None:
    (tmp_path / "chexbert").mkdir()
    (tmp_path / "chexbert/chexbert.pth").write_bytes(b"x")
    shown = CliRunner().invoke(app, ["weights", "list", "--dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert " unverified " in _row(shown.output, "sembscore", "chexbert")
    assert " missing " in _row(shown.output, "radgraph-f1", "radgraph")


def test_manifest_names_and_hashes() -> None:
    manifest = load_manifest()
    assert [c.folder for c in manifest.checkpoints] == [
        "distilroberta-base",
        "chexbert",
        "radgraph",
        "RaTE-NER-Deberta",
        "BioLORD-2023-C",
    ]
    assert {c.folder for c in select("radcliq-v1")} == {"distilroberta-base", "chexbert", "radgraph"}
    assert [c.folder for c in select("ratescore")] == ["RaTE-NER-Deberta", "BioLORD-2023-C"]
    assert parse_revisions([f"{RRG}=abc"], select("chexbert")) == {RRG: "abc"}
    with pytest.raises(WeightsInputError, match="REPO="):
        parse_revisions(["abc"], select("chexbert"))
    assert parse_revisions(["abc"], select("distilroberta-base")) == {ROBERTA: "abc"}


def test_digest_gives_the_git_blob_id(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    assert digest(path).git_sha1 == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object`
    assert digest(path).sha256 == _sha(b"hello\n")
