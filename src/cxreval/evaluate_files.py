"""Files in, results folders out: what ``cxreval evaluate`` does, for Python users too.

:func:`evaluate_files` reads the input (one pairs file, two files joined on id, or the packaged
example), chooses how the pairs are judged, and writes one results folder, or one folder per
system for long-format input (``systems/<name>/`` and ``systems.csv``). The three ways, with the
same files either way:

- the rule engine over a file it can cut (CSV, TSV, JSONL): workers read, check and judge their own
  byte ranges (:func:`cxreval.streaming.evaluate_file`);
- the rule engine otherwise (standard input, ReXrank JSON, two files joined, Ray): pairs stream
  through it in order (:func:`cxreval.streaming.evaluate_systems_to`);
- the LLM engines, or several runs: the whole list, run by run
  (:meth:`cxreval.evaluate.Evaluator.evaluate_runs`).

The command line adds only its options, its printing and its exit codes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_validator

from cxreval.io import FORMATS, InputError, InputProblem, PairStream, ReportPair, read_pair_files, read_pairs
from cxreval.literals import DatasetLayout, OnMissing

if TYPE_CHECKING:
    from cxreval.evaluate import EvaluationResult, EvaluationScores, Evaluator
    from cxreval.io.writers import OutputRun
    from cxreval.judge.files import RowsFormat

#: Every file suffix whose format is known (``--format`` applies to the others).
SUFFIXES = {sfx for suffixes in FORMATS.values() for sfx in suffixes}


def example_path() -> Path:
    """The small example pairs file shipped inside the package."""
    return Path(str(resources.files("cxreval.examples") / "example_pairs.csv"))


class FilesInput(BaseModel):
    """Where the pairs come from, and which columns hold what (the ``cxreval evaluate`` input options).

    Exactly one source: ``pairs`` (one file; ``-`` is standard input), ``refs`` with ``cands``
    (joined on id), or ``example``. Columns left None take their defaults (``id``, ``reference``,
    ``candidate``; a ReXrank JSON references file: ``section``, ``model_prediction``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pairs: Path | None = None
    refs: Path | None = None
    cands: Path | None = None
    example: bool = False
    format: str | None = None
    id_col: str | None = None
    ref_id_col: str | None = None
    cand_id_col: str | None = None
    reference_col: str | None = None
    candidate_col: str | None = None
    system_col: str | None = None
    meta_cols: list[str] = []
    section: str | None = None
    refs_layout: DatasetLayout | None = None
    """``refs`` is a public dataset in its own layout (:mod:`cxreval.io.datasets`): a pool of references."""
    on_missing: OnMissing = "error"
    """Two files: an id in one only stops the run (``error``) or is left out, counted (``skip``)."""

    @model_validator(mode="after")
    def _one_source(self) -> FilesInput:
        sources = sum([self.pairs is not None, self.refs is not None or self.cands is not None, self.example])
        if sources != 1:
            raise ValueError("give exactly one input: --pairs FILE, or --refs FILE --cands FILE, or --example")
        if (self.refs is None) != (self.cands is None):
            raise ValueError("--refs and --cands go together")
        two_file_only = self.ref_id_col or self.cand_id_col or self.section or self.refs_layout or self.on_missing != "error"
        if two_file_only and self.refs is None:
            raise ValueError(
                "--ref-id-col, --cand-id-col, --section, --refs-layout and --on-missing apply to two-file input (--refs, --cands)"
            )
        if str(self.refs) == "-" and str(self.cands) == "-":
            raise ValueError("only one of --refs and --cands can be - (standard input)")
        from cxreval.judge.models import ERROR_KINDS

        clash = sorted(set(self.meta_cols) & {"pair_id", "errors", "lookalikes", *ERROR_KINDS})
        if clash:
            raise ValueError(
                f"--meta-col {', '.join(clash)}: errors.csv already has a column of that name; rename the column in your file"
            )
        return self

    @property
    def source(self) -> Path | None:
        """The one pairs file (``pairs``, or the example), or None for two files."""
        return example_path() if self.example else self.pairs

    def stream(self) -> PairStream:
        """The one pairs file as a :class:`~cxreval.io.PairStream` (read as it is judged)."""
        assert self.source is not None
        return PairStream(self.source, **self._columns())

    def read(self) -> list[ReportPair]:
        """Every pair, read and checked (each problem named with its file, row and field)."""
        if self.source is not None:
            return read_pairs(self.source, **self._columns())
        assert self.refs is not None and self.cands is not None
        ref_fmt, cand_fmt = formats_of(self.format, self.refs, self.cands)
        return read_pair_files(
            self.refs,
            self.cands,
            id_col=self.id_col,
            ref_id_col=self.ref_id_col,
            cand_id_col=self.cand_id_col,
            reference_col=self.reference_col,
            candidate_col=self.candidate_col,
            reference_format=ref_fmt,
            candidate_format=cand_fmt,
            section=self.section,
            meta_cols=self.meta_cols,
            system_col=self.system_col,
            on_missing=self.on_missing,
            reference_layout=self.refs_layout,
        )

    def _columns(self) -> dict[str, Any]:
        return dict(
            id_col=self.id_col or "id",
            reference_col=self.reference_col or "reference",
            candidate_col=self.candidate_col or "candidate",
            meta_cols=self.meta_cols,
            system_col=self.system_col,
            format=self.format,
        )


@dataclass
class FilesOutcome:
    """What :func:`evaluate_files` wrote: each system's scores (one per run; the system is None for
    input without a system column), and each system's number of pairs."""

    systems: list[tuple[str | None, Sequence[EvaluationScores]]] = field(default_factory=list)
    counts: dict[str | None, int] = field(default_factory=dict)

    @property
    def scores(self) -> list[EvaluationScores]:
        """Every run's scores of every system, in order."""
        return [r for _, results in self.systems for r in results]


def evaluate_files(
    source: FilesInput,
    out: str | Path,
    evaluator: Evaluator,
    *,
    runs: int = 1,
    rows: RowsFormat | None = None,
    progress: bool | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    outputs: OutputRun | None = None,
) -> FilesOutcome:
    """Judge the pairs of ``source`` with ``evaluator`` and write the results under ``out``.

    ``out`` is checked before anything is read (:func:`cxreval.io.writers.check_out_dir`); the files
    replace an earlier run's only when all are written (``outputs``: the caller's run, to learn
    what was kept when interrupted). ``runs``: independent runs (``run-i`` folders and
    ``runs.json``). ``executor`` / ``ray_address``: where the rule engine judges (``"ray"``
    judges on Ray actors). Raises :class:`~cxreval.io.InputError` for a bad input,
    :class:`~cxreval.io.writers.OutputError` for a folder it may not write, ``ValueError`` for
    settings that do not go together, and :class:`~cxreval.ray_executor.RayUnavailable`."""
    from cxreval.io.writers import OutputRun, check_out_dir
    from cxreval.judge.files import RowsFormat

    out = Path(out)
    on_ray = check_executor(evaluator.engine, executor, ray_address, runs)
    check_out_dir(out)
    rows = rows or RowsFormat.choose()
    streams = (
        evaluator.engine == "rules"
        and runs == 1
        and source.source is not None
        and PairStream.streams(source.source, source.format)
    )
    if streams and not on_ray:  # workers read, check and judge the file's byte ranges
        job = _FileJob(source.stream(), planned=True)
    elif streams:
        stream = source.stream()
        stream.check()  # on Ray, this process reads the file: checked whole first
        job = _FileJob(stream)
    else:
        job = _FileJob(pairs=source.read())
    if not job.planned and not sum(job.counts.values()):
        where = source.source if source.source is not None else source.cands
        raise InputError([InputProblem(file=str(where), message="the input holds no pairs")])
    return _write(job, out, evaluator, source, runs, rows, progress, on_ray, ray_address, outputs or OutputRun())


def check_executor(engine: str, executor: str, ray_address: str | None, runs: int) -> bool:
    """Whether a run of ``engine`` judges on Ray; ValueError for settings that do not go together,
    and :class:`~cxreval.ray_executor.RayUnavailable` when Ray is asked for and not installed."""
    if ray_address is not None and executor == "local":
        raise ValueError("--ray-address applies to --executor ray")
    on_ray = executor == "ray" or ray_address is not None
    if on_ray and engine != "rules":
        raise ValueError(f"--executor ray applies to the rule engine; --engine {engine} judges in this process")
    if on_ray and runs != 1:
        raise ValueError("--executor ray applies to one run (--runs 1); the rule engine gives the same judgements every run")
    if on_ray:
        from cxreval.ray_executor import import_ray

        import_ray()
    return on_ray


@dataclass
class _FileJob:
    """The input as read: a stream of one file (``planned``: workers read its byte ranges, and the
    counts come at the end), or the whole list of pairs."""

    stream: PairStream | None = None
    pairs: list[ReportPair] = field(default_factory=list)
    planned: bool = False
    #: The whole list's pairs of each system, in order of first appearance (empty for a stream).
    groups: dict[str | None, list[ReportPair]] = field(init=False)
    #: Each system's number of pairs (empty for a planned file: they come at the end).
    counts: dict[str | None, int] = field(init=False)

    def __post_init__(self) -> None:
        self.groups = by_system(self.pairs) if self.stream is None else {}
        if self.stream is not None:
            self.counts = {} if self.planned else dict(self.stream.systems)
        else:
            self.counts = {s: len(g) for s, g in self.groups.items()}


def _write(
    job: _FileJob,
    out: Path,
    evaluator: Evaluator,
    source: FilesInput,
    runs: int,
    rows: RowsFormat,
    progress: bool | None,
    on_ray: bool,
    ray_address: str | None,
    run: OutputRun,
) -> FilesOutcome:
    """Judge ``job`` and write its folders in ``run`` (committed when every file is written)."""
    from cxreval.io.writers import SYSTEMS_DIR, SystemFolders

    system_col = source.system_col
    counts = job.counts
    folders: Mapping[str | None, Path] = {None: out} if system_col is None else SystemFolders(out, counts)
    outcome = FilesOutcome(counts=counts)
    with run:
        if system_col:  # the folders above the systems' are the run's from the start (an interruption records them)
            run.folder(out).add(SYSTEMS_DIR)
            run.folder(out / SYSTEMS_DIR)
        if job.planned:
            _judge_file(job, folders, evaluator, system_col is not None, progress, run, rows, outcome)
        elif job.stream is not None or (evaluator.engine == "rules" and runs == 1):
            from cxreval.streaming import evaluate_systems_to

            scores = evaluate_systems_to(
                evaluator,
                folders,
                job.stream if job.stream is not None else job.pairs,
                total=sum(counts.values()),
                progress=progress,
                by_system=system_col is not None,
                executor="ray" if on_ray else "local",
                ray_address=ray_address,
                expected=counts,
                check_unique=False,  # the readers checked ids
                outputs=run,
                rows=rows,
            )
            outcome.systems += [(system, [scores[system]]) for system in counts]
        else:
            for system, group in job.groups.items():
                results = evaluator.evaluate_runs(group, runs=runs, progress=progress)
                _stage_runs(results, run, folders[system], rows)
                outcome.systems.append((system, results))
        if system_col:
            _stage_systems(outcome.systems, out, run)
    return outcome


def _judge_file(
    job: _FileJob,
    folders: Mapping[str | None, Path],
    evaluator: Evaluator,
    by_system: bool,
    progress: bool | None,
    run: OutputRun,
    rows: RowsFormat,
    outcome: FilesOutcome,
) -> None:
    """The rule engine's workers over the byte ranges of one file; a bad input leaves no results folder."""
    from cxreval.engines import RulesEngine
    from cxreval.io.writers import OutputError
    from cxreval.streaming import evaluate_file

    engine = evaluator.judge_engine
    assert isinstance(engine, RulesEngine) and job.stream is not None
    try:
        scores = evaluate_file(
            engine,
            job.stream,
            folders if by_system else folders[None],
            workers=engine.workers,
            progress=progress,
            outputs=run,
            rows=rows,
        )
    except (InputError, OutputError):
        run.discard()  # a bad input leaves no results folder behind, as a check first would
        raise
    outcome.systems += [(system, [scores[system]]) for system in scores]
    outcome.counts.update({system: scores[system].n_pairs for system in scores})


def formats_of(fmt: str | None, *files: Path) -> list[str | None]:
    """The format given for each input file: the files whose suffix does not tell (``-`` included)
    take it; when every file's suffix tells, every file takes it (the user overrides them all)."""
    if fmt is None:
        return [None] * len(files)
    untold = [str(f) == "-" or f.suffix.lower() not in SUFFIXES for f in files]
    if not any(untold):
        return [fmt] * len(files)
    return [fmt if u else None for u in untold]


def by_system(pairs: list[ReportPair]) -> dict[str | None, list[ReportPair]]:
    """Long-format pairs grouped by system, systems in order of first appearance."""
    groups: dict[str | None, list[ReportPair]] = {}
    for p in pairs:
        groups.setdefault(p.system, []).append(p)
    return groups


def _stage_runs(results: list[EvaluationResult], run: OutputRun, folder: Path, rows: RowsFormat) -> None:
    """One run: its files in ``folder``; several: ``run-i`` folders and ``runs.json``. They replace
    the earlier run's when ``run`` commits, which removes what that one wrote and this one does not."""
    from cxreval.evaluate import summarize_runs

    top = run.folder(folder)
    if len(results) == 1:
        results[0].write_to(top, rows=rows.style, parquet=rows.parquet)
        return
    for r in results:
        r.write_to(run.folder(folder / f"run-{r.run}"), rows=rows.style, parquet=rows.parquet)
    top.write_text("runs.json", json.dumps(summarize_runs(results), indent=2) + "\n", last=True)


def _stage_systems(outcomes: list[tuple[str | None, Sequence[EvaluationScores]]], out: Path, run: OutputRun) -> None:
    """``systems.csv``, put in place last when the run commits (``out/systems``, in the run from its
    start, records the systems' folders then)."""
    from cxreval.evaluate import systems_frame
    from cxreval.io.writers import frame_rows, write_csv

    with run.folder(out).writer("systems.csv", newline="", last=True) as fh:
        write_csv(fh, frame_rows(systems_frame({str(s): results for s, results in outcomes})))
