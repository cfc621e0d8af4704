"""Tables from a :class:`BenchmarkResult`: JSON, CSV (long form), LaTeX and Markdown leaderboards.

Undefined values are empty cells in CSV, ``n/a`` in LaTeX and Markdown (never zero). The files
of one run replace the earlier run's together (:class:`cxreval.io.writers.OutputRun`), so Ctrl-C never
leaves a truncated table nor a folder mixing two runs; CSV cells never start a spreadsheet formula
(:func:`cxreval.io.writers.write_csv`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cxreval.bench.models import BenchmarkResult, Interval, Leaderboard
from cxreval.io.writers import OutputManifest, OutputRun, write_csv
from cxreval.render import Cell, CellValue, Column, Table, latex_escape, number, to_latex, to_markdown


def _num(x: float | None, digits: int = 4) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _cell(iv: Interval | None, digits: int = 3) -> CellValue:
    if iv is None or iv.value is None:
        return "n/a"
    if iv.low is None or iv.high is None:
        return number(iv.value, digits)
    low, value, high = (number(v, digits) for v in (iv.low, iv.value, iv.high))
    return Cell(f"{value} [{low}, {high}]", f"{value} {{\\scriptsize [{low}, {high}]}}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def _write_csv(folder: OutputManifest, name: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    with folder.writer(name, newline="") as fh:
        write_csv(fh, [header, *rows])
    return folder.folder / name


def _rank_text(row_rank: int, low: int, high: int) -> str:
    return f"{row_rank}" if low == high else f"{row_rank} ({low}-{high})"


def _leaderboard_table(
    result: BenchmarkResult, lb: Leaderboard, metrics: Sequence[str] | None, digits: int, *, with_n: bool = True
) -> Table:
    """One leaderboard as a table: rank (interval), system, n (``with_n``), each metric with its CI."""
    names = list(metrics) if metrics is not None else [m.name for m in result.metrics]
    info = {m.name: m for m in result.metrics}
    columns = [Column("rank (95 % interval)", "left", latex="Rank"), Column("system", "left", latex="System")]
    columns += [Column("n")] if with_n else []
    for n in names:
        m = info.get(n)
        arrow = "" if m is None else (" ↑" if m.higher_is_better else " ↓")
        tex_arrow = "" if m is None else (r" $\uparrow$" if m.higher_is_better else r" $\downarrow$")
        label = n if m is None else m.label
        columns.append(Column(label + arrow, "center", latex=latex_escape(label) + tex_arrow))
    rows: list[list[CellValue]] = []
    for r in lb.rows:
        rank = _rank_text(r.rank, r.rank_low, r.rank_high)
        rows.append(
            [
                Cell(rank, rank.replace("-", "--")),
                f"{r.system} (baseline)" if r.baseline else r.system,
                *([str(r.n_pairs)] if with_n else []),
                *[_cell(r.metrics.get(n), digits) for n in names],
            ]
        )
    ranked_by = info[lb.rank_by].label if lb.rank_by in info else lb.rank_by
    title = f"{result.name}: {lb.dataset}, {lb.stratum} ({lb.n_pairs} studies), ranked by {ranked_by}; 95 % bootstrap intervals"
    return Table(columns, rows, title=title, note="all in leaderboards.csv")


def leaderboard_markdown(result: BenchmarkResult, lb: Leaderboard, metrics: Sequence[str] | None = None, digits: int = 3) -> str:
    """A Markdown table of one leaderboard: rank (interval), system, each metric with its CI."""
    return to_markdown(_leaderboard_table(result, lb, metrics, digits))


def leaderboard_latex(result: BenchmarkResult, lb: Leaderboard, metrics: Sequence[str] | None = None, digits: int = 3) -> str:
    """A booktabs LaTeX table of one leaderboard (value and 95 % CI per metric)."""
    return to_latex(_leaderboard_table(result, lb, metrics, digits, with_n=False), float_env=True)


def leaderboard_table(result: BenchmarkResult, lb: Leaderboard) -> Table:
    """The terminal's table of one leaderboard: rank interval, the ranking metric's value [CI] and
    the other metrics' values; on a narrow terminal the metrics after the ranking one are dropped
    first (named in the caption) and the system's name is shortened last."""
    info = {m.name: m for m in result.metrics}
    title = f"{result.name}: {lb.dataset} / {lb.stratum} ({lb.n_pairs} studies), ranked by {lb.rank_by}"
    columns = [Column("system", "left"), Column("rank", "left", keep=len(info) + 2)]
    for k, m in enumerate(result.metrics):
        keep = len(info) + 1 if m.name == lb.rank_by else len(info) - k
        columns.append(Column(f"{m.label} {'↑' if m.higher_is_better else '↓'}", keep=keep))
    rows = []
    for r in lb.rows:
        cells = []
        for name in info:
            iv = r.metrics.get(name)
            if iv is None or iv.value is None:
                cells.append("n/a")
            elif iv.low is None or iv.high is None or name != lb.rank_by:
                cells.append(number(iv.value))
            else:
                cells.append(f"{number(iv.value)} [{number(iv.low)}, {number(iv.high)}]")
        rank = _rank_text(r.rank, r.rank_low, r.rank_high)
        rows.append([r.system + (" (baseline)" if r.baseline else ""), rank, *cells])
    return Table(columns, rows, title=title, note="all in leaderboards.csv")


def write_tables(result: BenchmarkResult, out_dir: str | Path, run: OutputRun | None = None) -> dict[str, Path]:
    """``result.json``, long-form CSVs and one LaTeX file per leaderboard, in ``out_dir``.

    ``run``: the run they belong to (committed by the caller, with files of its own such as
    ``report.html``); None: they are put in place when this returns.
    """
    if run is None:
        with OutputRun("bench") as own:
            return write_tables(result, out_dir, own)
    out = Path(out_dir)
    folder = run.folder(out)
    folder.write_text("result.json", result.model_dump_json(indent=1) + "\n", last=True)
    paths: dict[str, Path] = {"json": out / "result.json"}
    lb_rows = []
    for lb in result.leaderboards:
        for r in lb.rows:
            for m, iv in r.metrics.items():
                lb_rows.append(
                    [
                        lb.dataset,
                        lb.stratum,
                        lb.rank_by,
                        r.system,
                        int(r.baseline),
                        r.rank,
                        r.rank_low,
                        r.rank_high,
                        r.n_pairs,
                        r.n_failed,
                        m,
                        _num(iv.value, 6),
                        _num(iv.low, 6),
                        _num(iv.high, 6),
                    ]
                )
    paths["leaderboards"] = _write_csv(
        folder,
        "leaderboards.csv",
        [
            "dataset",
            "stratum",
            "rank_by",
            "system",
            "baseline",
            "rank",
            "rank_low",
            "rank_high",
            "n_pairs",
            "n_failed",
            "metric",
            "value",
            "low",
            "high",
        ],
        lb_rows,
    )
    paths["entities"] = _write_csv(
        folder,
        "entities.csv",
        [
            "dataset",
            "system",
            "entity",
            "name",
            "group",
            "critical",
            "tp",
            "fp",
            "fn",
            "precision",
            "recall",
            "f1",
            "location_acc",
            "severity_acc",
            "comparison_acc",
            "location_errors",
            "severity_errors",
            "comparison_errors",
            "example_pairs",
        ],
        [
            [
                e.dataset,
                e.system,
                e.entity,
                e.name,
                e.group,
                int(e.critical),
                e.tp,
                e.fp,
                e.fn,
                _num(e.precision),
                _num(e.recall),
                _num(e.f1),
                _num(e.location_acc),
                _num(e.severity_acc),
                _num(e.comparison_acc),
                e.location_errors,
                e.severity_errors,
                e.comparison_errors,
                " ".join(f"{x.kind}:{x.pair_id}" for x in e.examples),
            ]
            for e in result.entities
        ],
    )
    paths["groups"] = _write_csv(
        folder,
        "groups.csv",
        [
            "dataset",
            "system",
            "group",
            "name",
            "support",
            "precision",
            "recall",
            "f1",
            "location_acc",
            "severity_acc",
            "comparison_acc",
        ],
        [
            [
                g.dataset,
                g.system,
                g.group,
                g.name,
                g.support,
                _num(g.precision),
                _num(g.recall),
                _num(g.f1),
                _num(g.location_acc),
                _num(g.severity_acc),
                _num(g.comparison_acc),
            ]
            for g in result.groups
        ],
    )
    paths["sites"] = _write_csv(
        folder,
        "sites.csv",
        ["dataset", "site", "system", "metric", "value", "rank", "n_pairs"],
        [
            [s.dataset, s.site, s.system, s.metric, _num(s.value, 6), "" if s.rank is None else s.rank, s.n_pairs]
            for s in result.sites
        ],
    )
    paths["correlations"] = _write_csv(
        folder,
        "correlations.csv",
        ["dataset", "method", "n", "metric_a", "metric_b", "value"],
        [
            [c.dataset, c.method, c.n, a, b, _num(c.matrix[i][j])]
            for c in result.correlations
            for i, a in enumerate(c.metrics)
            for j, b in enumerate(c.metrics)
        ],
    )
    tex = run.folder(out / "latex")
    md = []
    for lb in result.leaderboards:
        tex.write_text(f"leaderboard_{_slug(lb.dataset)}_{_slug(lb.stratum)}.tex", leaderboard_latex(result, lb))
        md.append(
            f"### {lb.dataset}: {lb.stratum} ({lb.n_pairs} studies), ranked by {lb.rank_by}\n\n"
            + leaderboard_markdown(result, lb)
            + "\n"
        )
    paths["latex"] = tex.folder
    paths["markdown"] = out / "leaderboards.md"
    folder.write_text("leaderboards.md", "\n".join(md))
    return paths
