"""Agreement of predicted labels with human (gold) labels: reading, statistics and rendering
(the ``cxreval agree`` command is :mod:`cxreval.cli.agree`).

Why: before trusting a labeler (rules, an LLM, CheXbert) to score generated reports, check it
against radiologists' labels, label by label, in the layout of the Ran Score paper's tables 2
(accuracy with Clopper-Pearson 95 % CI) and 4 (accuracy, precision, recall, F1, averages).

**Files.** CSV, TSV, JSONL, JSON list or Parquet. *Wide*: an id column and one column per label.
*Long*: exactly the columns id, ``label``, ``value`` (detected automatically); a (report, label)
with no row is blank. **Values**: ``1`` / ``positive`` / ``present`` / ``yes`` / ``true``;
``0`` / ``negative`` / ``absent`` / ``no`` / ``false``; ``-1`` / ``uncertain``; empty, ``blank``,
``nan`` or null for blank (case-insensitive; ``1.0`` etc. accepted). Anything else is an error,
listed with file, line and column; ids in one file only are errors too. Nothing is dropped.

**Binarisation** as in :mod:`cxreval.scores.labels`: blank -> 0; uncertain -> 0 (``negative``,
default), 1 (``positive``), or left out (``exclude``).

**Reference.** One gold file: its labels. Several (annotators): the majority of the annotators
with a defined value per (report, label); a tie is left out (``tie=exclude``, default, counted in
``excluded``) or resolved to ``positive`` / ``negative``.

**Table.** Per label: n, accuracy with Clopper-Pearson CI, precision, recall, F1 (prediction vs
reference, positive class 1), Cohen's kappa (prediction vs reference) and, with several
annotators, Fleiss' kappa among the annotators (items that all of them labelled). *Micro*:
counts pooled over labels (its CI treats (report, label) cells as independent). *Macro*: the
mean over labels of each defined value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from cxreval.io import (
    InputError,
    InputProblem,
    RecordTable,
    check_columns,
    load_whole_table,
    record_id,
)
from cxreval.io.writers import csv_text
from cxreval.literals import Tie, UncertainLabel
from cxreval.render import Column, Table, to_latex
from cxreval.render import number as _f
from cxreval.scores.labels import binarize
from cxreval.scores.ratios import f1_score, mean_defined, ratio
from cxreval.scores.resampling import (
    clopper_pearson,
    cohens_kappa_table,
    fleiss_kappa_counts,
)
from cxreval.scores.signature import Signature

_WORDS: dict[str, float] = {
    **dict.fromkeys(["1", "positive", "pos", "present", "yes", "true"], 1.0),
    **dict.fromkeys(["0", "negative", "neg", "absent", "no", "false"], 0.0),
    **dict.fromkeys(["-1", "uncertain", "unc"], -1.0),
    **dict.fromkeys(["", "blank", "nan", "none", "null"], np.nan),
}


def parse_label_value(raw: Any) -> float | None:
    """1 / 0 / -1 / NaN for an accepted label value; None when the value is not one."""
    if raw is None:
        return np.nan
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, int | float):
        if isinstance(raw, float) and np.isnan(raw):
            return np.nan
        return float(raw) if raw in (1, 0, -1) else None
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _WORDS:
            return _WORDS[text]
        try:
            num = float(text)
        except ValueError:
            return None
        return num if num in (1.0, 0.0, -1.0) else None
    return None


def _table_of(path: Path, format: str | None) -> RecordTable:
    """Every column of a label file (an unknown suffix is an error here, not read as CSV)."""
    return load_whole_table(path, format, default=None)


def read_labels(
    path: str | os.PathLike[str],
    *,
    id_col: str = "id",
    labels: Sequence[str] | None = None,
    label_col: str = "label",
    value_col: str = "value",
    format: str | None = None,
) -> pd.DataFrame:
    """A label file as a table: index ids (str), one column per label, values 1 / 0 / -1 / NaN.

    ``labels`` picks and orders the label columns (default: every column but the id, in file
    order). Raises :class:`InputError` listing every problem.
    """
    table = _table_of(Path(path), format)
    long = set(table.columns) == {id_col, label_col, value_col}
    names = (
        [label_col, value_col] if long else (list(labels) if labels is not None else [c for c in table.columns if c != id_col])
    )
    present = check_columns(table, [id_col, *names])
    problems = table.problems
    cells: dict[str, dict[str, float]] = {}
    for rec in table.records:
        ident = record_id(table, rec, id_col, present)
        if ident is None:
            continue
        rec.ident = ident
        if long:
            label = str(rec.values.get(label_col, "")).strip()
            if labels is not None and label not in labels:
                continue
            row = cells.setdefault(ident, {})
            if label in row:
                problems.append(table.problem(f"label {label!r} given twice for this id", rec, label_col))
            row[label] = _value(table, rec, value_col, problems)
            continue
        if ident in cells:
            problems.append(table.problem("duplicate id", rec, id_col))
            continue
        cells[ident] = {c: _value(table, rec, c, problems) for c in names if c in present}
    if problems:
        raise InputError(problems)
    columns = (
        list(labels)
        if labels is not None
        else (list(dict.fromkeys(lab for row in cells.values() for lab in row)) if long else names)
    )
    frame = pd.DataFrame.from_dict(cells, orient="index", columns=columns, dtype=float)
    frame.index = pd.Index([str(i) for i in frame.index], name="id")
    return frame


def _value(table: RecordTable, rec: Any, col: str, problems: list[InputProblem]) -> float:
    raw = rec.values.get(col)
    value = parse_label_value(raw)
    if value is None:
        problems.append(
            table.problem(f"label value {raw!r} is not one of 1 / 0 / -1 / blank or positive / negative / uncertain", rec, col)
        )
        return np.nan
    return value


def majority_vote(
    tables: Sequence[pd.DataFrame], *, uncertain: UncertainLabel = "negative", tie: Tie = "exclude"
) -> pd.DataFrame:
    """Binary reference from one or more annotators' label tables (same ids and labels).

    Each table is binarised first; the majority of the defined votes wins; a tie (or no defined
    vote) is NaN unless ``tie`` resolves it.
    """
    binary = np.stack([binarize(t, uncertain).to_numpy(dtype=float) for t in tables])
    pos = np.nansum(binary == 1, axis=0)
    neg = np.nansum(binary == 0, axis=0)
    out = np.where(pos > neg, 1.0, np.where(neg > pos, 0.0, np.nan))
    voted = (pos + neg) > 0
    if tie != "exclude":
        out = np.where((pos == neg) & voted, 1.0 if tie == "positive" else 0.0, out)
    return pd.DataFrame(out, index=tables[0].index, columns=tables[0].columns)


class AgreementRow(BaseModel):
    """Agreement of predictions with the reference on one label (or pooled / averaged)."""

    model_config = ConfigDict(frozen=True)

    label: str
    n: int
    tp: int | None = None
    fp: int | None = None
    fn: int | None = None
    tn: int | None = None
    excluded: int | None = None
    accuracy: float | None
    accuracy_low: float | None = None
    accuracy_high: float | None = None
    precision: float | None
    recall: float | None
    f1: float | None
    kappa: float | None
    raters_kappa: float | None = None


class AgreementTable(BaseModel):
    """The ``cxreval agree`` table: one row per label, then micro and macro rows."""

    model_config = ConfigDict(frozen=True)

    rows: list[AgreementRow]
    micro: AgreementRow
    macro: AgreementRow
    n_items: int
    n_raters: int
    confidence: float
    signature: Signature


def _row(
    label: str, tp: int, fp: int, fn: int, tn: int, excluded: int, confidence: float, raters_kappa: float | None
) -> AgreementRow:
    n = tp + fp + fn + tn
    lo, hi = clopper_pearson(tp + tn, n, confidence)
    kappa, _, _ = cohens_kappa_table(np.array([[tp, fn], [fp, tn]])) if n else (np.nan, 0, 0)
    return AgreementRow(
        label=label,
        n=n,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        excluded=excluded,
        accuracy=ratio(tp + tn, n),
        accuracy_low=_fin(lo),
        accuracy_high=_fin(hi),
        precision=ratio(tp, tp + fp),
        recall=ratio(tp, tp + fn),
        f1=f1_score(tp, fp, fn),
        kappa=_fin(kappa),
        raters_kappa=raters_kappa,
    )


def _fin(x: Any) -> float | None:
    v = float(np.asarray(x))
    return v if np.isfinite(v) else None


def _fleiss_binary(votes: np.ndarray) -> float | None:
    """Fleiss' kappa of binary votes ``(raters, items)``; items with a missing vote left out."""
    keep = ~np.isnan(votes).any(axis=0)
    v = votes[:, keep]
    if v.shape[1] == 0:
        return None
    ones = (v == 1).sum(axis=0)
    kappa, _, _ = fleiss_kappa_counts(np.stack([ones, v.shape[0] - ones], axis=1))
    return _fin(kappa)


def agreement_table(
    predictions: pd.DataFrame,
    gold: Sequence[pd.DataFrame],
    *,
    uncertain: UncertainLabel = "negative",
    tie: Tie = "exclude",
    confidence: float = 0.95,
    signature: Signature | None = None,
) -> AgreementTable:
    """Per-label agreement of predicted labels with the (majority) gold labels."""
    if not gold:
        raise ValueError("at least one gold table is needed")
    labels = list(predictions.columns)
    gold = [g.loc[predictions.index, labels] for g in gold]
    reference = majority_vote(gold, uncertain=uncertain, tie=tie).to_numpy()
    pred = binarize(predictions, uncertain).to_numpy(dtype=float)
    votes = np.stack([binarize(g, uncertain).to_numpy(dtype=float) for g in gold])
    ok = ~(np.isnan(reference) | np.isnan(pred))
    tp = ((pred == 1) & (reference == 1) & ok).sum(axis=0)
    fp = ((pred == 1) & (reference == 0) & ok).sum(axis=0)
    fn = ((pred == 0) & (reference == 1) & ok).sum(axis=0)
    tn = ((pred == 0) & (reference == 0) & ok).sum(axis=0)
    n_items = len(predictions)
    several = len(gold) > 1
    rows = [
        _row(
            lab,
            int(tp[j]),
            int(fp[j]),
            int(fn[j]),
            int(tn[j]),
            n_items - int(ok[:, j].sum()),
            confidence,
            _fleiss_binary(votes[:, :, j]) if several else None,
        )
        for j, lab in enumerate(labels)
    ]
    micro = _row(
        "Micro",
        int(tp.sum()),
        int(fp.sum()),
        int(fn.sum()),
        int(tn.sum()),
        int(sum(r.excluded or 0 for r in rows)),
        confidence,
        _fleiss_binary(votes.reshape(len(gold), -1)) if several else None,
    )
    macro = AgreementRow(
        label="Macro",
        n=int(sum(r.n for r in rows)),
        accuracy=mean_defined([r.accuracy for r in rows]),
        precision=mean_defined([r.precision for r in rows]),
        recall=mean_defined([r.recall for r in rows]),
        f1=mean_defined([r.f1 for r in rows]),
        kappa=mean_defined([r.kappa for r in rows]),
        raters_kappa=mean_defined([r.raters_kappa for r in rows]) if several else None,
    )
    base = signature or Signature(metric="label-agreement", ontology="none", engine="external")
    options = {
        **base.options,
        "uncertain": uncertain,
        "blank": "negative",
        "raters": str(len(gold)),
        "reference": "majority" if several else "single",
        "tie": tie if several else "none",
        "ci": "clopper-pearson",
        "confidence": str(confidence),
        "kappa": "cohen",
        "raters-kappa": "fleiss" if several else "none",
    }
    sig = base.model_copy(update={"metric": "label-agreement", "options": options})
    return AgreementTable(
        rows=rows, micro=micro, macro=macro, n_items=n_items, n_raters=len(gold), confidence=confidence, signature=sig
    )


# ------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------


def _acc(row: AgreementRow) -> str:
    if row.accuracy_low is None or row.accuracy_high is None:
        return _f(row.accuracy)
    return f"{_f(row.accuracy)} [{_f(row.accuracy_low)}, {_f(row.accuracy_high)}]"


def agreement_display(table: AgreementTable) -> Table:
    """The agreement table as a reader sees it (Ran Score tables 2 / 4 layout): one row per label,
    then micro and macro below a rule; the accuracy with its interval."""
    pct = f"{table.confidence * 100:g}%"
    columns = [
        Column("Label", "left"),
        Column("n", keep=5),
        Column(f"Accuracy [{pct} CI]", keep=6, latex=f"Accuracy [{pct} CI]".replace("%", r"\%")),
        Column("Precision", keep=3),
        Column("Recall", keep=3),
        Column("F1", keep=4),
        Column("Kappa", keep=2, latex=r"$\kappa$"),
    ]
    several = table.n_raters > 1
    if several:
        columns.append(Column("Raters kappa (Fleiss)", keep=1))
    body = []
    for r in [*table.rows, table.micro, table.macro]:
        cells = [r.label, str(r.n), _acc(r), _f(r.precision), _f(r.recall), _f(r.f1), _f(r.kappa)]
        if several:
            cells.append(_f(r.raters_kappa))
        body.append(cells)
    ref = f"majority of {table.n_raters} annotators" if table.n_raters > 1 else "gold labels"
    return Table(
        columns,
        body,
        title=f"Agreement with {ref} ({table.n_items} reports)",
        rules_after=frozenset({len(table.rows) - 1}),
        signature=str(table.signature),
        note="all in --format csv",
    )


def render_csv(table: AgreementTable) -> str:
    """One CSV row per label, then micro and macro; all counts and values, unrounded."""
    fields = list(AgreementRow.model_fields)
    rows: list[list[object]] = [[*fields, "signature"]]
    for r in [*table.rows, table.micro, table.macro]:
        values = r.model_dump()
        rows.append([*(values[k] for k in fields), str(table.signature)])
    return csv_text(rows)


def render_json(table: AgreementTable) -> str:
    data = table.model_dump()
    data["signature"] = str(table.signature)
    return json.dumps(data, indent=2) + "\n"


def render_latex(table: AgreementTable) -> str:
    """A booktabs ``tabular`` (Ran Score tables 2 / 4 layout) with the signature as a comment."""
    return to_latex(agreement_display(table))


# ------------------------------------------------------------------------------------------
# Checks the command makes (the command itself is in cxreval.cli.agree)
# ------------------------------------------------------------------------------------------


def check_ids(pred: pd.DataFrame, gold: Sequence[pd.DataFrame], files: Sequence[Path], pred_file: Path) -> None:
    """Every id must be in the predictions and in each gold file, with every label column."""
    problems: list[InputProblem] = []
    pred_ids = set(pred.index)
    for g, f in zip(gold, files):
        gold_ids = set(g.index)
        for i in sorted(pred_ids - gold_ids):
            problems.append(InputProblem(file=os.fspath(f), id=i, message=f"id in {pred_file} but not in this file"))
        for i in sorted(gold_ids - pred_ids):
            problems.append(InputProblem(file=os.fspath(f), id=i, message=f"id not in {pred_file}"))
        missing = [c for c in pred.columns if c not in g.columns]
        for c in missing:
            problems.append(InputProblem(file=os.fspath(f), field=c, message="label column missing"))
    if problems:
        raise InputError(problems)
