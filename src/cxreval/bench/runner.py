"""Run a benchmark: read datasets and systems, judge every pair (cached), score every metric
(cached), and hand the per-pair arrays to :mod:`cxreval.bench.analysis`.

The rule engine judges the pairs that are not in the cache in worker processes (one
``Evaluator`` per worker, so each distinct text is extracted once per worker); pairs are sent
sorted by reference so that a reference shared by many systems is mostly read once. LLM engines
go through ``Evaluator.evaluate`` (their own answer cache applies); a pair whose LLM answer
stayed unusable is not stored and counts as failed.

Judged pairs and metric values are stored chunk by chunk as they finish, so Ctrl-C loses at
most the chunks in flight: :class:`Interrupted` says how many judged pairs are kept, and a rerun
judges only the rest. Worker processes ignore SIGINT; the parent terminates them. Everything that
can fail without judging (output folder, metric names, extras and options) is checked first.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.bench.cache import RULE_ROWS, BenchCache, compact_rows, dumps, pair_key
from cxreval.bench.config import (
    DATA_DIR_ENV,
    IU_BASELINES,
    PREDICTION_FIELD,
    BenchConfig,
    DatasetConfig,
    ReferencesConfig,
    Section,
    SystemConfig,
)
from cxreval.bench.models import BenchmarkResult
from cxreval.engines import PARALLEL_MIN_PAIRS, RulesEngine
from cxreval.executors import executor
from cxreval.io import (
    CopiedCandidatesWarning,
    InputError,
    InputProblem,
    ReportPair,
    StudiesWithoutText,
    read_reports,
    read_study_ids,
    warn_if_copied,
)
from cxreval.io.writers import OutputError, check_out_dir
from cxreval.metrics import MetricUnavailable, PairMeanMetric, ReportMetric, UnknownMetric, get_metric, metric_spec
from cxreval.metrics.table import TableMetric, table_metric, table_metric_names
from cxreval.parallel import chunked

#: Most pairs a judging or metric chunk holds: the unit of caching (and of work lost to Ctrl-C).
CHUNK_PAIRS = 1000
Log = Callable[[str], None]
#: ``progress(stage, done, total)``: a stage ("judging", "metric bleu2") advanced to ``done`` of
#: ``total`` pairs; called with ``done=0`` when the stage starts and after every chunk.
Progress = Callable[[str, int, int], None]


class SetupError(ValueError):
    """Settings that would fail the run after the judging (output folder, metric extras or options).

    ``problems`` holds every problem found, one line each.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during judging or scoring; ``cached`` judged pairs are kept in ``cache``."""

    def __init__(self, cache: Path, cached: int) -> None:
        super().__init__(f"{cached} judged pairs are cached in {cache}")
        self.cache, self.cached = cache, cached


@dataclass
class SystemRun:
    """One system on one dataset: candidates aligned with the dataset's ids, and per-pair data."""

    name: str
    baseline: bool
    candidates: list[str]
    judgements: list[list[list[str]] | None] = field(default_factory=list)  # None: failed pair
    metrics: dict[str, np.ndarray] = field(default_factory=dict)  # (n,) values or (n, k) statistics


@dataclass
class DatasetRun:
    name: str
    ids: list[str]
    references: list[str]
    sites: list[str] | None
    normal: np.ndarray | None  # bool per study; None when not known
    systems: list[SystemRun]


@dataclass
class RunStats:
    """What the run had to compute (the cache's effect)."""

    pairs: int = 0
    judged: int = 0  # pairs judged now (cache misses)
    judgement_hits: int = 0
    failed: int = 0
    metric_computed: dict[str, int] = field(default_factory=dict)
    metric_hits: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # e.g. a system whose reports copy the reference
    notes: list[str] = field(default_factory=list)  # e.g. how a retrieval baseline chose its reports


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


def _read_column_table(path: Path, fmt: str | None, id_col: str, cols: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{column: {id: value}}`` for metadata columns, read with cxreval's readers."""
    return {c: read_reports(path, id_col=id_col, text_col=c, format=fmt) for c in cols}


_TRUE = {"1", "true", "yes", "y", "normal", "t"}
_FALSE = {"0", "false", "no", "n", "abnormal", "f"}


def _listed_studies(ref: ReferencesConfig) -> tuple[list[str], str] | None:
    """The study ids ``references.studies`` lists, and the file that lists them (None: no list)."""
    listed = ref.studies
    if listed is None or ref.layout is None:
        return None
    ids = read_study_ids(listed.path, ref.layout, id_col=listed.id_col, format=listed.format, where=listed.where)
    return ids, str(listed.path)


def load_dataset(cfg: DatasetConfig) -> tuple[list[str], list[str], list[str] | None, np.ndarray | None]:
    """ids, reference texts, sites (or None) and metadata normal flags (or None), in file order."""
    ref = cfg.references
    refs = read_reports(
        ref.path,
        id_col=ref.id_col,
        text_col=ref.text_col,
        format=ref.format,
        section=ref.section if ref.text_col is None else None,
        layout=ref.layout,
        where=ref.where or None,
        studies=_listed_studies(ref),
    )
    ids = list(refs)
    sites: list[str] | None = None
    normal: np.ndarray | None = None
    meta = cfg.metadata
    if meta is not None:
        cols = [c for c in (meta.site_col, meta.normal_col) if c is not None]
        table = _read_column_table(meta.path, meta.format, meta.id_col, cols)
        problems: list[InputProblem] = []
        for col, values in table.items():
            missing = [i for i in ids if i not in values]
            if missing:
                problems.append(
                    InputProblem(
                        file=str(meta.path), field=col, message=f"{len(missing)} studies have no value, e.g. {missing[:3]}"
                    )
                )
        if meta.normal_col is not None and not problems:
            flags = []
            for i in ids:
                v = table[meta.normal_col][i].strip().lower()
                if v not in _TRUE | _FALSE:
                    problems.append(
                        InputProblem(
                            file=str(meta.path),
                            field=meta.normal_col,
                            id=i,
                            message=f"normal flag {v!r} is not one of {sorted(_TRUE | _FALSE)}",
                        )
                    )
                flags.append(v in _TRUE)
            normal = np.array(flags, dtype=bool)
        if problems:
            raise InputError(problems)
        if meta.site_col is not None:
            sites = [table[meta.site_col][i].strip() for i in ids]
    return ids, [refs[i] for i in ids], sites, normal


def load_candidates(
    cfg: SystemConfig,
    ids: Sequence[str],
    references: Sequence[str],
    dataset: str,
    *,
    data_dir: Path | None = None,
    section: Section = "findings",
) -> list[str]:
    """The system's candidate per study of the dataset; every study needs exactly one.

    A ReXrank-layout file with neither ``text_col`` nor ``section`` reads ``model_prediction``.
    An IU train-split baseline reads ``data_dir`` (else ``$CXREVAL_DATA_DIR``) and writes the
    ``section`` of the dataset's references (see :func:`load_iu_baseline`).
    """
    if cfg.baseline == "copy-reference":
        return list(references)
    if cfg.baseline == "normal-template":
        return [cfg.template] * len(ids)
    if cfg.baseline in IU_BASELINES:
        return load_iu_baseline(cfg, ids, section, data_dir).texts
    assert cfg.path is not None
    cands = read_reports(
        cfg.path, id_col=cfg.id_col, text_col=cfg.text_col, format=cfg.format, section=cfg.section, keyed_default=PREDICTION_FIELD
    )
    missing = [i for i in ids if i not in cands]
    if missing:
        raise InputError(
            [
                InputProblem(
                    file=str(cfg.path),
                    field=cfg.id_col,
                    message=f"system {cfg.name!r} has no report for {len(missing)} of the {len(ids)} studies of "
                    f"dataset {dataset!r}, e.g. {missing[:3]}",
                )
            ]
        )
    return [cands[i] for i in ids]


def load_iu_baseline(
    cfg: SystemConfig,
    ids: Sequence[str],
    section: Section,
    data_dir: Path | None,
    ontology: Any = None,
    *,
    data: Any = None,
    cache: BenchCache | None = None,
) -> Any:
    """The :class:`~cxreval.datasets.baselines.BaselineReports` of an IU train-split baseline for
    ``ids``: the system's ``section`` if set, else ``section`` (the dataset's reference section).
    ``data``: the run's :class:`~cxreval.datasets.baselines.RetrievalData` (read once for all its
    baselines); ``cache``: the bench cache, which keeps each choice under the hash of its inputs."""
    from cxreval.datasets.baselines import KINDS, BaselineReports, baseline_key, baseline_reports

    kind = next(k for k in KINDS if k == cfg.baseline)  # the config allows only these here
    try:
        data = data if data is not None else retrieval_data(cfg, data_dir, ontology)
        seed, noise, section = cfg.seed or 0, cfg.noise or 0.0, cfg.section or section
        key = baseline_key(kind, ids, seed=seed, noise=noise, section=section, data=data)
        stored = cache.get_baseline(key) if cache is not None else None
        if stored is not None:
            return BaselineReports.from_json(stored, data, section)
        made = baseline_reports(kind, ids, seed=seed, noise=noise, section=section, data=data)
        if cache is not None:
            cache.put_baseline(key, made.to_json())
        return made
    except FileNotFoundError as exc:
        raise InputError([InputProblem(file=str(data_dir), field="data_dir", message=f"system {cfg.name!r}: {exc}")]) from None


def retrieval_data(cfg: SystemConfig, data_dir: Path | None, ontology: Any = None) -> Any:
    """The IU X-ray data a retrieval baseline reads (:class:`~cxreval.datasets.baselines.RetrievalData`)
    from ``data_dir``, else ``$CXREVAL_DATA_DIR``."""
    from cxreval.datasets.baselines import RetrievalData

    data_dir = data_dir or (Path(os.environ[DATA_DIR_ENV]) if os.environ.get(DATA_DIR_ENV) else None)
    if data_dir is None:
        raise InputError(
            [
                InputProblem(
                    file="config",
                    field="data_dir",
                    message=(
                        f"system {cfg.name!r}: baseline {cfg.baseline} reads the IU X-ray train split from data_dir; "
                        f"set data_dir in the config or ${DATA_DIR_ENV}"
                    ),
                )
            ]
        )
    return RetrievalData.load(data_dir, ontology)


# ------------------------------------------------------------------------------------------
# Judging (rule engine in worker processes)
# ------------------------------------------------------------------------------------------


def _judge_chunk(engine: RulesEngine, items: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """Judge one chunk of ``(key, reference, candidate)`` (sorted by reference) with ``engine`` (an
    executor's state: :mod:`cxreval.executors`): ``(key, compact rows JSON)`` per pair. The
    engine's caches are bounded by their byte budgets (:mod:`cxreval.caches`), which keeps a
    worker's memory flat however many pairs it judges."""
    return [(key, dumps(compact_rows(engine.judge_texts("p", ref, cand)))) for key, ref, cand in items]


def _metric_chunk(metrics: dict[str, ReportMetric], task: tuple[str, dict[str, Any], Sequence[str], Sequence[str]]) -> list[Any]:
    """A metric's values of a chunk, in a worker whose state is the metrics it built so far."""
    name, options, refs, cands = task
    metric = metrics.get(name)
    if metric is None:
        metric = metrics[name] = get_metric(name, **options)
    return _metric_values(metric, refs, cands)


def _metric_values(metric: ReportMetric, refs: Sequence[str], cands: Sequence[str]) -> list[Any]:
    """What the cache keeps per pair: a pair-mean metric's value (None: not scored), else the
    metric's statistics (a list per pair)."""
    if isinstance(metric, PairMeanMetric):  # get_metric guarantees: level "pair" <=> a PairMeanMetric
        return [None if not math.isfinite(v) else float(v) for v in metric.score_pairs(refs, cands)]
    return [list(map(float, row)) for row in metric.pair_stats(refs, cands)]


def _chunked(items: Sequence[Any], workers: int) -> list[Sequence[Any]]:
    """At least four chunks per worker, at most :data:`CHUNK_PAIRS` items each."""
    return chunked(items, workers, CHUNK_PAIRS)


def _missing_extra(metric: str) -> list[str]:
    """The packages of cxreval's optional extra named like ``metric`` (``cxreval[bertscore]``)
    that are not installed (empty: no such extra, or all of it is there)."""
    from importlib.metadata import PackageNotFoundError, requires, version

    try:
        reqs = requires("cxreval") or []
    except PackageNotFoundError:
        return []
    missing = []
    for req in reqs:
        if re.search(rf"extra\s*==\s*['\"]{re.escape(metric)}['\"]", req):
            dist = re.split(r"[\s;<>=!~\[]", req, maxsplit=1)[0]
            try:
                version(dist)
            except PackageNotFoundError:
                missing.append(dist)
    return missing


#: Metrics computed from the judgement table (:mod:`cxreval.metrics.table`), not from the texts.
TABLE_METRIC_NAMES = frozenset(table_metric_names())


class Runner:
    """Runs one benchmark config; ``stats`` says what was computed and what came from the cache."""

    def __init__(
        self,
        config: BenchConfig,
        out: str | Path | None = None,
        log: Log | None = None,
        *,
        warn: Log | None = None,
        progress: Progress | None = None,
    ) -> None:
        """``log`` gets progress messages, ``warn`` warnings (default: a Python warning),
        ``progress`` the advance of every stage (see :data:`Progress`)."""
        from cxreval.evaluate import Evaluator

        self.config = config
        self.out_flag = "out" if out is None else "--out"
        self.out = Path(out) if out is not None else Path(config.out)
        self.log: Log = log or (lambda msg: None)
        self.warn: Log = warn or (lambda msg: warnings.warn(msg, CopiedCandidatesWarning, stacklevel=3))
        self.progress: Progress = progress or (lambda stage, done, total: None)
        eng = config.engine
        llm = None
        if eng.name != "rules":
            from cxreval.llm.config import LLMConfig

            if eng.llm is None:
                raise InputError(
                    [InputProblem(file="config", field="engine.llm", message=f"engine {eng.name!r} needs llm settings")]
                )
            llm = LLMConfig.from_settings(eng.llm)
        # a rule file that cannot be used raises RulesError (a ValueError naming the file and line)
        self.evaluator = Evaluator(
            eng.ontology,
            uncertain=eng.uncertain,
            engine=eng.name,
            llm=llm,
            spec_compat=eng.spec_compat,
            rules=eng.rules,
            hierarchy=eng.hierarchy,
        )
        self.engine_signature = str(self.evaluator.signature)
        #: What the judgements' cache keys are made of: the engine signature (the rule engine's rows
        #: carry rule ids, so its key says so: rows cached without them are judged again).
        self.judgement_signature = self.engine_signature + (RULE_ROWS if eng.name == "rules" else "")
        self.workers = eng.workers or os.cpu_count() or 1
        self.stats = RunStats()
        self._metrics: dict[str, ReportMetric] = {}

    # -- metrics -----------------------------------------------------------------------------

    def table_metric(self, name: str) -> TableMetric:
        """A metric computed from the judgement table, judged by this run's engine (its signature
        is the run's): the leaderboard computes it from the rows the run judged."""
        if name not in self._metrics:
            metric = table_metric(name, self.evaluator.ontology)
            self._metrics[name] = type(metric).from_runner(self.evaluator.engine_runner)
        return self._metrics[name]  # type: ignore[return-value]

    def metric(self, name: str) -> ReportMetric:
        """The configured metric object (built once)."""
        if name in TABLE_METRIC_NAMES:
            return self.table_metric(name)
        if name not in self._metrics:
            self._metrics[name] = get_metric(name, **self.config.metric_options.get(name, {}))
        return self._metrics[name]

    def check(self) -> None:
        """Raise :class:`SetupError` for everything that would fail after the judging: an output
        folder that is a file or cannot be written, a metric that is unknown, whose optional extra
        is not installed, or whose options it does not take. Builds (and keeps) every metric."""
        problems: list[str] = []
        try:
            check_out_dir(self.out, flag=self.out_flag)
        except OutputError as exc:
            problems.append(str(exc))
        if self.config.engine.on_ray:
            from cxreval.ray_executor import RayUnavailable, import_ray

            try:
                import_ray()
            except RayUnavailable as exc:
                problems.append(f"engine.executor: ray: {exc}")
        for name in self.config.metrics:
            if name in TABLE_METRIC_NAMES:  # computed from the judgement table with the run's engine
                continue
            try:
                self.metric(name)
            except UnknownMetric as exc:
                problems.append(str(exc.args[0]))
            except MetricUnavailable as exc:
                extra = (metric_spec(name).needs or (name,))[0]  # the registry says which extra
                missing = _missing_extra(extra)
                problems.append(
                    f"metric {name!r} needs the optional extra {extra!r} (not installed: "
                    f"{', '.join(missing)}): pip install 'cxreval[{extra}]'"
                    if missing
                    else f"metric {name!r} cannot run here: {exc}"
                )
            except TypeError as exc:
                problems.append(f"metric {name!r} does not take the metric_options given: {exc}")
        if problems:
            raise SetupError(problems)

    # -- the run -----------------------------------------------------------------------------

    def load(self, cache: BenchCache | None = None) -> list[DatasetRun]:
        """Read every dataset and system; all input problems are raised together. ``cache``: the
        bench cache, where retrieval baselines are kept by the hash of their inputs."""
        runs: list[DatasetRun] = []
        problems: list[InputProblem] = []
        data: Any = None  # the IU X-ray data of the retrieval baselines, read once for all of them
        for d in self.config.datasets:
            try:
                ids, refs, sites, normal = self._read_dataset(d)
            except InputError as exc:
                problems.extend(exc.problems)
                continue
            systems = []
            for s in self.config.systems_for(d.name):
                try:
                    if s.baseline in IU_BASELINES:
                        if data is None:
                            data = retrieval_data(s, self.config.data_dir, self.evaluator.ontology)
                        made = load_iu_baseline(
                            s, ids, d.references.section, self.config.data_dir, self.evaluator.ontology, data=data, cache=cache
                        )
                        cands = made.texts
                        self.stats.notes.append(made.note(s.name, d.name))
                    else:
                        cands = load_candidates(s, ids, refs, d.name)
                except InputError as exc:
                    problems.extend(exc.problems)
                    continue
                if s.baseline != "copy-reference":
                    self._check_copied(s.name, d.name, refs, cands)
                systems.append(SystemRun(s.name, s.baseline is not None, cands))
            runs.append(DatasetRun(d.name, ids, refs, sites, normal, systems))
        if problems:
            raise InputError(problems)
        return runs

    def _read_dataset(self, d: DatasetConfig) -> tuple[list[str], list[str], list[str] | None, np.ndarray | None]:
        """:func:`load_dataset`, saying (through ``warn``, and in the run's warnings) which studies
        of a dataset layout had no text to read."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StudiesWithoutText)
            loaded = load_dataset(d)
        for w in caught:
            if issubclass(w.category, StudiesWithoutText):
                message = f"dataset {d.name!r}: {w.message}"
                self.stats.warnings.append(message)
                self.warn(message)
        return loaded

    def _check_copied(self, system: str, dataset: str, refs: Sequence[str], cands: Sequence[str]) -> None:
        """Warn (through ``warn``, and in the result's notes) when most candidates are the reference."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CopiedCandidatesWarning)
            warn_if_copied(refs, cands, source=f"system {system!r} on dataset {dataset!r}")
        for w in caught:
            if issubclass(w.category, CopiedCandidatesWarning):
                self.stats.warnings.append(str(w.message))
                self.warn(str(w.message))

    def judge(self, cache: BenchCache, runs: Sequence[DatasetRun]) -> None:
        """Fill ``SystemRun.judgements`` from the cache, judging only the missing pairs."""
        keyed, texts = _keyed_pairs(self.judgement_signature, runs)
        self.stats.pairs += sum(len(k) for _, k in keyed)
        stored = cache.get_judgements(list(texts))
        missing = [(k, *texts[k]) for k in texts if k not in stored]
        self.stats.judgement_hits += len(texts) - len(missing)
        if missing:
            self.log(f"judging {len(missing):,} new pairs ({len(texts) - len(missing):,} cached)")
            self.progress("judging", 0, len(missing))
            done = 0

            def store(part: list[tuple[str, str]]) -> None:
                nonlocal done
                cache.put_judgements(part)
                stored.update(part)
                self.stats.judged += len(part)
                done += len(part)
                self.progress("judging", done, len(missing))

            self._judge_missing(missing, store)
        decoded: dict[str, list[list[str]]] = {}
        for s, keys in keyed:
            rows: list[list[list[str]] | None] = []
            for k in keys:
                if k not in stored:
                    rows.append(None)
                    continue
                hit = decoded.get(k)
                if hit is None:
                    hit = decoded[k] = json.loads(stored[k])
                rows.append(hit)
            s.judgements = rows
            self.stats.failed += sum(r is None for r in rows)

    def _judge_missing(self, items: list[tuple[str, str, str]], store: Callable[[list[tuple[str, str]]], None]) -> None:
        """Judge ``(key, reference, candidate)`` items chunk by chunk, handing each finished
        chunk's ``(key, compact rows JSON)`` to ``store`` at once (so Ctrl-C keeps them)."""
        eng = self.config.engine
        if eng.name != "rules":
            size = 8 * self.evaluator.llm.concurrency if self.evaluator.llm is not None else CHUNK_PAIRS
            for start in range(0, len(items), size):
                pairs = [ReportPair(pair_id=k, reference=r, candidate=c) for k, r, c in items[start : start + size]]
                result = self.evaluator.evaluate(pairs, progress=False)
                by_pair: dict[str, list[Any]] = {k: [] for k in result.pair_ids}
                for row in result.judgements:
                    by_pair[row.pair_id].append(row)
                store([(k, dumps(compact_rows(rows))) for k, rows in by_pair.items()])
            return
        items = sorted(items, key=lambda t: (t[1], t[2]))
        engine = self.evaluator.judge_engine
        assert isinstance(engine, RulesEngine)  # eng.name == "rules"
        chunks = _chunked(items, self.workers)
        many = eng.on_ray or (self.workers > 1 and len(items) >= PARALLEL_MIN_PAIRS)
        # the same chunks in this process, local processes or Ray actors (cxreval.executors); every
        # chunk is stored as it comes, so Ctrl-C keeps what was judged, and the workers stop with it
        with executor(
            self.workers if many else 1,
            engine.factory,
            kind="ray" if eng.on_ray else "local",
            address=eng.ray_address,
            state=engine,
        ) as pool:
            for part in pool.map(_judge_chunk, chunks):
                store(part)

    def score_metrics(self, cache: BenchCache, runs: Sequence[DatasetRun]) -> None:
        """Fill ``SystemRun.metrics`` for every configured metric but the judgement-based one."""
        for name in self.config.metrics:
            if name in TABLE_METRIC_NAMES:  # computed from the judgement table
                continue
            t0 = time.perf_counter()
            metric = self.metric(name)
            keyed, texts = _keyed_pairs(str(metric.signature), runs)
            stored = cache.get_values(list(texts))
            missing = [k for k in texts if k not in stored]
            self.stats.metric_hits[name] = self.stats.metric_hits.get(name, 0) + len(texts) - len(missing)
            if missing:
                stage, done = f"metric {name}", 0
                self.progress(stage, 0, len(missing))
                chunks = _chunked(missing, self.workers)
                tasks = [
                    (name, self.config.metric_options.get(name, {}), [texts[k][0] for k in ch], [texts[k][1] for k in ch])
                    for ch in chunks
                ]

                def store(keys: Sequence[str], values: Sequence[Any]) -> None:
                    nonlocal done
                    new = [(k, dumps(v)) for k, v in zip(keys, values, strict=True)]
                    cache.put_values(new)
                    stored.update(new)
                    done += len(new)
                    self.progress(stage, done, len(missing))

                parallel = getattr(metric, "parallel_safe", name in ("bleu2", "rouge-l", "bleu4-corpus"))
                many = parallel and self.workers > 1 and len(missing) >= PARALLEL_MIN_PAIRS
                with executor(self.workers if many else 1, dict, state={name: metric}) as pool:
                    for keys, values in zip(chunks, pool.map(_metric_chunk, tasks)):
                        store(keys, values)
            self.stats.metric_computed[name] = self.stats.metric_computed.get(name, 0) + len(missing)
            parsed: dict[str, Any] = {}
            for s, keys in keyed:
                vals = [parsed[k] if k in parsed else parsed.setdefault(k, json.loads(stored[k])) for k in keys]
                if vals and isinstance(vals[0], list):
                    s.metrics[name] = np.asarray(vals, dtype=float)
                else:
                    s.metrics[name] = np.array([np.nan if v is None else v for v in vals], dtype=float)
            self.stats.timings[f"metric:{name}"] = time.perf_counter() - t0

    def run(self) -> BenchmarkResult:
        """The whole benchmark: check, load, judge, score, analyse.

        Ctrl-C while judging or scoring raises :class:`Interrupted` (what finished is cached).
        """
        from cxreval.bench.analysis import analyse

        t0 = time.perf_counter()
        self.check()
        with BenchCache(self.out / "cache.sqlite") as cache:
            runs = self.load(cache)
            self.stats.timings["load"] = time.perf_counter() - t0
            try:
                t = time.perf_counter()
                self.judge(cache, runs)
                self.stats.timings["judge"] = time.perf_counter() - t
                self.score_metrics(cache, runs)
            except KeyboardInterrupt:
                raise Interrupted(cache.path, cache.count()) from None
        t = time.perf_counter()
        result = analyse(self.config, runs, self, created=datetime.now(UTC).isoformat(timespec="seconds"))
        self.stats.timings["analyse"] = time.perf_counter() - t
        self.stats.timings["total"] = time.perf_counter() - t0
        return result.model_copy(
            update={"timings": dict(self.stats.timings), "notes": [*result.notes, *self.stats.notes, *self.stats.warnings]}
        )


def run_benchmark(
    config: BenchConfig,
    out: str | Path | None = None,
    log: Log | None = None,
    *,
    warn: Log | None = None,
    progress: Progress | None = None,
) -> tuple[BenchmarkResult, RunStats]:
    """Run ``config``; returns the result and what was computed vs taken from the cache."""
    runner = Runner(config, out, log, warn=warn, progress=progress)
    return runner.run(), runner.stats


__all__ = ["Interrupted", "DatasetRun", "RunStats", "Runner", "SetupError", "SystemRun", "run_benchmark"]


def _keyed_pairs(
    signature: str, runs: Sequence[DatasetRun]
) -> tuple[list[tuple[SystemRun, list[str]]], dict[str, tuple[str, str]]]:
    """Cache keys of every system's pairs under ``signature``, and the distinct (ref, cand) per key."""
    keyed: list[tuple[SystemRun, list[str]]] = []
    texts: dict[str, tuple[str, str]] = {}
    for d in runs:
        for s in d.systems:
            keys = [pair_key(signature, r, c) for r, c in zip(d.references, s.candidates)]
            keyed.append((s, keys))
            for k, r, c in zip(keys, d.references, s.candidates):
                texts.setdefault(k, (r, c))
    return keyed, texts
