"""Reference reports in the layouts public chest X-ray datasets ship, read without conversion.

Every layout becomes one table keyed by study id whose fields are named as in ReXrank's JSON:
``section_findings``, ``section_impression`` and ``report`` (``"Findings: F Impression: I"``,
ReXrank's composition, a part the study lacks left out), plus the layout's other fields. So
``section=`` (``--section``) and ``text_col`` pick the text exactly as they do for a ReXrank file,
and every check of :mod:`cxreval.io.pairs` applies. A study without the text asked for is not an
error: a dataset is a pool to look references up in (:func:`cxreval.io.read_pair_files`).

Layouts (:data:`cxreval.literals.DATASET_LAYOUTS`), each with its own dataset's section rules:

``mimic-cxr``
    The report tree of MIMIC-CXR (``files/p10/p10000032/s50414267.txt``; give ``files/`` or any
    folder under it). Sectioned by :func:`mimic_sections`, a re-implementation of the official
    section parser (MIT-LCP ``txt/section_parser.py`` and ``txt/create_section_files.py``, read
    at commits 58b29874e4599d291848779e58aa93e0047d1007 and 18cdc41ca483f98659a8e649081f17c10558c3c3
    of the ``txt/`` folder as mirrored in MIT-LCP/mimic-code). Study id: the file name's stem
    (``s50414267``, the official ``study`` column); field ``subject`` is the patient folder.
``mimic-cxr-sectioned``
    ``mimic_cxr_sectioned.csv`` as ``create_section_files.py`` writes it: ``study, impression,
    findings, last_paragraph, comparison`` (an empty cell: the section is absent).
``chexpert-plus``
    ``df_chexpert_plus_240401.csv``: one row per image, sections in ``section_findings`` and
    ``section_impression`` (the release's own sectioning). Study id: the study folder of
    ``path_to_image`` (``train/patient00001/study1``); the rows of one study must carry the same
    sections.
``rexgradient``
    ReXGradient-160K's ``metadata/{train,valid,test}_metadata.csv`` (or JSON): sections in
    ``Findings`` and ``Impression`` as released (the dataset ships them split; it has no section
    parser). Study id: column ``id``, else ``StudyInstanceUid``; a JSON object keyed by study is
    keyed by its keys.
``rexrank``
    ReXrank's JSON for any of its datasets (IU X-ray, MIMIC-CXR, CheXpert Plus, ReXGradient):
    an object keyed by study id with ``section_findings``, ``section_impression`` and ``report``
    (``reports`` in some files; read as ``report``).
"""

from __future__ import annotations

import os
import posixpath
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cxreval.io.errors import InputError, InputProblem, Unit, file_error
from cxreval.io.records import PathLike, Record, RecordTable, decode_utf8, load_table, record_id
from cxreval.literals import DATASET_LAYOUTS, DatasetLayout

#: The fields every layout's table holds (ReXrank's names; :data:`cxreval.io.SECTIONS`).
FINDINGS, IMPRESSION, REPORT = "section_findings", "section_impression", "report"


class StudiesWithoutText(UserWarning):
    """Studies of a dataset that lack the text asked for were left out of the pool; the message counts them."""


# -- MIMIC-CXR's official section rules ----------------------------------------------------------

#: A section header: a new line, one space, upper-case words, a colon (``section_parser.section_text``).
_MIMIC_HEADER = re.compile(r"\n ([A-Z ()/,-]+):\s", re.DOTALL)

#: Header names (lower-cased, stripped) and the section each one is (``normalize_section_names``'s
#: ``frequent_sections``, grouped by section; typos included, as the official parser lists them).
# fmt: off
_MIMIC_NAMES: dict[str, tuple[str, ...]] = {
    "preamble": ("preamble",),
    "impression": (
        "impression", "conclusion", "findings and impression", "findings/impression", "findings/ impression",
        "ndication", "impresson", "imprression", "imoression", "impressoin", "imprssion", "impresion",
        "imperssion", "mpression", "impession",
    ),
    "comparison": (
        "comparison", "comparisons", "reference exam", "comparison exam", "comparison film", "comparision",
        "comparsion", "comparrison", "comparisions",
    ),
    "indication": ("indication", "reason for examination", "reason for exam", "clinical indication", "idication"),
    "findings": (
        "findings", "chest, two views", "finding", "findins", "findindgs", "findgings", "findngs", "findnings",
        "finidngs", "reference findings",
    ),
    "examination": ("examination", "exam", "type of examination"),
    "technique": ("technique",),
    "history": ("history", "clinical history", "clinical information", "patient history", "pfi"),
    "notification": ("notification",),
    "recommendations": ("recommendation(s)", "recommendations", "recommendation"),
    "addendum": ("addendum",),
    "date": ("date",),
    "comment": ("comment",),
    "wet read": ("wet read", "wetread"),
}
# fmt: on
_MIMIC_NAME_OF = {raw: name for name, raws in _MIMIC_NAMES.items() for raw in raws}
#: Sections a header naming one of them becomes (first match wins), then view words that make it findings.
_MIMIC_MAIN = ("impression", "findings", "history", "comparison", "addendum")
_MIMIC_VIEW_WORDS = re.compile(
    "(chest|portable|pa and lateral|lateral and pa|ap and lateral|lateral and ap|frontal and|two views|frontal view"
    "|pa view|ap view|one view|lateral view|bone window|frontal upright|frontal semi-upright|ribs|pa and lat)"
)
#: Studies the official tool sections by hand (``custom_mimic_cxr_rules``) and therefore leaves out
#: of ``mimic_cxr_sectioned.csv``; the tree reader leaves them out too, so both layouts agree.
MIMIC_HAND_SECTIONED = frozenset(
    "s50913680 s59363654 s59279892 s59768032 s57936451 s50058765 s53356173 s53202765 s50808053 s51966317 "
    "s50743547 s56451190 s59067458 s59215320 s55124749 s54365831 s59087630 s58157373 s56482935 s58375018 "
    "s54654948 s55157853 s51491012 s50525523 s57564132 s59982525 s53488209 s54875119 s50196495 s56579911 "
    "s52648681 s59889364 s53514462 s59505494 s53182247 s51410602 s56412866 s54986978 s59003148 s57150433 "
    "s56760320 s59562049 s52674888 s55258338 s59330497 s52119491 s58235663 s50798377 s54168089 s53071062 "
    "s56724958 s54231141 s53607029 s52035334".split()
)
#: The sections ``mimic_cxr_sectioned.csv`` holds (the last one of each name in a report).
MIMIC_SECTIONED = ("impression", "findings", "last_paragraph", "comparison")


def mimic_section_name(header: str) -> str:
    """The section a MIMIC-CXR header names, by the official parser's rules."""
    name = header.lower().strip()
    if name in _MIMIC_NAME_OF:
        return _MIMIC_NAME_OF[name]
    for main in _MIMIC_MAIN:
        if main in name:
            return main
    return "findings" if _MIMIC_VIEW_WORDS.search(name) else name


def split_mimic_report(text: str) -> list[tuple[str, str]]:
    """A MIMIC-CXR report as (section, text) in order, by the official parser's rules.

    Headers are upper-case words after a new line and one space; a section runs to the next
    header found after its own first line break. Empty findings and impression sections are
    dropped; a report with neither gets its last paragraph (after the first blank line of its
    last section) as ``last_paragraph``.
    """
    found = _MIMIC_HEADER.search(text)
    if found is None:
        parts = [("full report", text)]
    else:
        parts = [("preamble", text[: found.start(1)])]
        while found is not None:
            header, start = found.group(1), found.end()
            line_break = text.find("\n", start)
            found = _MIMIC_HEADER.search(text, start if line_break == -1 else line_break)
            parts.append((header, text[start : len(text) if found is None else found.start()]))
    sections = [(mimic_section_name(h), t) for h, t in parts]
    sections = [(n, t) for n, t in sections if not (n in ("impression", "findings") and not t.strip())]
    names = {n for n, _ in sections}
    if "impression" not in names and "findings" not in names and "\n \n" in sections[-1][1]:
        name, last = sections[-1]
        head, *rest = last.split("\n \n")
        sections[-1] = (name, head)
        sections.append(("last_paragraph", "\n \n".join(rest)))
    return sections


def mimic_sections(text: str) -> dict[str, str]:
    """The sections ``mimic_cxr_sectioned.csv`` holds for a report: the last of each name, stripped."""
    last = {name: body.strip() for name, body in split_mimic_report(text)}
    return {name: last[name] for name in MIMIC_SECTIONED if name in last}


# -- tables --------------------------------------------------------------------------------------


def compose_report(findings: Any, impression: Any) -> str | None:
    """ReXrank's ``report``: ``"Findings: F Impression: I"``, a part that is absent left out."""
    parts = [f"{label}: {text}" for label, text in (("Findings", findings), ("Impression", impression)) if isinstance(text, str)]
    return " ".join(parts) or None


def _text(value: Any) -> Any:
    """A section's text (stripped), None when it is absent (missing, null, blank, a Parquet NaN);
    a value of another type stays as it is, so that the reader reports it."""
    if isinstance(value, str):
        return value.strip() or None
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value


def _absent(value: Any) -> bool:
    return _text(value) is None


def _study(key: str, findings: Any, impression: Any, extra: Mapping[str, Any], pos: int | None = None) -> Record:
    f, i = _text(findings), _text(impression)
    values = {**extra, FINDINGS: f, IMPRESSION: i, REPORT: compose_report(f, i)}
    return Record(pos=pos, values=values, key=key, ident=key)


def _keyed(file: str, unit: Unit, records: list[Record], problems: list[InputProblem]) -> RecordTable:
    """The layout's table: keyed by study id, positions in the ``unit`` of the file read."""
    columns: dict[str, None] = {}
    for rec in records:
        columns.update(dict.fromkeys(rec.values))
    return RecordTable(file=file, unit=unit, columns=list(columns), records=records, problems=problems, keyed=True)


def _mimic_files(root: Path) -> Iterator[Path]:
    """Every ``s<digits>.txt`` under ``root`` in a patient folder ``p<digits>``, in path order."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if re.fullmatch(r"p\d+", Path(folder).name):
            yield from (Path(folder) / f for f in sorted(files) if re.fullmatch(r"s\d+\.txt", f))


def _mimic_tree(path: PathLike, format: str | None, id_col: str | None) -> RecordTable:
    root, file = Path(path), os.fspath(path)
    if not root.exists():
        raise file_error(file, "folder not found")
    if not root.is_dir():
        raise file_error(file, "layout mimic-cxr reads the report tree: give the files/ folder (or one under it)")
    records: list[Record] = []
    problems: list[InputProblem] = []
    seen: dict[str, Path] = {}
    by_hand = 0
    for txt in _mimic_files(root):
        study = txt.stem
        if study in MIMIC_HAND_SECTIONED:
            by_hand += 1
            continue
        if study in seen:
            problems.append(InputProblem(file=str(txt), unit="item", id=study, message=f"study also at {seen[study]}"))
            continue
        seen[study] = txt
        text = decode_utf8(txt.read_bytes(), str(txt))
        sections = mimic_sections(text.replace("\r\n", "\n").replace("\r", "\n"))  # as Python's text mode reads it
        extra = {"subject": txt.parent.name, **{k: sections.get(k) for k in ("last_paragraph", "comparison")}}
        records.append(_study(study, sections.get("findings"), sections.get("impression"), extra))
    if by_hand:
        warnings.warn(
            f"{by_hand} studies in {file} are sectioned by hand in the official tool and left out, as its "
            "mimic_cxr_sectioned.csv leaves them out",
            StudiesWithoutText,
            stacklevel=4,
        )
    if not records and not problems:
        raise file_error(file, "no report files (p<digits>/s<digits>.txt) to read under this folder")
    return _keyed(file, "item", records, problems)


def _rows(path: PathLike, format: str | None, need: tuple[str, ...]) -> RecordTable:
    """A tabular release file (every column read), its needed columns checked."""
    table = load_table(path, format, None, keyed_ok=True)
    absent = [c for c in need if c not in table.columns]
    if absent:
        raise InputError([InputProblem(file=table.file, field=c, message="column of this layout is missing") for c in absent])
    return table


def _scalars(values: Mapping[str, Any], skip: tuple[str, ...]) -> dict[str, Any]:
    """The other fields of a row kept beside the sections (``--meta-col`` and ``where`` read them).
    A field named as one of the layout's own is kept with ``release_`` before its name."""
    kept = {k: v for k, v in values.items() if k not in skip and (v is None or isinstance(v, str | int | float | bool))}
    return {(f"release_{k}" if k in (FINDINGS, IMPRESSION, REPORT) else k): v for k, v in kept.items()}


def _study_ids(table: RecordTable, col: str) -> list[str | None]:
    """Each record's study id in ``col``, checked as every id is (text or an integer, not empty);
    None after a problem. Read as a column, also in a JSON object keyed by something else."""
    as_columns = replace(table, keyed=False)  # shares table.problems
    return [record_id(as_columns, rec, col, {col}) for rec in table.records]


def _mimic_sectioned(path: PathLike, format: str | None, id_col: str | None) -> RecordTable:
    table = _rows(path, format, ("study", *MIMIC_SECTIONED))
    records = []
    for rec, study in zip(table.records, _study_ids(table, "study"), strict=True):
        if study is not None:
            values = rec.values
            records.append(_study(study, values["findings"], values["impression"], _scalars(values, ("study",)), rec.pos))
    return _keyed(table.file, table.unit, records, table.problems)


def _chexpert_plus(path: PathLike, format: str | None, id_col: str | None) -> RecordTable:
    table = _rows(path, format, ("path_to_image", FINDINGS, IMPRESSION))
    studies: dict[str, Record] = {}
    varying: set[str] = set()
    for rec, image in zip(table.records, _study_ids(table, "path_to_image"), strict=True):
        if image is None:
            continue
        key = posixpath.dirname(image.replace("\\", "/")) or image
        study = _study(key, rec.values[FINDINGS], rec.values[IMPRESSION], _scalars(rec.values, (FINDINGS, IMPRESSION)), rec.pos)
        first = studies.setdefault(key, study)
        if first is study:
            continue
        differ = [f for f in (FINDINGS, IMPRESSION) if first.values[f] != study.values[f]]
        if differ:
            where = f"{table.unit} {first.pos}"
            table.problems.append(table.problem(f"study {key!r} has another text than at {where}", rec, differ[0], id=key))
        varying.update(k for k, v in study.values.items() if first.values.get(k) != v and k not in (FINDINGS, IMPRESSION, REPORT))
    for rec in studies.values():  # a field of one image (view, path) is no field of the study
        rec.values = {k: v for k, v in rec.values.items() if k not in varying}
    return _keyed(table.file, table.unit, list(studies.values()), table.problems)


#: ReXGradient's study id columns, in the order they are looked for when none is named.
REXGRADIENT_IDS = ("id", "StudyInstanceUid")


def _rexgradient(path: PathLike, format: str | None, id_col: str | None) -> RecordTable:
    table = _rows(path, format, ("Findings", "Impression"))
    if table.keyed and id_col is not None:
        raise file_error(table.file, f"this JSON is keyed by study id: an id column ({id_col!r}) does not apply to it")
    col = id_col or next((c for c in REXGRADIENT_IDS if c in table.columns), None)
    if not table.keyed and (col is None or col not in table.columns):
        wanted = repr(id_col) if id_col else " or ".join(map(repr, REXGRADIENT_IDS))
        raise file_error(table.file, f"layout rexgradient needs a study id: column {wanted} is missing")
    records = []
    keys = [rec.key for rec in table.records] if table.keyed else _study_ids(table, col or "")
    for rec, key in zip(table.records, keys, strict=True):
        if key is not None:
            extra = _scalars(rec.values, ("Findings", "Impression"))
            records.append(_study(key, rec.values["Findings"], rec.values["Impression"], extra, rec.pos))
    return _keyed(table.file, table.unit, records, table.problems)


def _rexrank(path: PathLike, format: str | None, id_col: str | None) -> RecordTable:
    table = load_table(path, format or "json", (), keyed_ok=True)
    if not table.keyed:
        raise file_error(table.file, "layout rexrank is a JSON object keyed by study id")
    for rec in table.records:
        values = dict(rec.values)
        if REPORT not in values and "reports" in values:
            values[REPORT] = values["reports"]
        rec.values = {**values, **{name: None for name in (FINDINGS, IMPRESSION, REPORT) if values.get(name) is None}}
    return _keyed(table.file, table.unit, table.records, table.problems)


_READERS = {
    "mimic-cxr": _mimic_tree,
    "mimic-cxr-sectioned": _mimic_sectioned,
    "chexpert-plus": _chexpert_plus,
    "rexgradient": _rexgradient,
    "rexrank": _rexrank,
}


#: The layouts whose study id column may be named (the others fix it: a file name, a key, a column).
ID_COLUMN_LAYOUTS: tuple[DatasetLayout, ...] = ("rexgradient",)


def load_layout(path: PathLike, layout: DatasetLayout, format: str | None = None, id_col: str | None = None) -> RecordTable:
    """A dataset's references as a table keyed by study id (fields: see the module's docstring).

    ``format`` names the file format where the suffix does not tell (not for ``mimic-cxr``, a
    folder). ``id_col`` names the study id column where the layout has several
    (:data:`ID_COLUMN_LAYOUTS`). Problems of single studies are collected in the table; a file
    that is not in the layout raises :class:`InputError` naming what is missing.
    """
    if layout not in _READERS:
        raise ValueError(f"layout must be one of {', '.join(DATASET_LAYOUTS)}, got {layout!r}")
    if id_col is not None and layout not in ID_COLUMN_LAYOUTS:
        raise file_error(
            os.fspath(path),
            f"layout {layout} names its study ids itself (docs/data.md); an id column ({id_col!r}) applies to the "
            "candidates only: --cand-id-col",
        )
    return _READERS[layout](path, format, id_col)


def keep_studies_with(table: RecordTable, field: str) -> int:
    """Drop the studies whose ``field`` is absent (missing, null or blank), warning with their count
    and noting each one in ``table.left_out`` (a candidate for it is told why it has no reference).

    A value of another type stays, so that the reader reports it as the error it is."""
    kept: list[Record] = []
    for rec in table.records:
        if not _absent(rec.values.get(field)):
            kept.append(rec)
        elif rec.key is not None:
            table.left_out[rec.key] = f"the study is in the dataset but has no {field!r}"
    dropped = len(table.records) - len(kept)
    if dropped:
        table.records = kept
        warnings.warn(
            f"{dropped} of {dropped + len(kept)} studies in {table.file} have no {field!r} and are not references",
            StudiesWithoutText,
            stacklevel=3,
        )
    return dropped


def _as_text(value: Any) -> str | None:
    """A field value as ``where`` compares it: text stripped, ``true``/``false``, an integral number
    without ``.0``; None (absent) matches nothing."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


Scalar = str | int | float | bool
#: ``where=``: field -> the value, or the values, a study must hold (:func:`select_studies`).
Selection = Mapping[str, Scalar | Sequence[Scalar]]


def select_studies(table: RecordTable, where: Selection) -> None:
    """Keep the studies whose every named field holds one of the values given (``split: test``).

    Values are compared as text (:func:`_as_text`: ``1``, ``1.0`` and ``"1"`` match; an absent
    value matches nothing). A field the layout does not have, an empty list of values, or a
    selection no study meets is an error naming what there is."""
    wanted: dict[str, set[str | None]] = {}
    problems = []
    for name, values in where.items():
        listed = list(values) if isinstance(values, list | tuple) else [values]
        wanted[name] = {_as_text(v) for v in listed}
        if name not in table.columns:
            problems.append((name, f"no such field to select on (fields: {', '.join(table.columns)})"))
        elif not listed:
            problems.append((name, "no value to select"))
    if problems:
        raise InputError([InputProblem(file=table.file, field=f, message=m) for f, m in problems])
    kept = [r for r in table.records if all(_as_text(r.values.get(n)) in v for n, v in wanted.items())]
    if table.records and not kept:
        seen = {n: sorted({str(_as_text(r.values.get(n))) for r in table.records})[:10] for n in wanted}
        have = "; ".join(f"{n}: {', '.join(v)}" for n, v in seen.items())
        raise InputError([InputProblem(file=table.file, message=f"no study meets the selection {dict(where)} (values: {have})")])
    table.records = kept


def layout_study_id(layout: DatasetLayout, raw: str) -> str:
    """A study id as the layout writes it: MIMIC-CXR's files and sectioned CSV name a study
    ``s<study_id>``, so the number its metadata and split files give (``50414267``) becomes
    ``s50414267``; every other id is kept."""
    if layout in ("mimic-cxr", "mimic-cxr-sectioned") and raw.isdigit():
        return f"s{raw}"
    return raw


def read_study_ids(
    path: PathLike, layout: DatasetLayout, *, id_col: str = "study_id", format: str | None = None, where: Selection | None = None
) -> list[str]:
    """The study ids a table lists (one row per study or per image: each id once, in order), of
    the rows meeting ``where``: MIMIC-CXR's ``mimic-cxr-2.0.0-split.csv`` with ``{"split": "test"}``
    gives its test studies, written as the layout writes them (:func:`layout_study_id`)."""
    table = load_table(path, format, None, keyed_ok=False)
    if id_col not in table.columns:
        raise InputError([InputProblem(file=table.file, field=id_col, message="id column is missing")])
    select_studies(table, where or {})
    ids = (record_id(table, rec, id_col, {id_col}) for rec in table.records)
    listed = list(dict.fromkeys(layout_study_id(layout, i) for i in ids if i is not None))
    if table.problems:
        raise InputError(table.problems)
    return listed


def keep_listed(table: RecordTable, studies: Sequence[str], source: str) -> None:
    """Keep the studies ``studies`` lists; one it lists that the dataset lacks is an error."""
    wanted = set(studies)
    have = {r.key for r in table.records}
    lacking = [i for i in studies if i not in have]
    if lacking:
        raise InputError(
            [
                InputProblem(
                    file=table.file,
                    message=f"{len(lacking)} studies listed in {source} are not in this dataset, e.g. {lacking[:3]}",
                )
            ]
        )
    table.records = [r for r in table.records if r.key in wanted]
