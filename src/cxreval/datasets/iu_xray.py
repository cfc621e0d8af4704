"""IU X-ray (Open-i) reports and their manual MeSH codes as a gold standard for extraction.

The data is CC BY-NC-ND 4.0: cxreval never ships it. Point ``data_dir`` (or the environment
variable ``CXREVAL_DATA_DIR``) at a folder holding ``iu-xray/indiana_reports.csv`` and, for the
splits, ``radrestruct-template/{train,val,test}_ids.json``.

Gold standard rules:
- every code is mapped through the ontology's ``mesh`` patterns; codes of one entity in one
  report are merged (two sides make it bilateral, zones are pooled, the most severe bucket wins);
- a report coded ``normal`` expects no abnormal entity;
- ``No Indexing`` reports are left out, and so are reports with neither findings nor impression
  text (nothing to read);
- codes that map to no entity are kept in ``unmapped`` so that nothing is dropped silently;
- a generic heading ("Catheters, Indwelling") accepts any entity of its family
  (``iu_mesh_families.yaml``): the coders' vocabulary is coarser than the ontology there.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from cxreval.ontology import Ontology, load_ontology
from cxreval.ontology.mesh import MeshMapper, is_normal, is_unindexed, normalize_mesh_part, parse_mesh_field

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")


class GoldEntity(BaseModel):
    """One expected entity with the attributes its codes give."""

    model_config = ConfigDict(frozen=True)

    entity: str
    side: str | None = None
    zones: tuple[str, ...] = ()
    severity: str | None = None
    codes: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()
    """Other entities accepted for this one where its MeSH heading is generic (see families)."""


class GoldReport(BaseModel):
    """An IU report, its text as cxreval reads it, and what the coders expected."""

    model_config = ConfigDict(frozen=True)

    uid: str
    split: Split | None
    text: str
    normal: bool
    entities: dict[str, GoldEntity]
    unmapped: tuple[str, ...] = ()


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """``data_dir``, else ``$CXREVAL_DATA_DIR``; raises with a clear message when absent."""
    chosen = data_dir or os.environ.get("CXREVAL_DATA_DIR")
    if not chosen:
        raise FileNotFoundError("no data folder given: pass data_dir or set CXREVAL_DATA_DIR")
    path = Path(chosen)
    if not (path / "iu-xray" / "indiana_reports.csv").is_file():
        raise FileNotFoundError(f"{path}: no iu-xray/indiana_reports.csv under this folder")
    return path


def report_text(findings: str, impression: str) -> str:
    """Findings and impression with section titles the rule engine recognises."""
    parts = []
    if findings.strip():
        parts.append("Findings: " + findings.strip())
    if impression.strip():
        parts.append("Impression: " + impression.strip())
    return " ".join(parts)


def load_splits(data_dir: Path) -> dict[str, Split]:
    """uid -> split from Rad-ReStruct's id lists (uids in no list map to nothing)."""
    out: dict[str, Split] = {}
    folder = data_dir / "radrestruct-template"
    for split in SPLITS:
        path = folder / f"{split}_ids.json"
        if path.is_file():
            for uid in json.loads(path.read_text(encoding="utf-8")):
                out[str(uid)] = split
    return out


def load_families() -> dict[str, tuple[str, ...]]:
    """Generic MeSH heading (normalised) -> the ontology entities it may stand for."""
    ref = resources.files("cxreval.datasets") / "iu_mesh_families.yaml"
    data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    return {normalize_mesh_part(k): tuple(v) for k, v in data["families"].items()}


def _merge(entity: str, matches: Iterable, severity_rank, families: dict[str, tuple[str, ...]]) -> GoldEntity:
    sides: set[str] = set()
    zones: dict[str, None] = {}
    severity: str | None = None
    codes: list[str] = []
    accept: dict[str, None] = {}
    for m in matches:
        for other in families.get(normalize_mesh_part(m.code.heading), ()):
            if other != entity:
                accept.setdefault(other, None)
        sides.update(m.sides)
        for z in m.zones:
            zones.setdefault(z, None)
        if m.severity and (severity is None or severity_rank(m.severity) > severity_rank(severity)):
            severity = m.severity
        codes.append(m.code.raw)
    side = "bilateral" if "bilateral" in sides or {"left", "right"} <= sides else next(iter(sides), None)
    return GoldEntity(
        entity=entity, side=side, zones=tuple(zones), severity=severity, codes=tuple(codes), accept=tuple(accept)
    )


def load_iu_gold(
    data_dir: str | Path | None = None,
    ontology: Ontology | None = None,
    splits: Iterable[Split] | None = None,
) -> list[GoldReport]:
    """The IU X-ray gold standard, optionally restricted to some splits (in file order)."""
    from cxreval.ontology.attributes import attribute_vocabulary

    root = resolve_data_dir(data_dir)
    onto = ontology or load_ontology()
    mapper = MeshMapper(onto)
    split_of = load_splits(root)
    wanted = set(splits) if splits is not None else None
    rank = attribute_vocabulary().severity_rank
    families = load_families()
    unknown = {e for fam in families.values() for e in fam} - set(onto.entity_ids)
    if unknown:
        raise ValueError(f"iu_mesh_families.yaml names entities not in {onto.signature}: {sorted(unknown)}")
    out: list[GoldReport] = []
    with (root / "iu-xray" / "indiana_reports.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            uid = row["uid"].strip()
            split = split_of.get(uid)
            if wanted is not None and split not in wanted:
                continue
            codes = parse_mesh_field(row["MeSH"])
            if any(is_unindexed(c) for c in codes):
                continue
            text = report_text(row.get("findings", ""), row.get("impression", ""))
            if not text:
                continue
            by_entity: dict[str, list] = {}
            unmapped: list[str] = []
            for code in codes:
                if is_normal(code):
                    continue
                match = mapper.map_code(code)
                if match is None:
                    unmapped.append(code.raw)
                else:
                    by_entity.setdefault(match.entity_id, []).append(match)
            out.append(
                GoldReport(
                    uid=uid,
                    split=split,
                    text=text,
                    normal=all(is_normal(c) for c in codes) and bool(codes),
                    entities={e: _merge(e, ms, rank, families) for e, ms in by_entity.items()},
                    unmapped=tuple(unmapped),
                )
            )
    return out
