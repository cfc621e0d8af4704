"""Evaluation in bounded memory: pairs pass through in chunks, are judged, written and summed.

``cxreval evaluate`` with the rule engine goes this way. Each chunk of pairs is judged by an
executor (:mod:`cxreval.executors`: this process, local processes or Ray actors, whose workers
also render their chunk's rows), its judgement rows and error counts are appended to
``judgements.jsonl.gz`` and ``errors.csv`` as they come, and only the additive
:class:`~cxreval.scores.spec_tables.SpecTotals` and the texts' fingerprints are kept. So memory does not
grow with the number of pairs, and the files and scores hold what
:meth:`cxreval.evaluate.EvaluationResult.save` writes for the whole input
(``tests/test_streaming.py`` compares them).

The files are written beside the earlier run's under partial names (``errors.csv.partial``) and
replace them only when the whole run is complete (:class:`~cxreval.io.writers.OutputRun`), so an
interrupted run leaves the earlier results whole.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cxreval.engines import PARALLEL_MIN_PAIRS, RulesEngine, progress_iter
from cxreval.evaluate import (
    PROGRESS_MIN_PAIRS,
    EvaluationScores,
    Evaluator,
    errors_table,
    pair_lookalikes,
    warn_lookalikes,
)
from cxreval.executors import Executor
from cxreval.executors import executor as make_executor
from cxreval.io import (
    ChunkCensus,
    InputError,
    InputProblem,
    PairChunk,
    PairStream,
    ReportPair,
    warn_copied_counts,
)
from cxreval.io.writers import (
    OutputManifest,
    OutputRun,
    csv_text,
    frame_rows,
    process_alive,
    sigterm_raises,
)
from cxreval.judge.files import (
    JUDGEMENTS,
    JUDGEMENTS_PARQUET,
    ParquetRows,
    RowsFormat,
    encode_rows,
    rows_arrow,
    write_arrow,
)
from cxreval.judge.table import JudgementTable
from cxreval.literals import EXECUTORS
from cxreval.scores.fingerprint import fingerprint_hex, reference_digest
from cxreval.scores.spec_tables import SpecTotals
from cxreval.scores.statistics import TableStatistics

if TYPE_CHECKING:
    from cxreval.ontology import Ontology
    from cxreval.scores import Signature

#: Pairs judged as one chunk (one task of a worker).
CHUNK_PAIRS = 1_000
#: The files a streamed evaluation writes into each folder, ``scores.json`` last (and
#: ``judgements.parquet`` where its :class:`~cxreval.judge.files.RowsFormat` asks).
FILES = (JUDGEMENTS, "errors.csv", "scores.json")

#: One pair as a chunk carries it: id, reference, candidate, kept input columns.
PairItem = tuple[str, str, str, dict[str, str]]


@dataclass(frozen=True)
class JudgedChunk:
    """What one chunk of pairs adds to a results folder."""

    n_pairs: int
    judgements: bytes
    """The chunk's rows of ``judgements.jsonl.gz`` (one gzip member)."""
    errors_header: str
    """``errors.csv``'s header for these columns (written once, before the first chunk's rows)."""
    errors: str
    """The chunk's rows of ``errors.csv``."""
    totals: SpecTotals
    reference_digests: int
    """Sum of the chunk's :func:`~cxreval.scores.fingerprint.reference_digest` values."""
    candidate_digests: int = 0
    """The same of its (pair id, candidate) pairs (``candidates_sha256``)."""
    lookalike_pairs: int = 0
    """Pairs of the chunk whose reports hold look-alike letters (warned about once per run)."""
    judgements_file: str | None = None
    """Where the worker wrote the chunk's rows of ``judgements.jsonl.gz`` (then ``judgements`` is
    empty): the bulk of the results never passes through the parent, which appends the file."""
    errors_file: str | None = None
    """The same for the chunk's rows of ``errors.csv``."""
    parquet: Any = None
    """The chunk's rows for ``judgements.parquet`` (an Arrow table), when the run writes it."""
    parquet_file: str | None = None
    """Where the worker wrote them instead (Arrow's stream format)."""


def judge_chunk(
    engine: RulesEngine, items: Sequence[PairItem], part: Path | None = None, rows: RowsFormat = RowsFormat()
) -> JudgedChunk:
    """Judge a chunk of pairs with the rule engine and render what it adds to the results in the
    format ``rows`` asks (``part``: write its rows of ``judgements.jsonl.gz``, ``errors.csv`` and
    ``judgements.parquet`` to files of that name with the suffixes ``.jsonl.gz``, ``.csv`` and
    ``.arrow``, not into the result).

    The one function both paths run (this process, or a worker), so they cannot differ.
    """
    pairs = [ReportPair(pair_id=pid, reference=ref, candidate=cand, meta=meta) for pid, ref, cand, meta in items]
    table = engine.judge_here(pairs).table
    totals, errors, _ = SpecTotals.with_tables(table, engine.ontology)
    meta = {p.pair_id: p.meta for p in pairs} if any(p.meta for p in pairs) else {}
    lookalikes = pair_lookalikes(pairs)
    kept = errors_table(errors, meta, lookalikes)
    texts = {p.pair_id: (p.reference, p.candidate) for p in pairs}
    table_rows = table.rows()
    member = encode_rows(table_rows, texts, rows.style)
    arrow = rows_arrow(table_rows, texts, rows.style) if rows.parquet else None
    csv_rows = csv_text(frame_rows(kept, header=False))
    files: dict[str, str] = {}
    if part is not None:  # the worker writes the bulk; the parent appends the files
        files = {
            "judgements": str(part.with_suffix(".jsonl.gz")),
            "errors": str(part.with_suffix(".csv")),
            "parquet": str(part.with_suffix(".arrow")),
        }
        Path(files["judgements"]).write_bytes(member)
        Path(files["errors"]).write_bytes(csv_rows.encode("utf-8"))
        if arrow is not None:
            write_arrow(arrow, files["parquet"])
    return JudgedChunk(
        n_pairs=len(pairs),
        judgements=b"" if part is not None else member,
        judgements_file=files.get("judgements"),
        errors_header=csv_text(frame_rows(kept.iloc[:0])),
        errors="" if part is not None else csv_rows,
        errors_file=files.get("errors"),
        parquet=arrow if part is None else None,
        parquet_file=files.get("parquet") if arrow is not None else None,
        totals=totals,
        reference_digests=sum(reference_digest(p.pair_id, p.reference) for p in pairs),
        candidate_digests=sum(reference_digest(p.pair_id, p.candidate) for p in pairs),
        lookalike_pairs=len(lookalikes),
    )


class ResultWriter:
    """One results folder, filled chunk by chunk (:data:`FILES`) under partial names; :meth:`finish`
    completes it, and the commit of the run that owns ``folder`` puts it in place."""

    def __init__(self, folder: OutputManifest, ontology: Ontology, signature: Signature, rows: RowsFormat = RowsFormat()) -> None:
        self.manifest = folder
        self.folder = folder.folder
        self.ontology = ontology
        self.signature = signature
        self.rows = rows
        self.totals = SpecTotals.empty(ontology)
        self.reference_digests = 0
        self.candidate_digests = 0
        self.lookalike_pairs = 0
        self._judgements = folder.open(JUDGEMENTS, binary=True)
        self._errors = folder.open("errors.csv", newline="")
        self._judgements.close()  # opened per chunk (AtomicFile.append): no descriptor held per folder
        self._errors.close()
        self._parquet: ParquetRows | None = None
        if rows.parquet:
            parquet = folder.open(JUDGEMENTS_PARQUET, binary=True)
            parquet.close()
            self._parquet = ParquetRows(parquet.tmp, folder.scratch(JUDGEMENTS_PARQUET))
        self._header_written = False

    def add(self, chunk: JudgedChunk) -> None:
        """Append a judged chunk's rows and add its totals."""
        if not self._header_written:
            self._errors.append(chunk.errors_header)
            self._header_written = True
        if chunk.judgements_file is not None:
            self._judgements.append_file(chunk.judgements_file)
        else:
            self._judgements.append_bytes(chunk.judgements)
        if chunk.errors_file is not None:
            self._errors.append_file(chunk.errors_file)
        else:
            self._errors.append(chunk.errors)
        if self._parquet is not None:
            if chunk.parquet_file is not None:
                self._parquet.add_file(chunk.parquet_file)
            elif chunk.parquet is not None:
                self._parquet.add(chunk.parquet)
        self.totals = self.totals + chunk.totals
        self.reference_digests += chunk.reference_digests
        self.candidate_digests += chunk.candidate_digests
        self.lookalike_pairs += chunk.lookalike_pairs

    def scores(self) -> EvaluationScores:
        """The scores of every pair added so far."""
        spec = self.totals.scores(self.ontology)
        return EvaluationScores(
            signature=self.signature,
            n_pairs=self.totals.n_pairs,
            entities=spec.entities,
            groups=spec.groups,
            averages=spec.averages,
            error_summary=spec.error_summary,
            ontology=self.ontology,
            block_sums=spec.block_sums,
            references_sha256=fingerprint_hex(self.reference_digests),
            candidates_sha256=fingerprint_hex(self.candidate_digests),
            judgement_rows=self.rows.style,
        )

    def finish(self) -> EvaluationScores:
        """Write ``scores.json`` (under its partial name, like the others); return the scores.
        A ``failures.jsonl`` of an earlier run goes when the run commits (the rule engine fails no pair)."""
        if not self._header_written:  # no pair at all: the header of an empty table
            empty = errors_table(TableStatistics(JudgementTable.empty(), self.ontology).error_table(), {})
            self._errors.append(csv_text(frame_rows(empty)))
            self._header_written = True
        if self._parquet is not None:
            self._parquet.finish()
            self._parquet = None
        warn_lookalikes(self.lookalike_pairs)
        scores = self.scores()
        self.manifest.write_text("scores.json", scores.scores_json(), last=True)
        return scores


def evaluate_to(
    evaluator: Evaluator,
    out_dir: str | Path,
    pairs: Iterable[ReportPair],
    *,
    total: int | None = None,
    progress: bool | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    rows: RowsFormat | None = None,
) -> EvaluationScores:
    """Judge ``pairs`` with ``evaluator`` and write ``judgements.jsonl``, ``errors.csv`` and
    ``scores.json`` into ``out_dir``; return the scores.

    The rule engine streams: ``pairs`` may be any iterable, read once, chunk by chunk, and memory
    stays flat however many there are; the files are those ``evaluator.evaluate(pairs).save()``
    writes. LLM engines judge the whole list, then save. ``total`` (the number of pairs, when
    known) sizes the progress bar and decides whether the rule engine's workers are worth starting.
    ``executor="ray"`` judges the rule engine's chunks on a Ray cluster (see :func:`evaluate_stream`).
    ``rows``: how the judgement rows are written (None: compact, with ``judgements.parquet`` when
    pyarrow is installed; :class:`~cxreval.judge.files.RowsFormat`).

    >>> from cxreval import Evaluator, ReportPair
    >>> import tempfile
    >>> pairs = [ReportPair(pair_id="1", reference="Small left pleural effusion.", candidate="No effusion.")]
    >>> evaluate_to(Evaluator(), tempfile.mkdtemp(), pairs).error_summary.mean
    1.0
    """
    return evaluate_systems_to(
        evaluator,
        {None: Path(out_dir)},
        pairs,
        total=total,
        progress=progress,
        by_system=False,
        executor=executor,
        ray_address=ray_address,
        rows=rows,
    )[None]


def evaluate_systems_to(
    evaluator: Evaluator,
    folders: Mapping[str | None, Path],
    pairs: Iterable[ReportPair],
    *,
    total: int | None = None,
    progress: bool | None = None,
    by_system: bool = True,
    executor: str = "local",
    ray_address: str | None = None,
    expected: Mapping[str | None, int] | None = None,
    check_unique: bool = True,
    outputs: OutputRun | None = None,
    rows: RowsFormat | None = None,
) -> dict[str | None, EvaluationScores]:
    """:func:`evaluate_to` for long-format input: each pair's results go to the folder of its
    :attr:`ReportPair.system` (every system needs one); returns each system's scores, in order
    of first appearance. ``by_system=False``: ``folders`` holds one folder, for every pair.
    ``executor``, ``ray_address``, ``expected``, ``check_unique``, ``outputs`` and ``rows``: see
    :func:`evaluate_stream` (the first four apply to the rule engine only)."""
    rows = rows or RowsFormat.choose()
    if progress is None:
        progress = (total or 0) >= PROGRESS_MIN_PAIRS and sys.stderr.isatty()
    engine = evaluator.judge_engine
    if isinstance(engine, RulesEngine):
        if by_system:
            to: Path | dict[str | None, Path] = dict(folders)
        else:
            [only] = folders.values()
            to = Path(only)
        return evaluate_stream(
            engine,
            pairs,
            to,
            workers=engine.workers,
            total=total,
            progress=progress,
            executor=executor,
            ray_address=ray_address,
            expected=expected,
            check_unique=check_unique,
            outputs=outputs,
            rows=rows,
        )
    if executor != "local" or ray_address is not None:
        raise ValueError(
            f"executor {executor!r} and ray_address apply to the rule engine; engine {engine.name!r} judges in this process"
        )
    groups: dict[str | None, list[ReportPair]] = {}
    for p in pairs:
        groups.setdefault(p.system if by_system else None, []).append(p)
    out: dict[str | None, EvaluationScores] = {}
    with _run_of(outputs) as run:
        for system, group in groups.items():
            if system not in folders:
                raise ValueError(f"no output folder for system {system!r}")
            result = evaluator.evaluate(group, progress=progress)
            result.write_to(run.folder(folders[system]), rows=rows.style, parquet=rows.parquet)
            out[system] = result
    return out


def evaluate_file(
    engine: RulesEngine,
    stream: PairStream,
    folders: Path | Mapping[str | None, Path],
    *,
    workers: int = 1,
    progress: bool | None = None,
    outputs: OutputRun | None = None,
    chunk_bytes: int | None = None,
    rows: RowsFormat | None = None,
) -> dict[str | None, EvaluationScores]:
    """The rule engine over a pairs file, with no work per pair in this process where it can.

    The file is cut into byte ranges (:meth:`PairStream.plan`: no record parsed here). Workers
    read them twice: first to check them (:meth:`~cxreval.io.PairChunk.census`: every record
    read, the pairs of each system counted, each id hashed), then to judge them and render their
    rows. This process only adds counts, checks the id hashes for a repeat (8 bytes a pair), and
    appends what comes back. Where a range reads with a problem, an id repeats, or the file cannot
    be cut (standard input, a pipe), the file is read in order here instead
    (:meth:`PairStream.check`, then :func:`evaluate_stream`): every problem is named with its
    file, line and field, and nothing is written before the input is known to be sound. The
    files and scores are the same either way; ``stream`` need not be checked. ``progress``: a
    bar on stderr (None: for :data:`~cxreval.evaluate.PROGRESS_MIN_PAIRS` pairs or more in a terminal).
    ``rows``: how the judgement rows are written (None: compact, with ``judgements.parquet``
    when pyarrow is installed).
    """
    rows = rows or RowsFormat.choose()
    plan = stream.plan() if chunk_bytes is None else stream.plan(chunk_bytes)
    if plan is not None:
        # a pool pays for itself from about PARALLEL_MIN_PAIRS pairs: three chunks, 1 to 1.5 MiB
        with make_executor(workers if len(plan) > 2 else 1, engine.factory, state=engine) as pool:
            counted = _census(pool, plan, stream)
            if counted is not None:
                for system in counted:  # two systems that would share a folder: refused before any work
                    if system is not None and not isinstance(folders, Path):
                        folders[system]  # noqa: B018
                return _judge_planned(pool, engine, plan, counted, folders, outputs, progress, rows)
    stream.check()  # names every problem; passes only where a cut fell inside a quoted field
    return evaluate_stream(
        engine,
        stream,
        folders,
        workers=workers,
        total=stream.n_pairs,
        progress=_show(progress, stream.n_pairs),
        expected=stream.systems,
        check_unique=False,
        outputs=outputs,
        rows=rows,
    )


def _census(pool: Executor, plan: Sequence[PairChunk], stream: PairStream) -> dict[str | None, int] | None:
    """Every chunk checked and counted: the pairs of each system (order of first appearance), or
    None where a chunk reads with a problem or an id repeats (the file is then read in order).
    Warns where candidates copy their references, as :meth:`PairStream.check` does."""
    systems: dict[str | None, int] = {}
    copied: dict[str | None, int] = {}
    ids: list[bytes] = []
    for census in pool.map(_census_of, plan):
        if not census.clean:
            return None
        for system, n, same in census.systems:
            systems[system] = systems.get(system, 0) + n
            copied[system] = copied.get(system, 0) + same
        ids.append(census.ids)
    hashes = np.frombuffer(b"".join(ids), dtype=np.uint64)
    if not len(hashes) or len(np.unique(hashes)) != len(hashes):
        return None  # no pair at all, or an id given twice: named by the reading in order
    stream.systems = dict(systems)
    source = f"{stream.file} (column {stream.candidate_col!r})"
    for system, n in systems.items():
        warn_copied_counts(copied[system], n, source if system is None else f"{source}, system {system!r}")
    return systems


def _census_of(engine: RulesEngine, chunk: PairChunk) -> ChunkCensus:
    return chunk.census()


def _judge_planned(
    pool: Executor,
    engine: RulesEngine,
    plan: Sequence[PairChunk],
    counts: Mapping[str | None, int],
    folders: Path | Mapping[str | None, Path],
    outputs: OutputRun | None,
    progress: bool | None,
    rows: RowsFormat,
) -> dict[str | None, EvaluationScores]:
    """The checked chunks judged and written, each system finished once its last pair is in."""
    with sigterm_raises(lambda: SystemExit(143)), _run_of(outputs) as run:
        writers = _Writers(run, folders, engine, rows)
        top = _parts_dir(folders)
        _remove_stale_parts(top)
        parts = Path(tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{os.getpid()}-", dir=top))
        try:
            judged = pool.map(_judge_file_chunk, [(chunk, parts / f"{k:06d}", rows) for k, chunk in enumerate(plan)])
            total = sum(counts.values())
            for systems in progress_iter(
                judged,
                _show(progress, total),
                "judging pairs",
                total=total,
                step=lambda got: sum(chunk.n_pairs for _, chunk in got),
            ):
                for system, chunk in systems:
                    writers.add(system, chunk, counts)
            return writers.finish()
        except BaseException:
            pool.close()  # stopped first: no worker writes into the parts folder while it is removed
            raise
        finally:
            shutil.rmtree(parts, ignore_errors=True)


def _show(progress: bool | None, pairs: int) -> bool:
    """Whether to draw a progress bar (None: for many pairs, in a terminal)."""
    return progress if progress is not None else pairs >= PROGRESS_MIN_PAIRS and sys.stderr.isatty()


def _parts_dir(folders: Path | Mapping[str | None, Path]) -> Path:
    """Where workers write their chunks' rows for the parent to append: beside the results (the
    same file system, so appending is a copy in the kernel), in a folder this run removes."""
    top = folders if isinstance(folders, Path) else getattr(folders, "out", None) or next(iter(folders.values()))
    top.mkdir(parents=True, exist_ok=True)
    return top


#: The folder workers write their chunks' rows into, ``.cxreval-parts-PID-XXXX`` beside the results.
PARTS_PREFIX = ".cxreval-parts-"


def _remove_stale_parts(top: Path) -> None:
    """Remove the parts folders of runs that were killed (SIGKILL runs no cleanup): those whose
    process is gone. A live run's, another program's into the same folder, are left alone."""
    for folder in top.glob(f"{PARTS_PREFIX}*"):
        pid = folder.name.removeprefix(PARTS_PREFIX).split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _judge_file_chunk(engine: RulesEngine, task: tuple[PairChunk, Path, RowsFormat]) -> list[tuple[str | None, JudgedChunk]]:
    """Read and judge one checked chunk (in a worker, or this process): each of its systems'
    judged pairs, in order of first appearance, their rows written to files named after the
    task's part path."""
    chunk, part, rows = task
    pairs, clean = chunk.read()
    if not clean:  # it read clean in the census: the file changed since
        raise InputError([InputProblem(file=chunk.file, message="the file changed after it was checked; run again")])
    groups: dict[str | None, list[PairItem]] = {}
    for p in pairs:
        groups.setdefault(p.system, []).append((p.pair_id, p.reference, p.candidate, p.meta))
    return [
        (system, judge_chunk(engine, items, part.with_name(f"{part.name}-{k}.part"), rows))
        for k, (system, items) in enumerate(groups.items())
    ]


def _run_of(outputs: OutputRun | None) -> AbstractContextManager[OutputRun]:
    """The run the caller owns (it commits), or a new one that commits when the block ends cleanly."""
    return OutputRun() if outputs is None else nullcontext(outputs)


def evaluate_stream(
    engine: RulesEngine,
    pairs: Iterable[ReportPair],
    folders: Path | Mapping[str | None, Path],
    *,
    workers: int = 1,
    total: int | None = None,
    progress: bool = False,
    chunk_pairs: int = CHUNK_PAIRS,
    executor: str = "local",
    ray_address: str | None = None,
    expected: Mapping[str | None, int] | None = None,
    check_unique: bool = True,
    outputs: OutputRun | None = None,
    rows: RowsFormat | None = None,
) -> dict[str | None, EvaluationScores]:
    """Judge ``pairs`` chunk by chunk and write each system's results folder as they come.

    Pair ids must be unique within a system (``check_unique``: checked here, at the cost of a
    set of ids; a reader that checked them already passes False), and every pair of a system
    must keep the same columns (:attr:`ReportPair.meta` keys). ``expected``: the number of
    pairs of each system, when known; a system's files are then finished as soon as its last
    pair is in (they are still committed with every other system's, at the end).
    The files are written under partial names and put in place together, every system's, when
    the last pair is in (:class:`~cxreval.io.writers.OutputRun`): an interrupted run leaves the
    earlier results whole. ``outputs``: a run the caller commits (with files of its own, such as
    ``systems.csv``); None: this call commits its own. While this runs in the main thread,
    SIGTERM (a scheduler's stop) ends it as Ctrl-C does, unless the program has its own handler.

    ``folders`` is one folder for every pair, or a folder per :attr:`ReportPair.system` (long
    format); a pair of a system with no folder is an error. ``workers`` > 1 judges in that many
    processes when ``total`` (the number of pairs, when known) is at least
    :data:`~cxreval.engines.PARALLEL_MIN_PAIRS`. ``executor="ray"`` judges the same chunks as
    Ray tasks instead (:mod:`cxreval.ray_executor`; ``ray_address`` names an existing cluster,
    None starts a local one with ``workers`` CPUs). Returns each system's scores, in order of
    first appearance. ``rows``: how the judgement rows are written (:class:`~cxreval.judge.files.RowsFormat`;
    None: compact, with ``judgements.parquet`` when pyarrow is installed).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    rows = rows or RowsFormat.choose()
    if ray_address is not None and executor != "ray":
        raise ValueError("ray_address applies to executor 'ray'")
    many = executor == "ray" or (workers > 1 and (total is None or total >= PARALLEL_MIN_PAIRS))
    with (
        sigterm_raises(lambda: SystemExit(143)),
        _run_of(outputs) as run,
        make_executor(workers if many else 1, engine.factory, kind=executor, address=ray_address, state=engine) as pool,
    ):  # its workers / actors stop on every exit, Ctrl-C included
        writers = _Writers(run, folders, engine, rows)
        parts = _chunks(pairs, chunk_pairs, by_system=not isinstance(folders, Path), check_unique=check_unique)
        judged = pool.map(_judge_part, ((system, items, rows) for system, items in parts))
        steps = progress_iter(judged, progress, "judging pairs", total=total or 0, step=lambda s: s[1].n_pairs)
        for system, chunk in steps:
            writers.add(system, chunk, expected)
        return writers.finish()


class _Writers:
    """The results folders of one stream, each made when its system's first chunk comes."""

    def __init__(self, run: OutputRun, folders: Path | Mapping[str | None, Path], engine: RulesEngine, rows: RowsFormat) -> None:
        self.run = run
        self.rows = rows
        self.folders = folders
        self.engine = engine
        self.open: dict[str | None, ResultWriter] = {}
        self.done: dict[str | None, EvaluationScores | None] = {}  # order of first appearance
        if isinstance(folders, Path):
            self.writer(None)  # one folder: written even when no pair comes

    def writer(self, system: str | None) -> ResultWriter:
        if system not in self.open:
            if isinstance(self.folders, Path):
                folder = self.folders
            elif system in self.folders:
                folder = self.folders[system]
            else:
                raise ValueError(f"no output folder for system {system!r}")
            self.open[system] = ResultWriter(self.run.folder(folder), self.engine.ontology, self.engine.signature, self.rows)
            self.done[system] = None
        return self.open[system]

    def add(self, system: str | None, chunk: JudgedChunk, expected: Mapping[str | None, int] | None) -> None:
        """Add a chunk; a system whose ``expected`` count of pairs is in is finished at once."""
        w = self.writer(system)
        w.add(chunk)
        if expected is not None and w.totals.n_pairs == expected.get(system):
            self.done[system] = self.open.pop(system).finish()

    def finish(self) -> dict[str | None, EvaluationScores]:
        """Finish every folder still open; each system's scores, in order of first appearance."""
        for system in list(self.open):
            self.done[system] = self.open.pop(system).finish()
        return {system: scores for system, scores in self.done.items() if scores is not None}


def _chunks(
    pairs: Iterable[ReportPair], size: int, *, by_system: bool, check_unique: bool = True
) -> Iterator[tuple[str | None, list[PairItem]]]:
    """Chunks of at most ``size`` pairs, each of one system (pairs keep their order within a system).

    Each system's kept columns are those of its first pair, in that order (``errors.csv`` has one
    header); a pair with other columns, or an id seen before in its system, is an error.
    """
    buffers: dict[str | None, list[PairItem]] = {}
    columns: dict[str | None, tuple[str, ...]] = {}
    seen: set[tuple[str | None, str]] = set()
    for p in pairs:
        system = p.system if by_system else None
        if check_unique:
            if (system, p.pair_id) in seen:
                of = f" of system {system!r}" if system is not None else ""
                raise ValueError(f"duplicate pair id {p.pair_id!r}{of}: ids must be unique (within a system)")
            seen.add((system, p.pair_id))
        keys = columns.setdefault(system, tuple(p.meta))
        if len(p.meta) != len(keys) or any(k not in p.meta for k in keys):
            raise ValueError(
                f"pair {p.pair_id!r} keeps the columns {sorted(p.meta)}, the first pair of its system "
                f"{sorted(keys)}: every pair must keep the same columns"
            )
        buf = buffers.setdefault(system, [])
        buf.append((p.pair_id, p.reference, p.candidate, {k: p.meta[k] for k in keys}))
        if len(buf) >= size:
            yield system, buf
            buffers[system] = []
    for system, buf in buffers.items():
        if buf:
            yield system, buf


def _judge_part(engine: RulesEngine, part: tuple[str | None, list[PairItem], RowsFormat]) -> tuple[str | None, JudgedChunk]:
    """One chunk of a system's pairs judged (:func:`judge_chunk`), with its system."""
    system, items, rows = part
    return system, judge_chunk(engine, items, rows=rows)
