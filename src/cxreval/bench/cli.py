"""``cxreval bench CONFIG.yaml``: run a benchmark and write the page, JSON, CSV and LaTeX tables.

Register with ``app.command("bench")(bench)`` in ``cxreval.cli``. Exit codes: 0 done, 2 bad
input or settings (every problem listed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cxreval.bench.models import BenchmarkResult, Leaderboard

_out = Console()
if not _out.is_terminal:
    _out = Console(width=160)
_err = Console(stderr=True)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_leaderboard(result: BenchmarkResult, lb: Leaderboard, console: Console | None = None) -> None:
    """A terminal table of one leaderboard: rank interval and each metric's value [CI]."""
    console = console or _out
    info = {m.name: m for m in result.metrics}
    title = f"{result.name}: {lb.dataset} / {lb.stratum} ({lb.n_pairs} studies), ranked by {lb.rank_by}"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("rank")
    table.add_column("system")
    for m in result.metrics:
        table.add_column(escape(f"{m.label} {'↑' if m.higher_is_better else '↓'}"), justify="right")
    for r in lb.rows:
        rank = f"{r.rank}" if r.rank_low == r.rank_high else f"{r.rank} ({r.rank_low}-{r.rank_high})"
        cells = []
        for name in info:
            iv = r.metrics.get(name)
            if iv is None or iv.value is None:
                cells.append("n/a")
            elif iv.low is None or name != lb.rank_by:
                cells.append(_fmt(iv.value))
            else:
                cells.append(f"{_fmt(iv.value)} [{_fmt(iv.low)}, {_fmt(iv.high)}]")
        table.add_row(rank, escape(r.system + (" (baseline)" if r.baseline else "")), *cells)
    console.print(table)


def bench(
    config: Annotated[Path, typer.Argument(help="benchmark YAML (datasets, systems, metrics, engine)")],
    out: Annotated[Optional[Path], typer.Option("--out", help="output folder (default: the config's out)")] = None,
    resamples: Annotated[Optional[int], typer.Option("--resamples", min=0, help="bootstrap resamples (override)")] = None,
    html: Annotated[bool, typer.Option("--html/--no-html", help="write report.html")] = True,
) -> None:
    """Score systems on datasets, rank them with bootstrap intervals, and write the report."""
    from cxreval.bench.config import load_config
    from cxreval.bench.runner import run_benchmark
    from cxreval.bench.tables import write_tables
    from cxreval.io import InputError
    from cxreval.metrics import MetricUnavailable, UnknownMetric

    try:
        cfg = load_config(config)
        if resamples is not None:
            cfg = cfg.model_copy(update={"bootstrap": cfg.bootstrap.model_copy(update={"resamples": resamples})})
        out_dir = out if out is not None else cfg.out
        result, stats = run_benchmark(cfg, out_dir, log=lambda m: _err.print(escape(m)))
    except InputError as exc:
        _err.print(escape(str(exc)))
        raise typer.Exit(2) from None
    except (UnknownMetric, MetricUnavailable, ValueError) as exc:
        _err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    paths = write_tables(result, out_dir)
    for d in result.datasets:
        try:
            print_leaderboard(result, result.leaderboard(d, "all"))
        except KeyError:
            continue
    if html:
        t = time.perf_counter()
        try:
            from cxreval.report import write_html
        except ImportError:
            _err.print("report.html skipped: cxreval.report is not available")
        else:
            page = write_html(result, Path(out_dir) / "report.html")
            _out.print(f"page: {page} ({time.perf_counter() - t:.1f} s)")
    _out.print(
        f"{stats.pairs:,} pairs: {stats.judged:,} judged now, {stats.judgement_hits:,} from the cache"
        + (f", {stats.failed:,} failed" if stats.failed else "")
        + f"; {result.timings.get('total', 0):.1f} s")
    _out.print(f"wrote {paths['json']}, CSV and LaTeX tables in {out_dir}")
