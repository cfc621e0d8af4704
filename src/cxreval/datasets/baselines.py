"""Built-in IU X-ray systems for benchmarks without images: reports retrieved from the train split.

``cxreval bench`` builds them at run time from the data folder (``baseline:`` systems in the
config; the IU text is never written into the repository). Each study gets one train report:

- ``random-train``: a train report drawn at random (seeded per study);
- ``retrieval-oracle``: a train report whose set of MeSH findings equals the study's own (the
  coders' codes mapped to ontology entities by :func:`cxreval.datasets.iu_xray.load_iu_gold`);
  when none has exactly that set, one with the highest Jaccard similarity of finding sets
  (an exact match has Jaccard 1, so one rule covers both; two empty sets have Jaccard 1); ties
  are broken at random (seeded per study). It is the upper bound of a perfect finding
  classifier writing with train-split templates;
- ``retrieval-oracle`` with ``noise: p``: the same retrieval after label noise: each finding of
  the study is dropped with probability ``p`` and each absent finding ``f`` is added with
  probability ``p * prevalence(f)`` (its share of the pool's reports), so a noisy classifier
  errs on common findings, and about as many findings are added as dropped.

The pool is the Rad-ReStruct train split (the IU split rule of ``../shared/data/README.md``)
minus every study of the benchmark dataset (475 of ReXrank's 590 IU test studies are in that
train split: without the exclusion the oracle would return the study's own report), minus
reports without MeSH indexing or with an empty section. A study without usable MeSH codes
(``No Indexing``, or not in the IU table) has no finding set: every kind returns a random pool
report for it and :class:`BaselineReports` counts it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from cxreval._version import __version__
from cxreval.datasets.iu_xray import (
    GoldReport,
    load_iu_gold,
    read_iu_reports,
    report_text,
    resolve_data_dir,
)
from cxreval.literals import RETRIEVAL_BASELINES, RetrievalBaseline, Section
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores.signature import Signature

Kind = RetrievalBaseline
KINDS: tuple[Kind, ...] = RETRIEVAL_BASELINES
#: Version of the retrieval rules (pool, nearest rule, noise model, seeding); in every signature.
RULES_VERSION = "1"
_CXR_ID = re.compile(r"^CXR(\d+)(?:_|$)", re.IGNORECASE)


def families_version() -> str:
    """The version of ``iu_mesh_families.yaml`` (how MeSH codes become findings), for signatures."""
    ref = resources.files("cxreval.datasets") / "iu_mesh_families.yaml"
    return str(yaml.safe_load(ref.read_text(encoding="utf-8")).get("version", "none"))


def iu_uid(study_id: str) -> str:
    """The IU ``uid`` of a study id: ``CXR3030_IM-1405`` (ReXrank) -> ``3030``; a bare uid stays."""
    m = _CXR_ID.match(study_id.strip())
    return m.group(1) if m else study_id.strip()


def finding_set(report: GoldReport) -> frozenset[str]:
    """The report's MeSH findings as ontology entities (empty for a report coded normal)."""
    return frozenset(report.entities)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 1.0 for two empty sets."""
    union = len(a | b)
    return 1.0 if union == 0 else len(a & b) / union


def study_rng(seed: int, study_id: str, salt: str) -> np.random.Generator:
    """A generator that depends only on (seed, study, salt): results do not depend on study order."""
    digest = hashlib.sha256(f"{salt}\x00{study_id}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


@dataclass(frozen=True)
class Pool:
    """Train-split reports to retrieve from: section texts and finding sets, in file order."""

    uids: tuple[str, ...]
    texts: tuple[str, ...]
    findings: tuple[frozenset[str], ...]

    @property
    def prevalence(self) -> dict[str, float]:
        """Finding -> share of the pool's reports that have it (sorted by finding)."""
        counts = Counter(f for fs in self.findings for f in fs)
        return {f: counts[f] / len(self.findings) for f in sorted(counts)}

    @cached_property
    def _distinct(self) -> tuple[tuple[frozenset[str], ...], np.ndarray, dict[frozenset[str], np.ndarray]]:
        """The distinct finding sets, each report's set as an index into them, and each set's reports."""
        index: dict[frozenset[str], int] = {}
        of_report = np.fromiter(
            (index.setdefault(f, len(index)) for f in self.findings), dtype=np.int64, count=len(self.findings)
        )
        members = {f: np.flatnonzero(of_report == k) for f, k in index.items()}
        return tuple(index), of_report, members

    def nearest(self, findings: frozenset[str], rng: np.random.Generator) -> int:
        """Index of a report with the highest Jaccard similarity to ``findings`` (ties at random,
        among the tied reports in file order). Each distinct finding set is compared once (a few
        hundred, not every report), and a set held exactly (Jaccard 1) is looked up."""
        sets, of_report, members = self._distinct
        best = members.get(findings)
        if best is None:
            scores = np.fromiter((jaccard(findings, f) for f in sets), dtype=float, count=len(sets))
            best = np.flatnonzero(np.isin(of_report, np.flatnonzero(scores == scores.max())))
        return int(best[rng.integers(len(best))])


def noisy_findings(findings: frozenset[str], prevalence: dict[str, float], p: float, rng: np.random.Generator) -> frozenset[str]:
    """Drop each finding with probability ``p``; add each absent finding ``f`` with ``p * prevalence[f]``."""
    if p == 0:
        return findings
    vocab = sorted(set(prevalence) | findings)
    draws = rng.random(len(vocab))
    out = set()
    for f, u in zip(vocab, draws):
        if f in findings:
            if u >= p:
                out.add(f)
        elif u < p * prevalence.get(f, 0.0):
            out.add(f)
    return frozenset(out)


def _section_text(findings: str, impression: str, section: Section) -> str:
    if section == "findings":
        return findings.strip()
    if section == "impression":
        return impression.strip()
    return report_text(findings, impression)


def load_pool(
    data_dir: Path,
    section: Section,
    exclude: Iterable[str],
    gold: Sequence[GoldReport],
    raw: dict[str, tuple[str, str]] | None = None,
) -> Pool:
    """The train-split pool (see module doc); ``exclude`` holds IU uids (the benchmark's studies);
    ``raw``: each uid's (findings, impression), when already read."""
    skip = set(exclude)
    raw = raw if raw is not None else {uid: (f, i) for uid, _, f, i in read_iu_reports(data_dir)}
    uids, texts, sets = [], [], []
    for r in gold:
        if r.split != "train" or r.uid in skip:
            continue
        text = _section_text(*raw[r.uid], section)
        if text:
            uids.append(r.uid)
            texts.append(text)
            sets.append(finding_set(r))
    if not uids:
        raise ValueError(f"{data_dir}: no train-split IU report with a {section} section to retrieve from")
    return Pool(tuple(uids), tuple(texts), tuple(sets))


@dataclass
class RetrievalData:
    """What every retrieval baseline of one run reads, read once: each IU X-ray report's
    sections, the gold (MeSH codes as findings; parsed when a baseline is first built, not for a
    stored one) and the pools built from them (by section and studies left out)."""

    root: Path
    ontology: Ontology
    raw: dict[str, tuple[str, str]]
    _pools: dict[tuple[Section, frozenset[str]], Pool] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: str | Path | None = None, ontology: Ontology | None = None) -> RetrievalData:
        root = resolve_data_dir(data_dir)
        return cls(root, ontology or load_ontology(), {uid: (f, i) for uid, _, f, i in read_iu_reports(root)})

    @cached_property
    def gold(self) -> list[GoldReport]:
        return load_iu_gold(self.root, self.ontology)

    def pool(self, section: Section, exclude: Iterable[str]) -> Pool:
        """The pool of ``section`` without the studies ``exclude`` (IU uids), built once."""
        key = (section, frozenset(exclude))
        if key not in self._pools:
            self._pools[key] = load_pool(self.root, section, key[1], self.gold, self.raw)
        return self._pools[key]

    @cached_property
    def digest(self) -> str:
        """SHA-256 of every file the baselines read (reports, splits) and of the finding mapping:
        with the rule's settings, the key of a stored baseline (:func:`baseline_key`)."""
        h = hashlib.sha256()
        files = [self.root / "iu-xray" / "indiana_reports.csv", *sorted((self.root / "radrestruct-template").glob("*_ids.json"))]
        for path in files:
            data = path.read_bytes()
            h.update(f"{path.name}\x00{len(data)}\x00".encode())
            h.update(data)
        h.update(f"{self.ontology.signature}\x00{families_version()}\x00{RULES_VERSION}\x00{__version__}".encode())
        # how MeSH codes become findings: the ontology's own mappings, not only its name and version
        h.update(json.dumps([(e.id, e.mappings.get("mesh", [])) for e in self.ontology.entities]).encode())
        return h.hexdigest()

    def section_text(self, uid: str, section: Section) -> str:
        """The ``section`` of IU report ``uid`` as a pool report gives it."""
        return _section_text(*self.raw[uid], section)


def baseline_key(kind: Kind, study_ids: Sequence[str], *, seed: int, noise: float, section: Section, data: RetrievalData) -> str:
    """The key a baseline's choice is stored under: its rule, settings, studies and input files."""
    payload = json.dumps([kind, seed, repr(float(noise)), section, list(study_ids), data.digest], separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class BaselineReports:
    """One baseline's report per study, how each was chosen, and the signature of the rule."""

    texts: list[str]
    source_uids: list[str]  # the pool report chosen per study
    exact: int  # studies given a report with exactly their (possibly noisy) finding set
    nearest: int  # studies given a report by the nearest (max Jaccard) rule
    uncoded: int  # studies without usable MeSH codes (random pool report)
    signature: Signature

    def to_json(self) -> str:
        """What :meth:`from_json` rebuilds it from: the chosen uids, the counts and the signature
        (never report text: the texts are read again from the data folder)."""
        return json.dumps(
            {
                "source_uids": self.source_uids,
                "exact": self.exact,
                "nearest": self.nearest,
                "uncoded": self.uncoded,
                "signature": str(self.signature),
            }
        )

    @classmethod
    def from_json(cls, stored: str, data: RetrievalData, section: Section) -> BaselineReports:
        got = json.loads(stored)
        uids = list(got["source_uids"])
        return cls(
            [data.section_text(u, section) for u in uids],
            uids,
            int(got["exact"]),
            int(got["nearest"]),
            int(got["uncoded"]),
            Signature.parse(got["signature"]),
        )

    def note(self, system: str, dataset: str) -> str:
        """One line for the benchmark's notes."""
        n = len(self.texts)
        how = (
            f"{self.exact} exact finding-set matches, {self.nearest} nearest (max Jaccard)"
            if self.exact or self.nearest
            else "random train reports"
        )
        return (
            f"{system} on {dataset}: {n} train-split reports ({how}; {self.uncoded} studies without MeSH "
            f"codes got a random one); {self.signature}"
        )


def baseline_reports(
    kind: Kind,
    study_ids: Sequence[str],
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    noise: float = 0.0,
    section: Section = "findings",
    ontology: Ontology | None = None,
    data: RetrievalData | None = None,
) -> BaselineReports:
    """Build baseline ``kind``'s report for every study of ``study_ids`` (ReXrank ids or IU uids).
    ``data``: the IU gold and reports already read (a run with several baselines reads them once)."""
    if kind not in KINDS:
        raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(KINDS)}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be a probability in [0, 1], got {noise}")
    if noise and kind != "retrieval-oracle":
        raise ValueError(f"noise applies to retrieval-oracle only, not {kind!r}")
    data = data if data is not None else RetrievalData.load(data_dir, ontology)
    onto = data.ontology
    by_uid = {r.uid: r for r in data.gold}
    uids = [iu_uid(s) for s in study_ids]
    pool = data.pool(section, uids)
    prevalence = pool.prevalence
    known_sets = set(pool.findings)
    texts, chosen = [], []
    exact = nearest = uncoded = 0
    for sid, uid in zip(study_ids, uids):
        rng = study_rng(seed, sid, f"{kind}:{noise:g}")
        report = by_uid.get(uid)
        if kind == "random-train" or report is None:
            i = int(rng.integers(len(pool.texts)))
            uncoded += report is None
        else:
            wanted = noisy_findings(finding_set(report), prevalence, noise, rng)
            i = pool.nearest(wanted, rng)
            if wanted in known_sets:
                exact += 1
            else:
                nearest += 1
        texts.append(pool.texts[i])
        chosen.append(pool.uids[i])
    sig = Signature(
        metric=f"baseline:{kind}",
        ontology=onto.signature,
        engine=f"iu-train-retrieval-v{RULES_VERSION}",
        options={
            "seed": str(seed),
            "noise": f"{noise:g}",
            "section": section,
            "pool": str(len(pool.texts)),
            "mesh_families": families_version(),
        },
    )
    return BaselineReports(texts, chosen, exact, nearest, uncoded, sig)


__all__ = [
    "KINDS",
    "BaselineReports",
    "Kind",
    "Pool",
    "RetrievalData",
    "baseline_key",
    "baseline_reports",
    "finding_set",
    "iu_uid",
    "jaccard",
    "load_pool",
    "noisy_findings",
    "study_rng",
]
