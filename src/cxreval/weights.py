"""The weight-based metrics' checkpoints: what each needs, what a folder holds, and the one fetch.

cxreval never downloads on its own: the metrics read folders the user supplies
(``$CXREVAL_WEIGHTS/<folder>``). ``cxreval weights fetch`` is the one exception, run on purpose:
it downloads the files the packaged manifest (``weights.yaml``) names, through huggingface_hub,
at one commit per repository, checks every file against the hash the hub reports for that commit
(sha256 for LFS files, the git blob sha1 otherwise), and records what it placed in the folder's
lock file (``.cxreval-weights.json``). ``cxreval weights list`` reads the lock files.

huggingface_hub is imported only inside :func:`fetch_checkpoint` (``pip install 'cxreval[weights]'``).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import shutil
import tarfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxreval.yaml_files import safe_load

#: The lock file fetch writes in each folder it fills.
LOCK_NAME = ".cxreval-weights.json"
#: Where downloads land before they are verified (under the target folder; removed after each fetch).
STAGING_NAME = ".cxreval-download"
#: The environment variable naming the folder of checkpoints (as cxreval.metrics.bertscore.WEIGHTS_ENV).
WEIGHTS_ENV = "CXREVAL_WEIGHTS"
DEFAULT_ENDPOINT = "https://huggingface.co"
COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_TRUE = {"1", "ON", "YES", "TRUE"}


class WeightsInputError(ValueError):
    """A name, folder or option the command cannot use (exit code 2)."""


class FetchError(RuntimeError):
    """A download that failed or was refused (a hash mismatch, the hub unreachable, a file missing
    at the commit). Nothing unverified is left under its final name."""


# ------------------------------------------------------------------------------------------
# The manifest
# ------------------------------------------------------------------------------------------


class FileSpec(BaseModel):
    """One file of a source: the first of ``any_of`` the commit holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    any_of: tuple[str, ...] = Field(min_length=1)
    optional: bool = False
    unpack: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"any_of": [value]} if isinstance(value, str) else value


class Source(BaseModel):
    """One hub repository at one revision, and the files taken from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str | None = None
    repo_from: str | None = None
    repo_type: Literal["model", "dataset"] = "model"
    revision: str | None = None
    into: str = ""
    files: tuple[FileSpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_repo(self) -> Source:
        if (self.repo is None) == (self.repo_from is None):
            raise ValueError("a source names exactly one of repo and repo_from")
        if self.revision is not None and not COMMIT.fullmatch(self.revision):
            raise ValueError(f"revision {self.revision!r} is not a 40-hex commit")
        return self


class Checkpoint(BaseModel):
    """A folder the metrics read, the metrics that read it, and where its files come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str
    metrics: tuple[str, ...]
    licence: str
    sources: tuple[Source, ...] = Field(min_length=1)


class Manifest(BaseModel):
    """The packaged list of checkpoints (``cxreval/weights.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1]
    checkpoints: tuple[Checkpoint, ...]

    def folder(self, name: str) -> Checkpoint:
        """The checkpoint of folder ``name``."""
        return next(c for c in self.checkpoints if c.folder == name)

    def metrics(self) -> list[str]:
        """Every metric that needs a checkpoint: each folder's first metric, then the others."""
        firsts = [c.metrics[0] for c in self.checkpoints if c.metrics]
        return list(dict.fromkeys([*firsts, *(m for c in self.checkpoints for m in c.metrics)]))


@functools.cache
def load_manifest() -> Manifest:
    """The packaged manifest, validated."""
    text = resources.files("cxreval").joinpath("weights.yaml").read_text(encoding="utf-8")
    return Manifest.model_validate(safe_load(text))


def select(name: str) -> list[Checkpoint]:
    """The checkpoints NAME stands for: a folder, a metric (every folder it needs) or ``all``."""
    manifest = load_manifest()
    if name == "all":
        return list(manifest.checkpoints)
    folders = {c.folder: c for c in manifest.checkpoints}
    if name in folders:
        return [folders[name]]
    needed = [c for c in manifest.checkpoints if name in c.metrics]
    if needed:
        return needed
    names = ["all", *folders, *manifest.metrics()]
    near = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    raise WeightsInputError(f"no checkpoint or metric {name!r}; {hint}the names are {', '.join(names)}")


# ------------------------------------------------------------------------------------------
# Settings: target folder, endpoint, offline mode, revision overrides
# ------------------------------------------------------------------------------------------


def weights_root(given: Path | None, option: str) -> Path:
    """The folder of checkpoints: ``given``, else ``$CXREVAL_WEIGHTS``; refused when neither is set."""
    if given is not None:
        return given.expanduser()
    env = os.environ.get(WEIGHTS_ENV)
    if not env:
        raise WeightsInputError(
            f"no folder for the checkpoints: pass {option} DIR or set {WEIGHTS_ENV} (the metrics read {WEIGHTS_ENV}/<folder>)"
        )
    return Path(env).expanduser()


def offline_setting() -> str | None:
    """The variable that puts the hub offline (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``), if one does."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in _TRUE:
            return var
    return None


def hub_endpoint() -> str:
    """``$HF_ENDPOINT`` (read now, not at huggingface_hub's import), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def parse_revisions(values: Sequence[str], checkpoints: Sequence[Checkpoint]) -> dict[str, str]:
    """``--revision`` values as ``{repo: revision}``: ``REPO=REV``, or a bare REV when the
    checkpoints draw on one repository only."""
    repos = list(dict.fromkeys(s.repo or s.repo_from or "" for c in checkpoints for s in c.sources))
    out: dict[str, str] = {}
    for value in values:
        repo, sep, rev = value.rpartition("=")
        if not sep:
            if len(repos) != 1:
                raise WeightsInputError(
                    f"--revision {value}: these checkpoints come from {', '.join(repos)}; write --revision REPO={value}"
                )
            repo = repos[0]
        if not rev.strip():
            raise WeightsInputError(f"--revision {value!r} names no revision")
        out[repo] = rev.strip()
    return out


# ------------------------------------------------------------------------------------------
# Hashes and the lock file
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Digest:
    """A file's sha256, its git blob sha1 (what the hub reports for a non-LFS file) and size."""

    sha256: str
    git_sha1: str
    size: int

    def of(self, kind: str) -> str:
        """The hash of the kind the hub reports (:func:`_expected`): ``sha256`` or ``git-sha1``."""
        return self.sha256 if kind == "sha256" else self.git_sha1


def digest(path: Path) -> Digest:
    """Both hashes of ``path`` in one read."""
    size = path.stat().st_size
    sha256, sha1 = hashlib.sha256(), hashlib.sha1(f"blob {size}\0".encode())
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha256.update(block)
            sha1.update(block)
    return Digest(sha256.hexdigest(), sha1.hexdigest(), size)


class LockedFile(BaseModel):
    """A file fetch placed: its hash and size, and the hub file (and hash) it came from."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    size: int
    repo: str
    revision: str
    hub_file: str
    hub_hash: str


class Lock(BaseModel):
    """A folder's ``.cxreval-weights.json``: the commit of each repo and every file placed."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1
    folder: str
    complete: bool = False
    revisions: dict[str, str] = {}
    files: dict[str, LockedFile] = {}


def read_lock(folder: Path) -> Lock | None:
    """The folder's lock file; None when there is none. A lock that cannot be read is refused."""
    path = folder / LOCK_NAME
    if not path.is_file():
        return None
    try:
        return Lock.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise WeightsInputError(f"{path} cannot be read ({exc}); delete it and fetch again") from exc


def write_lock(folder: Path, lock: Lock) -> None:
    """Write the lock file whole (a temporary file renamed over it)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{LOCK_NAME}.tmp"
    tmp.write_text(json.dumps(lock.model_dump(mode="json"), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / LOCK_NAME)


# ------------------------------------------------------------------------------------------
# What a folder holds (`cxreval weights list`)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FolderStatus:
    """One folder: ``present`` (fetched, every locked file there), ``missing`` or ``unverified``."""

    folder: str
    state: Literal["present", "missing", "unverified"]
    revisions: dict[str, str]
    detail: str


def _changed(folder: Path, lock: Lock, rehash: bool) -> list[str]:
    """The locked files that are absent, or whose size (with ``rehash``: sha256) differs."""
    bad = []
    for rel, entry in lock.files.items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != entry.size:
            bad.append(rel)
        elif rehash and digest(path).sha256 != entry.sha256:
            bad.append(rel)
    return bad


def folder_status(root: Path, checkpoint: Checkpoint, rehash: bool = False) -> FolderStatus:
    """What ``root/<folder>`` holds, from its lock file (sizes; with ``rehash`` also sha256)."""
    folder = root / checkpoint.folder
    name = checkpoint.folder
    if not folder.is_dir() or not any(folder.iterdir()):
        return FolderStatus(name, "missing", {}, f"cxreval weights fetch {name}")
    try:
        lock = read_lock(folder)
    except WeightsInputError as exc:
        return FolderStatus(name, "unverified", {}, str(exc))
    if lock is None:
        return FolderStatus(name, "unverified", {}, f"no {LOCK_NAME}: not placed by `cxreval weights fetch`")
    bad = _changed(folder, lock, rehash)
    if bad:
        return FolderStatus(name, "unverified", lock.revisions, f"changed or missing: {', '.join(bad[:3])}")
    if not lock.complete:
        return FolderStatus(name, "unverified", lock.revisions, f"fetch did not finish: cxreval weights fetch {name}")
    how = "sha256 checked" if rehash else "sizes checked"
    return FolderStatus(name, "present", lock.revisions, f"{len(lock.files)} files, {how}")


# ------------------------------------------------------------------------------------------
# The fetch
# ------------------------------------------------------------------------------------------


@dataclass
class FetchReport:
    """What one checkpoint's fetch did."""

    folder: Path
    revisions: dict[str, str] = field(default_factory=dict)
    downloaded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


@dataclass
class _Job:
    """One checkpoint's fetch in progress: where, the hub, the lock, the log."""

    checkpoint: Checkpoint
    root: Path
    endpoint: str
    lock: Lock
    say: Callable[[str], None]
    report: FetchReport

    @property
    def folder(self) -> Path:
        return self.root / self.checkpoint.folder

    @property
    def staging(self) -> Path:
        return self.root / STAGING_NAME / self.checkpoint.folder


def _hub(what: str, call: Callable[[], Any]) -> Any:
    """Run one huggingface_hub call; any failure becomes a FetchError naming ``what``."""
    try:
        return call()
    except FetchError:
        raise
    except Exception as exc:  # the network library's errors vary by version: each one is a failed fetch
        text = str(exc).strip().splitlines()
        raise FetchError(f"{what}: {type(exc).__name__}: {text[0] if text else ''}") from exc


def _repo_from(folder: Path, spec: str) -> str:
    """The repo id at ``<file>:<dotted.key>`` of a file already in the folder."""
    name, _, dotted = spec.partition(":")
    try:
        value: Any = json.loads((folder / name).read_text(encoding="utf-8"))
        for key in dotted.split("."):
            value = value[key]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FetchError(f"{folder / name} does not name a repository at {dotted} ({exc})") from exc
    if not isinstance(value, str) or not _REPO_ID.fullmatch(value):
        raise FetchError(f"{folder / name}: {dotted} = {value!r} is not a hub repository id")
    return value


def _revision(job: _Job, source: Source, repo: str, overrides: dict[str, str]) -> str | None:
    """``--revision``, else the manifest's commit, else the commit in the lock file, else None."""
    key = source.repo or source.repo_from or repo
    return overrides.get(key) or overrides.get(repo) or source.revision or job.lock.revisions.get(repo)


def _repo_info(job: _Job, source: Source, repo: str, revision: str | None) -> Any:
    """The hub's description of ``repo`` at ``revision`` (default branch when None), with every
    file's size and hash; its commit must be ``revision`` when that is a commit."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=job.endpoint)
    info = _hub(
        f"{repo}@{revision or 'main'}",
        lambda: api.repo_info(repo, repo_type=source.repo_type, revision=revision, files_metadata=True),
    )
    commit = str(info.sha or "")
    if not COMMIT.fullmatch(commit):
        raise FetchError(f"{repo}@{revision or 'main'}: the hub reported no commit")
    if revision is not None and COMMIT.fullmatch(revision) and commit != revision:
        raise FetchError(f"{repo}: asked for commit {revision}, the hub answered for {commit}")
    if revision is None or not COMMIT.fullmatch(revision):
        job.say(f"{repo}: {revision or 'the default branch'} is commit {commit}; pinned in {job.folder / LOCK_NAME}")
    return info


def _pick(spec: FileSpec, siblings: dict[str, Any], repo: str, commit: str) -> str | None:
    """The first of the spec's names the commit holds; None for an optional file it lacks."""
    for name in spec.any_of:
        if name in siblings:
            return name
    if spec.optional:
        return None
    raise FetchError(f"{repo}@{commit[:12]} has none of {', '.join(spec.any_of)}")


def _expected(sibling: Any, repo: str, commit: str) -> tuple[str, str]:
    """The hash the hub reports for a file: ``("sha256", hex)`` for LFS, ``("git-sha1", hex)`` otherwise."""
    lfs = getattr(sibling, "lfs", None)
    if lfs is not None:
        sha = lfs["sha256"] if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
        if sha:
            return "sha256", str(sha)
    if getattr(sibling, "blob_id", None):
        return "git-sha1", str(sibling.blob_id)
    raise FetchError(f"{repo}@{commit[:12]}: the hub reports no hash for {sibling.rfilename}")


def _record(job: _Job, rel: str, d: Digest, repo: str, commit: str, hub_file: str, hub_hash: str) -> None:
    job.lock.files[rel] = LockedFile(
        sha256=d.sha256, size=d.size, repo=repo, revision=commit, hub_file=hub_file, hub_hash=hub_hash
    )
    write_lock(job.folder, job.lock)


def _download(job: _Job, source: Source, repo: str, commit: str, name: str, kind: str, expected: str) -> tuple[Path, Digest]:
    """Download one file into the staging folder and verify it (its path and hashes); a mismatch
    deletes it and refuses."""
    from huggingface_hub import hf_hub_download

    job.staging.mkdir(parents=True, exist_ok=True)
    path = Path(
        _hub(
            f"{repo}@{commit[:12]} {name}",
            lambda: hf_hub_download(
                repo,
                name,
                repo_type=source.repo_type,
                revision=commit,
                local_dir=job.staging,
                endpoint=job.endpoint,
            ),
        )
    )
    actual = digest(path)
    got = actual.of(kind)
    if got != expected:
        path.unlink(missing_ok=True)
        raise FetchError(
            f"{repo}@{commit[:12]} {name}: the hub reports {kind} {expected}, the downloaded file has "
            f"{kind} {got}; the file was refused and deleted"
        )
    job.report.downloaded.append(name)
    return path, actual


def _fetch_file(job: _Job, source: Source, repo: str, commit: str, sibling: Any) -> None:
    """One plain file: kept when the folder already holds it with the hub's hash, else downloaded."""
    name = sibling.rfilename
    kind, expected = _expected(sibling, repo, commit)
    rel = f"{source.into}/{name}" if source.into else name
    dest = job.folder / rel
    if dest.is_file():
        have = digest(dest)
        if have.of(kind) == expected:
            job.report.kept.append(rel)
            _record(job, rel, have, repo, commit, name, expected)
            return
    staged, got = _download(job, source, repo, commit, name, kind, expected)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, dest)  # the same bytes, already hashed
    _record(job, rel, got, repo, commit, name, expected)


def _unpacked_intact(job: _Job, repo: str, name: str, expected: str) -> bool:
    """Whether the files an archive left (per the lock) are all there with their sha256."""
    entries = {rel: e for rel, e in job.lock.files.items() if e.repo == repo and e.hub_file == name}
    if not entries or any(e.hub_hash != expected for e in entries.values()):
        return False
    return all((job.folder / rel).is_file() and digest(job.folder / rel).sha256 == e.sha256 for rel, e in entries.items())


def _unpack(job: _Job, archive: Path, repo: str, commit: str, name: str, expected: str) -> None:
    """Unpack a verified .tar.gz into the folder (tarfile's ``data`` filter: no links out, no
    absolute paths), record each file, then remove the archive."""
    out = job.staging / "unpacked"
    shutil.rmtree(out, ignore_errors=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(out, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise FetchError(f"{repo}@{commit[:12]} {name} cannot be unpacked: {exc}") from exc
    for old in [rel for rel, e in job.lock.files.items() if e.repo == repo and e.hub_file == name]:
        del job.lock.files[old]
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        dest = job.folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
        _record(job, rel, digest(dest), repo, commit, name, expected)
    archive.unlink(missing_ok=True)


def _fetch_archive(job: _Job, source: Source, repo: str, commit: str, sibling: Any) -> None:
    """An archive: kept when the files it left are intact, else downloaded, verified and unpacked."""
    name = sibling.rfilename
    kind, expected = _expected(sibling, repo, commit)
    if _unpacked_intact(job, repo, name, expected):
        job.report.kept.append(name)
        return
    staged, _ = _download(job, source, repo, commit, name, kind, expected)
    _unpack(job, staged, repo, commit, name, expected)


def _fetch_source(job: _Job, source: Source, overrides: dict[str, str]) -> None:
    """Every file of one source, at one commit."""
    repo = source.repo or _repo_from(job.folder, source.repo_from or "")
    info = _repo_info(job, source, repo, _revision(job, source, repo, overrides))
    commit = str(info.sha)
    siblings = {s.rfilename: s for s in info.siblings or []}
    for spec in source.files:
        name = _pick(spec, siblings, repo, commit)
        if name is None:
            continue
        if spec.unpack:
            _fetch_archive(job, source, repo, commit, siblings[name])
        else:
            _fetch_file(job, source, repo, commit, siblings[name])
    job.lock.revisions[repo] = commit
    job.report.revisions[repo] = commit
    write_lock(job.folder, job.lock)


def fetch_checkpoint(
    checkpoint: Checkpoint,
    root: Path,
    overrides: dict[str, str] | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> FetchReport:
    """Download ``checkpoint`` into ``root/<folder>``: each source at its commit, every file
    checked against the hub's hash, the lock file written as files land. Files already there with
    the hub's hash are not downloaded again. Raises FetchError (nothing unverified is kept)."""
    if offline_setting() is not None:
        raise WeightsInputError(f"{offline_setting()} is set: the hub is offline; unset it to fetch")
    folder = root / checkpoint.folder
    lock = read_lock(folder) or Lock(folder=checkpoint.folder)
    lock.complete = False
    job = _Job(checkpoint, root, hub_endpoint(), lock, say, FetchReport(folder))
    try:
        for source in checkpoint.sources:
            _fetch_source(job, source, overrides or {})
        lock.complete = True
        write_lock(folder, lock)
    finally:
        shutil.rmtree(job.staging, ignore_errors=True)
        _remove_if_empty(root / STAGING_NAME)
    return job.report


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def needs(metric_names: Iterable[str] | None = None) -> list[tuple[str, Checkpoint]]:
    """``(metric, checkpoint)`` for every metric (or those named), in manifest order."""
    manifest = load_manifest()
    names = list(metric_names) if metric_names is not None else manifest.metrics()
    return [(m, c) for m in names for c in manifest.checkpoints if m in c.metrics]
