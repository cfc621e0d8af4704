"""Reference and candidate reports as validated :class:`ReportPair` objects, read whole:
:func:`read_pairs` (one file), :func:`read_pair_files` (two files joined on id) and
:func:`read_reports` (one text per id)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from cxreval.io.datasets import Selection, keep_listed, keep_studies_with, load_layout, select_studies
from cxreval.io.errors import InputError, InputProblem
from cxreval.io.records import (
    PathLike,
    Record,
    RecordTable,
    check_columns,
    kept_text,
    load_table,
    missing_column,
    record_id,
    report_text,
)
from cxreval.literals import ON_MISSING, DatasetLayout, OnMissing, Section

#: ``section=`` values for the ReXrank JSON layout (:data:`cxreval.literals.REPORT_SECTIONS`, in
#: order) and the study field each one reads.
SECTIONS: dict[Section, str] = {
    "report": "report",
    "findings": "section_findings",
    "impression": "section_impression",
}

#: The field a ReXrank-layout *candidates* file holds the generated report in.
PREDICTION_FIELD = "model_prediction"

#: Above this share of candidates identical to their reference, readers warn loudly.
COPIED_WARN_SHARE = 0.5


class ReportPair(BaseModel):
    """One reference report and the candidate (generated) report to score against it."""

    model_config = ConfigDict(frozen=True)

    pair_id: str
    reference: str
    candidate: str
    meta: dict[str, str] = Field(default_factory=dict)
    """Extra columns the caller asked to keep (model, dataset, site, ...), as text."""
    system: str | None = None
    """The system (model) that wrote the candidate, for long-format input with a system column."""


class MissingIdsSkipped(UserWarning):
    """Ids in one of two joined files only were left out (``on_missing="skip"``); the message counts them."""


class CopiedCandidatesWarning(UserWarning):
    """Most candidates are identical to their reference: probably the wrong column was read."""


def warn_if_copied(references: Sequence[str], candidates: Sequence[str], *, source: str) -> float:
    """Share of candidates identical to their reference; warns above :data:`COPIED_WARN_SHARE`.

    A candidate column that silently holds the reference text scores perfectly, so readers call
    this on every input and the CLI prints the warning loudly.
    """
    same = sum(r == c for r, c in zip(references, candidates, strict=True))
    return warn_copied_counts(same, len(candidates), source)


def warn_copied_counts(same: int, n: int, source: str) -> float:
    """:func:`warn_if_copied` from counts: ``same`` of ``n`` candidates equal their reference."""
    if n == 0:
        return 0.0
    share = same / n
    if share > COPIED_WARN_SHARE:
        warnings.warn(
            f"{same} of {n} candidates ({share:.0%}) in {source} are identical to their reference: "
            "is the candidate column really the generated report?",
            CopiedCandidatesWarning,
            stacklevel=3,
        )
    return share


@dataclass
class _Row:
    ident: str
    rec: Record
    texts: dict[str, str]
    meta: dict[str, str]


def _extract(
    table: RecordTable,
    id_col: str,
    text_cols: Sequence[str],
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
) -> list[_Row]:
    """Validate every record; problems go to ``table.problems``, complete rows are returned.

    Ids must be unique, or unique within each system when ``system_col`` is given (long format:
    one row per study and system).
    """
    checker = RowChecker(table, id_col, text_cols, meta_cols, system_col)
    if not table.records:
        checker.no_records()
        return []
    checker.find_columns()
    return [row for rec in table.records if (row := checker.check(rec)) is not None]


class RowChecker:
    """The checks of one record (id, texts, kept columns, unique id), shared by the reader of a
    whole table and the streamed reader; problems go to ``table.problems``."""

    def __init__(
        self,
        table: RecordTable,
        id_col: str,
        text_cols: Sequence[str],
        meta_cols: Sequence[str] = (),
        system_col: str | None = None,
        *,
        unique: bool = True,
    ) -> None:
        self.table = table
        self.id_col = id_col
        self.text_cols = list(text_cols)
        self.system_col = system_col
        self.extra = [*meta_cols, *([system_col] if system_col else [])]
        self.wanted = [*([] if table.keyed else [id_col]), *self.text_cols, *self.extra]
        self.present: set[str] = set()
        self.unique = unique
        """Check that ids are unique (a second reading of a checked file need not: it would hold every id)."""

        self.first_seen: dict[tuple[str | None, str], int | None] = {}  # positions only: memory stays small

    def find_columns(self) -> None:
        """Name the wanted columns the table lacks (once its columns are known)."""
        self.present = check_columns(self.table, self.wanted)

    def assume_columns(self) -> None:
        """Check records before the columns are known (JSON Lines, streamed): every wanted column
        is taken as present, and :meth:`settle_columns` fixes that at the end."""
        self.present = set(self.wanted)

    def settle_columns(self) -> None:
        """After :meth:`assume_columns`: a wanted column no record had is one missing column, not a
        missing field on every record."""
        absent = [c for c in self.wanted if c not in self.table.columns]
        if not absent:
            return
        self.table.problems[:] = [q for q in self.table.problems if not (q.field in absent and q.message == "missing field")]
        what = "field" if self.table.keyed else "column"
        self.table.problems[:0] = [missing_column(self.table, c, what) for c in absent]

    def no_records(self) -> None:
        """The problems of a table without records."""
        # Header-only CSV/Parquet: missing columns are still worth naming; JSON has no header.
        if self.table.columns:
            check_columns(self.table, self.wanted)
        if not self.table.problems:
            self.table.problems.append(InputProblem(file=self.table.file, unit=self.table.unit, message="file has no records"))

    def check(self, rec: Record) -> _Row | None:
        """The record as a complete row, or None after reporting what is wrong with it."""
        table, present, system_col = self.table, self.present, self.system_col
        ident = rec.ident = record_id(table, rec, self.id_col, present)
        texts = {c: report_text(table, rec, c, present) for c in self.text_cols}
        meta = {c: kept_text(table, rec, c, present) for c in self.extra}
        system = meta.get(system_col) if system_col else None
        if system_col and system == "":
            table.problems.append(table.problem("empty system name", rec, system_col))
            return None
        if ident is not None and self.unique:
            key = (system, ident)
            if key in self.first_seen:
                pos = self.first_seen[key]
                where = "earlier in the file" if pos is None else f"first at {table.unit} {pos}"
                of = f" for system {system!r}" if system_col else ""
                table.problems.append(
                    table.problem(f"duplicate id {ident!r}{of} ({where})", rec, None if table.keyed else self.id_col)
                )
                return None
            self.first_seen[key] = rec.pos
        if ident is None or any(v is None for v in texts.values()) or any(v is None for v in meta.values()):
            return None
        return _Row(ident, rec, texts, meta)  # type: ignore[arg-type]


def _section_field(section: str) -> str:
    if section not in SECTIONS:
        raise ValueError(f"section must be one of {', '.join(map(repr, SECTIONS))}, got {section!r}")
    return SECTIONS[section]


def _text_field(
    table: RecordTable, text_col: str | None, section: str | None, default: str, keyed_default: str | None
) -> str | None:
    """The field a table's report text is read from: the one named, or the layout's default.

    Tabular files read ``text_col`` (or ``default``). A ReXrank-layout file reads ``text_col``
    when named, else ``section``'s field, else ``keyed_default``; with none of these it records a
    problem (returns ``None``) rather than guess, because the layout holds several texts.
    """
    if not table.keyed:
        return text_col or default
    if text_col is not None and section is not None:
        table.problems.append(
            InputProblem(
                file=table.file,
                unit=table.unit,
                field=text_col,
                message=f"name the field either as a column ({text_col!r}) or as a section ({section!r}), not both",
            )
        )
        return None
    if text_col is not None:
        return text_col
    if section is not None:
        return _section_field(section)
    if keyed_default is not None:
        return keyed_default
    table.problems.append(
        InputProblem(
            file=table.file,
            unit=table.unit,
            message="a ReXrank-layout file holds several texts per study; name the field to read "
            f"(fields present: {', '.join(map(repr, table.columns)) or '(none)'})",
        )
    )
    return None


def meta_dict(row: _Row, meta_cols: Sequence[str]) -> dict[str, str]:
    return {c: row.meta[c] for c in meta_cols}


# --------------------------------------------------------------------------------------------
# Public readers
# --------------------------------------------------------------------------------------------


def read_pairs(
    path: PathLike,
    *,
    id_col: str = "id",
    reference_col: str = "reference",
    candidate_col: str = "candidate",
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
    format: str | None = None,
) -> list[ReportPair]:
    """Read one file holding an id, a reference and a candidate report per record.

    ``meta_cols`` are extra columns to keep in :attr:`ReportPair.meta`. With ``system_col`` the
    file is in long format (one row per study and system; ids unique within a system) and each
    pair carries its :attr:`ReportPair.system`. Pairs come back in file order. ``path`` may be
    ``-`` for standard input (then ``format`` is needed). Raises :class:`InputError` listing every
    problem in the file; warns (:class:`CopiedCandidatesWarning`) when most candidates equal
    their reference.
    """
    wanted = [id_col, reference_col, candidate_col, *meta_cols, *([system_col] if system_col else [])]
    table = load_table(path, format, wanted, keyed_ok=False)
    rows = _extract(table, id_col, [reference_col, candidate_col], meta_cols, system_col)
    if table.problems:
        raise InputError(table.problems)
    pairs = [
        ReportPair(
            pair_id=r.ident,
            reference=r.texts[reference_col],
            candidate=r.texts[candidate_col],
            meta=meta_dict(r, meta_cols),
            system=r.meta[system_col] if system_col else None,
        )
        for r in rows
    ]
    _warn_copied(pairs, f"{table.file} (column {candidate_col!r})")
    return pairs


def _reports_rows(
    table: RecordTable,
    id_col: str,
    text_col: str | None,
    section: str | None,
    *,
    default: str,
    keyed_default: str | None,
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
    pool: bool = False,
) -> tuple[list[_Row], str | None]:
    """Validated rows of a one-text-per-id table and the text field they were read from.

    ``pool``: a dataset's table (:mod:`cxreval.io.datasets`), whose studies without that text are
    left out, counted in a :class:`~cxreval.io.datasets.StudiesWithoutText` warning."""
    col = _text_field(table, text_col, section, default, keyed_default)
    if col is None:
        return [], None
    if pool:
        keep_studies_with(table, col)
    return _extract(table, id_col, [col], meta_cols, system_col), col


def read_reports(
    path: PathLike,
    *,
    id_col: str | None = None,
    text_col: str | None = None,
    format: str | None = None,
    section: str | None = None,
    keyed_default: str | None = None,
    layout: DatasetLayout | None = None,
    where: Selection | None = None,
    studies: tuple[Sequence[str], str] | None = None,
) -> dict[str, str]:
    """Read one report text per id, in file order.

    Tabular files (CSV, TSV, JSONL, Parquet, JSON list) read ``id_col`` (default ``id``) and
    ``text_col`` (default ``report``); ``section`` does not apply to them. A ReXrank-layout JSON (object keyed
    by study id) reads the field named by ``text_col``, or else the one ``section`` picks:
    ``report`` (full "Findings: ... Impression: ..." text), ``findings`` (``section_findings``) or
    ``impression`` (``section_impression``), or else ``keyed_default`` (for example
    :data:`PREDICTION_FIELD` for a file of generated reports); naming none is an error, never a
    guess.

    ``layout`` reads a public dataset in its own layout (:mod:`cxreval.io.datasets`: keyed by
    study id, fields named as in ReXrank's JSON, ``section`` default ``report``); its studies
    without the text asked for are left out and counted in a warning. ``where`` keeps the studies
    whose fields hold the values given (``{"split": "test"}``; layouts only); ``studies`` (ids,
    and the file that lists them: :func:`~cxreval.io.datasets.read_study_ids`) keeps those.
    """
    if section is not None:
        _section_field(section)  # an unknown section is a programming error, raised at once
    if layout is not None:
        table = load_layout(path, layout, format, id_col=id_col)
        select_studies(table, where or {})
        if studies is not None:
            keep_listed(table, *studies)
        keyed_default = keyed_default or SECTIONS["report"]
    elif where or studies:
        raise ValueError("where= and studies= select studies of a dataset layout; give layout= too")
    else:
        table = load_table(path, format, [id_col or "id", text_col or "report"], keyed_ok=True)
    rows, col = _reports_rows(
        table, id_col or "id", text_col, section, default="report", keyed_default=keyed_default, pool=layout is not None
    )
    if table.problems:
        raise InputError(table.problems)
    assert col is not None
    return {r.ident: r.texts[col] for r in rows}


def _loose_id(ident: str) -> str:
    """An id with the differences spreadsheets introduce removed: leading zeros and a ``.0``."""
    m = re.fullmatch(r"0*(\d+)(?:\.0+)?", ident)
    return (m.group(1) or "0") if m else ident


def read_pair_files(
    refs_path: PathLike,
    cands_path: PathLike,
    *,
    id_col: str | None = None,
    ref_id_col: str | None = None,
    cand_id_col: str | None = None,
    reference_col: str | None = None,
    candidate_col: str | None = None,
    reference_format: str | None = None,
    candidate_format: str | None = None,
    section: str | None = None,
    meta_cols: Sequence[str] = (),
    system_col: str | None = None,
    on_missing: OnMissing = "error",
    reference_layout: DatasetLayout | None = None,
) -> list[ReportPair]:
    """Join a references file and a candidates file on id, in candidate-file order.

    The text read is the column named: ``reference_col`` (default ``reference``) and
    ``candidate_col`` (default ``candidate``) in tabular files. In a ReXrank-layout JSON the
    references read ``reference_col`` if named, else the field of ``section`` (default
    ``report``); candidates read ``candidate_col`` if named, else ``model_prediction``.
    ``section`` applies to a ReXrank-layout references file only; naming it for a tabular one is
    an error. ``ref_id_col`` / ``cand_id_col`` default to ``id_col`` (default ``id``); naming an id
    column for a ReXrank-layout file (keyed by id) is an error. ``meta_cols`` are read from
    the candidates file when it has them, else from the references file. With ``system_col`` the
    candidates file is in long format (one row per study and system) and every system must
    cover every reference.

    Problems in both files are collected and raised together; only when both files are clean
    are the ids matched, and then every id present in one file only is a problem, in both
    directions (with a hint when the ids differ only by leading zeros or ``.0``). With
    ``on_missing="skip"`` such ids are left out instead and counted in a :class:`MissingIdsSkipped`
    warning (a model that failed on a few studies: the shared ids are scored); no shared id at all
    is still an error.

    ``reference_layout`` reads the references in a public dataset's own layout
    (:mod:`cxreval.io.datasets`; ``section`` picks the text, default ``report``). Such a file is a
    pool: its studies without a candidate are not scored and not an error, and its studies
    without the text asked for are left out, counted in a warning; a candidate id it lacks is an
    error as always.
    """
    if on_missing not in ON_MISSING:
        raise ValueError(f"on_missing must be one of {', '.join(ON_MISSING)}, got {on_missing!r}")
    if section is not None:
        _section_field(section)  # an unknown section is a programming error, raised at once
    ref_id = ref_id_col or id_col or "id"
    cand_id = cand_id_col or id_col or "id"
    system = [system_col] if system_col else []
    if reference_layout is not None:  # its ids are the layout's: --id-col names the candidates' column only
        refs = load_layout(refs_path, reference_layout, reference_format, id_col=ref_id_col)
        ref_id = ref_id_col or "id"
    else:
        refs = load_table(refs_path, reference_format, [ref_id, reference_col or "reference", *meta_cols], keyed_ok=True)
    cands = load_table(cands_path, candidate_format, [cand_id, candidate_col or "candidate", *meta_cols, *system], keyed_ok=True)
    cand_meta = [c for c in meta_cols if c in cands.columns or c not in refs.columns]
    ref_meta = [c for c in meta_cols if c not in cand_meta]
    ref_rows, ref_col = _reports_rows(
        refs,
        ref_id,
        reference_col,
        section,
        default="reference",
        keyed_default=SECTIONS["report"],
        meta_cols=ref_meta,
        pool=reference_layout is not None,
    )
    cand_rows, cand_col = _reports_rows(
        cands,
        cand_id,
        candidate_col,
        None,
        default="candidate",
        keyed_default=PREDICTION_FIELD,
        meta_cols=cand_meta,
        system_col=system_col,
    )
    named_ids = [(cands, cand_id_col or id_col)] + ([] if reference_layout else [(refs, ref_id_col or id_col)])
    for table, named in named_ids:
        if table.keyed and named is not None:  # a column the user named must be the one read
            table.problems.append(
                InputProblem(
                    file=table.file,
                    unit=table.unit,
                    field=named,
                    message="a ReXrank-layout file is keyed by study id, so an id column does not apply to it; "
                    "leave --id-col / --ref-id-col / --cand-id-col out for this file",
                )
            )
    if section is not None and not refs.keyed:
        refs.problems.append(
            InputProblem(
                file=refs.file,
                unit=refs.unit,
                message=f"--section {section} applies to a references file in ReXrank JSON layout; this file is "
                "tabular: name its text column with --reference-col",
            )
        )
    problems = [*refs.problems, *cands.problems]
    if problems:
        raise InputError(problems)
    assert ref_col is not None and cand_col is not None
    ref_by_id = {r.ident: r for r in ref_rows}
    problems = _unmatched(refs, cands, ref_rows, cand_rows, system_col, pool=reference_layout is not None)
    if problems and on_missing == "skip":
        kept = [r for r in cand_rows if r.ident in ref_by_id]
        no_reference = len(cand_rows) - len(kept)
        _warn_skipped(no_reference, len(problems) - no_reference, refs.file, cands.file, len(kept))
        cand_rows = kept
        if not cand_rows:
            raise InputError([InputProblem(file=cands.file, message=f"no id of this file is in {refs.file}: nothing to score")])
        problems = []
    if problems:
        loose_refs = {_loose_id(i) for i in ref_by_id}
        near = [(r.ident, i) for r in cand_rows if r.ident not in ref_by_id for i in [_loose_id(r.ident)] if i in loose_refs]
        if near:
            by_loose = {_loose_id(i): i for i in ref_by_id}
            cid, loose = near[0]
            problems.append(
                InputProblem(
                    file=cands.file,
                    field=cand_id,
                    unit=cands.unit,
                    message=f"{len(near)} candidate ids match a reference id only when leading zeros or '.0' are "
                    f"ignored (e.g. {cid!r} vs {by_loose[loose]!r}); write the ids the same way in both files",
                )
            )
        raise InputError(problems)
    pairs = [
        ReportPair(
            pair_id=r.ident,
            reference=ref_by_id[r.ident].texts[ref_col],
            candidate=r.texts[cand_col],
            meta={c: (r.meta[c] if c in cand_meta else ref_by_id[r.ident].meta[c]) for c in meta_cols},
            system=r.meta[system_col] if system_col else None,
        )
        for r in cand_rows
    ]
    _warn_copied(pairs, f"{cands.file} (field {cand_col!r})")
    return pairs


def _unmatched(
    refs: RecordTable,
    cands: RecordTable,
    ref_rows: Sequence[_Row],
    cand_rows: Sequence[_Row],
    system_col: str | None,
    *,
    pool: bool = False,
) -> list[InputProblem]:
    """A problem for each candidate id without a reference, and each reference id without a
    candidate (of each system, in long format) unless the references are a dataset's ``pool``."""
    ref_ids = {r.ident for r in ref_rows}
    problems: list[InputProblem] = []
    by_system: dict[str | None, set[str]] = {}
    for r in cand_rows:
        name = r.meta[system_col] if system_col else None
        by_system.setdefault(name, set()).add(r.ident)
        if r.ident not in ref_ids:
            why = refs.left_out.get(r.ident)
            problems.append(cands.problem(f"id has no reference in {refs.file}{f' ({why})' if why else ''}", r.rec, id=r.ident))
    for name, ids in by_system.items() if not pool else ():
        of = f" from system {name!r}" if system_col else ""
        for r in ref_rows:
            if r.ident not in ids:
                problems.append(refs.problem(f"id has no candidate{of} in {cands.file}", r.rec, id=r.ident))
    return problems


def _warn_skipped(no_ref: int, no_cand: int, refs_file: str, cands_file: str, kept: int) -> None:
    """Count what ``on_missing="skip"`` left out, in one warning naming the files."""
    warnings.warn(
        f"--on-missing skip: {no_ref} candidate row(s) in {cands_file} without a reference and {no_cand} reference(s) "
        f"in {refs_file} without a candidate were left out; {kept} pair(s) scored",
        MissingIdsSkipped,
        stacklevel=3,
    )


def _warn_copied(pairs: Sequence[ReportPair], source: str) -> None:
    """:func:`warn_if_copied` per system (a long file's one copied system must not hide in the pool)."""
    by_system: dict[str | None, list[ReportPair]] = {}
    for p in pairs:
        by_system.setdefault(p.system, []).append(p)
    for system, group in by_system.items():
        where = source if system is None else f"{source}, system {system!r}"
        warn_if_copied([p.reference for p in group], [p.candidate for p in group], source=where)
