"""``cxreval bench CONFIG.yaml``: run a benchmark and write the page, JSON, CSV and LaTeX tables.

Register with ``app.command("bench")(bench)`` in ``cxreval.cli``. Exit codes: 0 done, 2 bad
input or settings (every problem listed, before any judging), 4 pairs left unjudged by an LLM
engine (results written; those systems are scored on fewer studies), 130 interrupted (Ctrl-C;
what was judged is cached and a rerun resumes), 143 the same for SIGTERM.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cxreval.bench.models import BenchmarkResult, Leaderboard
from cxreval.cli.common import (
    EXIT_INPUT,
    EXIT_UNSCORED,
    err_console,
    interrupt_code,
    sigterm_as_interrupt,
)

if TYPE_CHECKING:
    from cxreval.bench.config import BenchConfig
    from cxreval.bench.runner import RunStats

_out = Console()
if not _out.is_terminal:
    _out = Console(width=160)
_err = err_console


def print_leaderboard(result: BenchmarkResult, lb: Leaderboard, console: Console | None = None) -> None:
    """One leaderboard fitted to the console as evaluate's tables are (:func:`cxreval.bench.tables.leaderboard_table`)."""
    from cxreval.bench.tables import leaderboard_table
    from cxreval.render import print_table

    print_table(leaderboard_table(result, lb), console or _out)


class _Bars:
    """Rich progress bars on stderr, one per runner stage ("judging", "metric bleu2"), fed by
    ``Runner(progress=...)``; a no-op unless ``show`` (forced onto a pipe when asked for).
    Messages go through ``console`` so that they print above the bars."""

    def __init__(self, show: bool) -> None:
        self.console = Console(stderr=True, force_terminal=True) if show and not _err.is_terminal else _err
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            disable=not show,
        )
        self.tasks: dict[str, TaskID] = {}

    def log(self, message: str) -> None:
        self.console.print(escape(message))

    def warn(self, message: str) -> None:
        """A warning the user must not miss (e.g. a system whose reports are the references)."""
        self.console.print(f"[bold yellow]warning: {escape(message)}[/bold yellow]", soft_wrap=True, highlight=False)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)


def _interrupted(exc: KeyboardInterrupt, cache: Path | None, answers: Path | None = None) -> None:
    """The one line Ctrl-C prints: what is kept (judged pairs; with an LLM engine, its finished
    answers too) and how to resume."""
    from cxreval.bench.cache import BenchCache
    from cxreval.bench.runner import Interrupted

    llm = f"; finished LLM answers are kept in {escape(str(answers))}" if answers is not None else ""
    if isinstance(exc, Interrupted):
        cache, cached = exc.cache, exc.cached
    elif cache is not None and cache.is_file():
        with BenchCache(cache) as db:
            cached = db.count()
    else:
        _err.print(
            f"interrupted before any pair was judged{llm or '; nothing was cached'}; rerun the same command to resume",
            soft_wrap=True,
        )
        return
    _err.print(
        f"interrupted: {cached} judged pairs are cached in {escape(str(cache))}{llm}; rerun the same command to resume",
        soft_wrap=True,
    )


def _answer_store(cfg: BenchConfig) -> Path | None:
    """The LLM answer store of an LLM engine's settings (None for the rule engine or bad settings)."""
    if cfg.engine.name == "rules" or cfg.engine.llm is None:
        return None
    from cxreval.llm.config import LLMConfig, LLMConfigError

    try:
        return LLMConfig.from_settings(cfg.engine.llm).resolved_cache_path()
    except LLMConfigError:
        return None


def bench(
    config: Annotated[Path, typer.Argument(metavar="CONFIG", help="benchmark YAML (datasets, systems, metrics, engine)")],
    out: Annotated[Path | None, typer.Option("--out", metavar="DIR", help="output folder (default: the config's out)")] = None,
    resamples: Annotated[
        int | None, typer.Option("--resamples", min=0, metavar="N", help="bootstrap resamples (override)")
    ] = None,
    html: Annotated[bool, typer.Option("--html/--no-html", help="write report.html")] = True,
    no_text: Annotated[
        bool,
        typer.Option(
            "--no-text",
            help="no report text (example sentences, quoted cues) in report.html or result.json, to share them; "
            "cache.sqlite still holds evidence sentences",
        ),
    ] = False,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="progress bars on stderr (default: when stderr is a terminal)")
    ] = None,
) -> None:
    """Score systems on datasets, rank them with bootstrap intervals, and write the report."""
    bars = _Bars(_err.is_terminal if progress is None else progress)
    stores: dict[str, Path | None] = {"cache": None, "answers": None}  # what an interruption names
    try:
        with sigterm_as_interrupt():
            result, stats, out_dir = _run(config, out, resamples, bars, stores)
            _write_outputs(result.without_text() if no_text else result, stats, out_dir, html)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        _interrupted(exc, stores["cache"], stores["answers"])
        raise typer.Exit(interrupt_code(exc)) from None
    if stats.failed:
        # an LLM engine left pairs unjudged: each system is scored on the pairs it got, so systems
        # with failures are ranked on fewer studies than the others (their n shows it); like
        # cxreval evaluate, say so with exit code 4 rather than present a full leaderboard
        _err.print(
            f"[bold red]unscored:[/] {stats.failed:,} pairs were not judged (LLM answers that stayed "
            "invalid); the systems concerned are scored on fewer studies (see n). Rerun to retry them.",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(EXIT_UNSCORED)


def _run(
    config: Path, out: Path | None, resamples: int | None, bars: _Bars, stores: dict[str, Path | None]
) -> tuple[BenchmarkResult, RunStats, Path]:
    """Load the config and run the benchmark; bad input or settings end the command (exit 2).
    ``stores`` gets the judgement cache and LLM answer store as soon as they are known."""
    from cxreval.bench.config import load_config
    from cxreval.bench.runner import SetupError, run_benchmark
    from cxreval.io import InputError
    from cxreval.metrics import MetricUnavailable, UnknownMetric

    try:
        cfg = load_config(config)
        if resamples is not None:
            cfg = cfg.model_copy(update={"bootstrap": cfg.bootstrap.model_copy(update={"resamples": resamples})})
        out_dir = Path(out if out is not None else cfg.out)
        stores["cache"] = out_dir / "cache.sqlite"
        stores["answers"] = _answer_store(cfg)
        with bars.bar:
            result, stats = run_benchmark(cfg, out, log=bars.log, warn=bars.warn, progress=bars)
    except InputError as exc:
        _err.print(escape(str(exc)), soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    except SetupError as exc:
        for line in exc.problems:
            _err.print(f"[bold red]error:[/] {escape(line)}", soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    except (UnknownMetric, MetricUnavailable, ValueError) as exc:
        _err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    return result, stats, out_dir


def _write_outputs(result: BenchmarkResult, stats: RunStats, out_dir: Path, html: bool) -> None:
    """Tables and the page, put in place together (an interruption leaves the earlier ones whole),
    then the terminal leaderboards."""
    from cxreval.bench.tables import write_tables
    from cxreval.io.writers import OutputRun

    page_s: float | None = None
    with OutputRun("bench") as run:
        paths = write_tables(result, out_dir, run)
        if html:
            t = time.perf_counter()
            try:
                from cxreval.page import render_html
            except ImportError:
                _err.print("report.html skipped: cxreval.page is not available")
            else:
                run.folder(out_dir).write_text("report.html", render_html(result))
                page_s = time.perf_counter() - t
    for d in result.datasets:
        try:
            print_leaderboard(result, result.leaderboard(d, "all"))
        except KeyError:
            continue
    if page_s is not None:
        _out.print(f"page: {out_dir / 'report.html'} ({page_s:.1f} s)")
    _out.print(
        f"{stats.pairs:,} pairs: {stats.judged:,} judged now, {stats.judgement_hits:,} from the cache"
        + (f", {stats.failed:,} failed" if stats.failed else "")
        + f"; {result.timings.get('total', 0):.1f} s"
    )
    _out.print(f"wrote {paths['json']}, CSV and LaTeX tables in {out_dir}")
    if not result.has_text:
        _out.print(
            "no report text in report.html, result.json or the tables; the judgement cache "
            f"{escape(str(out_dir / 'cache.sqlite'))} holds evidence sentences: do not share it",
            highlight=False,
            soft_wrap=True,
        )
