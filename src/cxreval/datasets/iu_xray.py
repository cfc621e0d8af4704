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
  (``iu_mesh_families.yaml``): the coders' vocabulary is coarser than the ontology there;
- a descriptive heading that repeats the qualifiers of a more specific code in the same report
  names that code's finding (``same_finding`` in ``iu_mesh_families.yaml``): "Nodule/lung/base/right"
  beside "Calcinosis/lung/base/right" is one calcified nodule, not a nodule and a calcification.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from cxreval.io import (
    InputError,
    InputProblem,
    Uniqueness,
    check_columns,
    load_table,
    raise_problems,
    read_json_value,
    record_id,
    require_records,
    text_value,
)
from cxreval.ontology import Ontology, load_ontology
from cxreval.ontology.mesh import MeshCode, MeshMapper, MeshMatch, is_normal, is_unindexed, normalize_mesh_part, parse_mesh_field

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


#: The columns of ``indiana_reports.csv`` the gold standard reads (findings and impression may be absent).
REPORT_COLUMNS = ("uid", "MeSH", "findings", "impression")


def read_iu_reports(data_dir: Path) -> list[tuple[str, str, str, str]]:
    """(uid, MeSH, findings, impression) of every row of ``iu-xray/indiana_reports.csv``, in file order.

    ``uid`` must be unique and ``MeSH`` non-empty (IU codes a report with nothing to code as
    ``normal`` or ``No Indexing``); findings and impression may be empty, or absent as columns.
    Raises :class:`~cxreval.io.InputError` listing every problem (file, line, field).
    """
    uid_col, mesh_col, *texts = REPORT_COLUMNS
    table = load_table(data_dir / "iu-xray" / "indiana_reports.csv", "csv", REPORT_COLUMNS, keyed_ok=False)
    present = check_columns(table, [uid_col, mesh_col]) | (set(texts) & set(table.columns))
    unique = Uniqueness(table, "uid")
    out = []
    for rec in table.records:
        uid = rec.ident = record_id(table, rec, uid_col, present)
        mesh = text_value(table, rec, mesh_col, present, what="MeSH field")
        findings, impression = (text_value(table, rec, c, present, empty_ok=True) if c in present else "" for c in texts)
        if (
            uid is not None
            and unique.is_new(uid, rec, uid_col)
            and mesh is not None
            and findings is not None
            and impression is not None
        ):
            out.append((uid, mesh, findings, impression))
    require_records(table)
    raise_problems(table)
    return out


def load_splits(data_dir: Path) -> dict[str, Split]:
    """uid -> split from Rad-ReStruct's id lists (uids in no list map to nothing).

    Each list must be a JSON array of ids (text or integers); an id given twice, in one list
    or in two, is a problem. Raises :class:`~cxreval.io.InputError` listing every problem.
    """
    out: dict[str, Split] = {}
    first: dict[str, tuple[str, int]] = {}  # uid -> (file, item) where it was first listed
    problems: list[InputProblem] = []
    folder = data_dir / "radrestruct-template"
    for split in SPLITS:
        path = folder / f"{split}_ids.json"
        if not path.is_file():
            continue
        file = str(path)
        doc = read_json_value(path)
        if not isinstance(doc, list):
            problems.append(InputProblem(file=file, unit="item", message="expected a JSON array of ids"))
            continue
        for item, raw in enumerate(doc, start=1):
            uid = str(raw).strip() if isinstance(raw, str | int) and not isinstance(raw, bool) else None
            if not uid:
                problems.append(InputProblem(file=file, row=item, unit="item", message=f"not an id: {raw!r}"))
            elif uid in first:
                where, at = first[uid]
                problems.append(
                    InputProblem(
                        file=file, row=item, unit="item", id=uid, message=f"id listed twice (first in {where}, item {at})"
                    )
                )
            else:
                first[uid] = (file, item)
                out[uid] = split
    if problems:
        raise InputError(problems)
    return out


def load_families() -> dict[str, tuple[str, ...]]:
    """Generic MeSH heading (normalised) -> the ontology entities it may stand for."""
    ref = resources.files("cxreval.datasets") / "iu_mesh_families.yaml"
    data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    return {normalize_mesh_part(k): tuple(v) for k, v in data["families"].items()}


def load_same_finding() -> dict[str, tuple[str, ...]]:
    """Descriptive MeSH heading (normalised) -> the more specific headings it may repeat, first preferred."""
    ref = resources.files("cxreval.datasets") / "iu_mesh_families.yaml"
    data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    return {normalize_mesh_part(k): tuple(normalize_mesh_part(h) for h in v) for k, v in (data.get("same_finding") or {}).items()}


def _qualifier_key(code: MeshCode) -> tuple[str, ...]:
    return tuple(sorted(normalize_mesh_part(q) for q in code.qualifiers))


def join_same_findings(matches: list[MeshMatch], same_finding: dict[str, tuple[str, ...]]) -> list[MeshMatch]:
    """``matches`` with each descriptive code that repeats a more specific code's qualifiers moved
    to that code's entity (its attributes stay: they are the same qualifiers).

    The coders code one finding's appearance and nature as two codes ("Nodule/lung/base/right" and
    "Calcinosis/lung/base/right" for a calcified nodule); without this the gold standard would hold
    a non-calcified nodule the report never states. Codes without qualifiers are never paired.
    """
    by_key: dict[tuple[str, tuple[str, ...]], MeshMatch] = {}
    for m in matches:
        if m.code.qualifiers:
            by_key.setdefault((normalize_mesh_part(m.code.heading), _qualifier_key(m.code)), m)
    out: list[MeshMatch] = []
    for m in matches:
        heading = normalize_mesh_part(m.code.heading)
        target = None
        if m.code.qualifiers:
            quals = _qualifier_key(m.code)
            target = next((by_key[(h, quals)] for h in same_finding.get(heading, ()) if (h, quals) in by_key), None)
        if target is not None and target.entity_id != m.entity_id:
            m = m.model_copy(update={"entity_id": target.entity_id, "joined": True})
        out.append(m)
    return out


def _merge(entity: str, matches: Iterable, severity_rank, families: dict[str, tuple[str, ...]]) -> GoldEntity:
    sides: set[str] = set()
    zones: dict[str, None] = {}
    severity: str | None = None
    codes: list[str] = []
    accept: dict[str, None] = {}
    for m in matches:
        # A code joined to a more specific one's entity lends it no family of its own heading.
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
    return GoldEntity(entity=entity, side=side, zones=tuple(zones), severity=severity, codes=tuple(codes), accept=tuple(accept))


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
    same_finding = load_same_finding()
    unknown = {e for fam in families.values() for e in fam} - set(onto.entity_ids)
    if unknown:
        raise ValueError(f"iu_mesh_families.yaml names entities not in {onto.signature}: {sorted(unknown)}")
    out: list[GoldReport] = []
    for uid, mesh, findings, impression in read_iu_reports(root):
        split = split_of.get(uid)
        if wanted is not None and split not in wanted:
            continue
        codes = parse_mesh_field(mesh)
        if any(is_unindexed(c) for c in codes):
            continue
        text = report_text(findings, impression)
        if not text:
            continue
        by_entity: dict[str, list] = {}
        unmapped: list[str] = []
        matched: list[MeshMatch] = []
        for code in codes:
            if is_normal(code):
                continue
            match = mapper.map_code(code)
            if match is None:
                unmapped.append(code.raw)
            else:
                matched.append(match)
        for match in join_same_findings(matched, same_finding):
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
