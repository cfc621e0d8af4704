"""Run a benchmark: read datasets and systems, judge every pair (cached), score every metric
(cached), and hand the per-pair arrays to :mod:`cxreval.bench.analysis`.

The rule engine judges the pairs that are not in the cache in worker processes (one
``Evaluator`` per worker, so each distinct text is extracted once per worker); pairs are sent
sorted by reference so that a reference shared by many systems is mostly read once. LLM engines
go through ``Evaluator.evaluate`` (their own answer cache applies); a pair whose LLM answer
stayed unusable is not stored and counts as failed.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from cxreval.bench.cache import BenchCache, compact_rows, dumps, pair_key
from cxreval.bench.config import JUDGEMENT_METRIC, BenchConfig, DatasetConfig, SystemConfig
from cxreval.bench.models import BenchmarkResult
from cxreval.io import InputError, InputProblem, ReportPair, read_reports
from cxreval.metrics import ReportMetric, get_metric

PARALLEL_MIN_PAIRS = 2000
Log = Callable[[str], None]


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


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


def _read_column_table(path: Path, fmt: str | None, id_col: str, cols: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{column: {id: value}}`` for metadata columns, read with cxreval's readers."""
    return {c: read_reports(path, id_col=id_col, text_col=c, format=fmt) for c in cols}


_TRUE = {"1", "true", "yes", "y", "normal", "t"}
_FALSE = {"0", "false", "no", "n", "abnormal", "f"}


def load_dataset(cfg: DatasetConfig) -> tuple[list[str], list[str], list[str] | None, np.ndarray | None]:
    """ids, reference texts, sites (or None) and metadata normal flags (or None), in file order."""
    ref = cfg.references
    refs = read_reports(ref.path, id_col=ref.id_col, text_col=ref.text_col, format=ref.format, section=ref.section)
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
                problems.append(InputProblem(file=str(meta.path), field=col,
                                             message=f"{len(missing)} studies have no value, e.g. {missing[:3]}"))
        if meta.normal_col is not None and not problems:
            flags = []
            for i in ids:
                v = table[meta.normal_col][i].strip().lower()
                if v not in _TRUE | _FALSE:
                    problems.append(InputProblem(file=str(meta.path), field=meta.normal_col, id=i,
                                                 message=f"normal flag {v!r} is not one of {sorted(_TRUE | _FALSE)}"))
                flags.append(v in _TRUE)
            normal = np.array(flags, dtype=bool)
        if problems:
            raise InputError(problems)
        if meta.site_col is not None:
            sites = [table[meta.site_col][i].strip() for i in ids]
    return ids, [refs[i] for i in ids], sites, normal


def load_candidates(cfg: SystemConfig, ids: Sequence[str], references: Sequence[str], dataset: str) -> list[str]:
    """The system's candidate per study of the dataset; every study needs exactly one."""
    if cfg.baseline == "copy-reference":
        return list(references)
    if cfg.baseline == "normal-template":
        return [cfg.template] * len(ids)
    assert cfg.path is not None
    cands = read_reports(cfg.path, id_col=cfg.id_col, text_col=cfg.text_col, format=cfg.format, section=cfg.section)
    missing = [i for i in ids if i not in cands]
    if missing:
        raise InputError([InputProblem(
            file=str(cfg.path), field=cfg.id_col,
            message=f"system {cfg.name!r} has no report for {len(missing)} of the {len(ids)} studies of "
                    f"dataset {dataset!r}, e.g. {missing[:3]}")])
    return [cands[i] for i in ids]


# ------------------------------------------------------------------------------------------
# Judging (rule engine in worker processes)
# ------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(ontology: str | None, uncertain: str) -> None:
    from cxreval.evaluate import Evaluator

    _WORKER["evaluator"] = Evaluator(ontology, uncertain=uncertain)  # type: ignore[arg-type]


def _judge_chunk(items: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """Judge one chunk (sorted by reference); extractions are cached within the chunk only,
    which keeps a worker's memory flat however many pairs it judges."""
    from cxreval.judge import compare_extractions

    ev = _WORKER["evaluator"]
    cache: dict[str, Any] = {}

    def extract(text: str) -> Any:
        hit = cache.get(text)
        if hit is None:
            hit = cache[text] = ev.extractor.extract(text)
        return hit

    out = []
    for key, ref, cand in items:
        rows = compare_extractions("p", extract(ref), extract(cand), ev.ontology, ev.uncertain)
        out.append((key, dumps(compact_rows(rows))))
    return out


def _metric_chunk(name: str, options: dict[str, Any], refs: Sequence[str], cands: Sequence[str]) -> list[Any]:
    metrics = _WORKER.setdefault("metrics", {})
    metric = metrics.get(name)
    if metric is None:
        metric = metrics[name] = get_metric(name, **options)
    return _metric_values(metric, refs, cands)


def _metric_values(metric: ReportMetric, refs: Sequence[str], cands: Sequence[str]) -> list[Any]:
    if hasattr(metric, "pair_stats"):
        return [list(map(float, row)) for row in metric.pair_stats(refs, cands)]  # type: ignore[attr-defined]
    return [None if not math.isfinite(v) else float(v) for v in metric.score_pairs(refs, cands)]


def _pool(workers: int, ontology: str | None, uncertain: str) -> Any:
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method).Pool(workers, initializer=_init_worker, initargs=(ontology, uncertain))


def _chunked(items: Sequence[Any], n_chunks: int) -> list[Sequence[Any]]:
    size = max(1, math.ceil(len(items) / max(1, n_chunks)))
    return [items[i : i + size] for i in range(0, len(items), size)]


class Runner:
    """Runs one benchmark config; ``stats`` says what was computed and what came from the cache."""

    def __init__(self, config: BenchConfig, out: str | Path | None = None, log: Log | None = None) -> None:
        from cxreval.evaluate import Evaluator

        self.config = config
        self.out = Path(out) if out is not None else Path(config.out)
        self.log: Log = log or (lambda msg: None)
        eng = config.engine
        llm = None
        if eng.name != "rules":
            from cxreval.llm.config import LLMConfig

            if eng.llm is None:
                raise InputError([InputProblem(file="config", field="engine.llm",
                                               message=f"engine {eng.name!r} needs llm settings")])
            llm = LLMConfig.model_validate(eng.llm)
        self.evaluator = Evaluator(eng.ontology, uncertain=eng.uncertain, engine=eng.name, llm=llm)
        self.engine_signature = str(self.evaluator.signature)
        self.workers = eng.workers or os.cpu_count() or 1
        self.stats = RunStats()
        self._metrics: dict[str, ReportMetric] = {}

    # -- metrics -----------------------------------------------------------------------------

    def metric(self, name: str) -> ReportMetric:
        """The configured metric object (built once)."""
        if name not in self._metrics:
            self._metrics[name] = get_metric(name, **self.config.metric_options.get(name, {}))
        return self._metrics[name]

    # -- the run -----------------------------------------------------------------------------

    def load(self) -> list[DatasetRun]:
        """Read every dataset and system; all input problems are raised together."""
        runs: list[DatasetRun] = []
        problems: list[InputProblem] = []
        for d in self.config.datasets:
            try:
                ids, refs, sites, normal = load_dataset(d)
            except InputError as exc:
                problems.extend(exc.problems)
                continue
            systems = []
            for s in self.config.systems_for(d.name):
                try:
                    cands = load_candidates(s, ids, refs, d.name)
                except InputError as exc:
                    problems.extend(exc.problems)
                    continue
                systems.append(SystemRun(s.name, s.baseline is not None, cands))
            runs.append(DatasetRun(d.name, ids, refs, sites, normal, systems))
        if problems:
            raise InputError(problems)
        return runs

    def judge(self, cache: BenchCache, runs: Sequence[DatasetRun]) -> None:
        """Fill ``SystemRun.judgements`` from the cache, judging only the missing pairs."""
        keyed, texts = _keyed_pairs(self.engine_signature, runs)
        self.stats.pairs += sum(len(k) for _, k in keyed)
        stored = cache.get_judgements(list(texts))
        missing = [(k, *texts[k]) for k in texts if k not in stored]
        self.stats.judgement_hits += len(texts) - len(missing)
        if missing:
            self.log(f"judging {len(missing):,} new pairs ({len(texts) - len(missing):,} cached)")
            new = self._judge_missing(missing)
            cache.put_judgements(new.items())
            self.stats.judged += len(new)
            stored.update(new)
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

    def _judge_missing(self, items: list[tuple[str, str, str]]) -> dict[str, str]:
        eng = self.config.engine
        if eng.name != "rules":
            pairs = [ReportPair(pair_id=k, reference=r, candidate=c) for k, r, c in items]
            result = self.evaluator.evaluate(pairs, progress=None)
            by_pair: dict[str, list[Any]] = {k: [] for k in result.pair_ids}
            for row in result.judgements:
                by_pair[row.pair_id].append(row)
            return {k: dumps(compact_rows(rows)) for k, rows in by_pair.items()}
        items = sorted(items, key=lambda t: (t[1], t[2]))
        ontology = None if eng.ontology is None else str(eng.ontology)
        if self.workers <= 1 or len(items) < PARALLEL_MIN_PAIRS:
            _WORKER["evaluator"] = self.evaluator
            return dict(_judge_chunk(items))
        with _pool(self.workers, ontology, eng.uncertain) as pool:
            parts = pool.map(_judge_chunk, _chunked(items, max(self.workers * 4, len(items) // 5000)), chunksize=1)
        return {k: v for part in parts for k, v in part}

    def score_metrics(self, cache: BenchCache, runs: Sequence[DatasetRun]) -> None:
        """Fill ``SystemRun.metrics`` for every configured metric but the judgement-based one."""
        eng = self.config.engine
        for name in self.config.metrics:
            if name == JUDGEMENT_METRIC:
                continue
            t0 = time.perf_counter()
            metric = self.metric(name)
            keyed, texts = _keyed_pairs(str(metric.signature), runs)
            stored = cache.get_values(list(texts))
            missing = [k for k in texts if k not in stored]
            self.stats.metric_hits[name] = self.stats.metric_hits.get(name, 0) + len(texts) - len(missing)
            if missing:
                refs = [texts[k][0] for k in missing]
                cands = [texts[k][1] for k in missing]
                parallel = getattr(metric, "parallel_safe", name in ("bleu2", "rouge-l", "bleu4-corpus"))
                if parallel and self.workers > 1 and len(missing) >= PARALLEL_MIN_PAIRS:
                    opts = self.config.metric_options.get(name, {})
                    ontology = None if eng.ontology is None else str(eng.ontology)
                    idx = _chunked(list(range(len(missing))), self.workers * 2)
                    with _pool(self.workers, ontology, eng.uncertain) as pool:
                        parts = pool.starmap(_metric_chunk, [(name, opts, [refs[i] for i in ch], [cands[i] for i in ch])
                                                             for ch in idx])
                    values = [v for part in parts for v in part]
                else:
                    values = _metric_values(metric, refs, cands)
                new = {k: dumps(v) for k, v in zip(missing, values)}
                cache.put_values(new.items())
                stored.update(new)
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
        """The whole benchmark: load, judge, score, analyse."""
        from cxreval.bench.analysis import analyse

        t0 = time.perf_counter()
        runs = self.load()
        self.stats.timings["load"] = time.perf_counter() - t0
        with BenchCache(self.out / "cache.sqlite") as cache:
            t = time.perf_counter()
            self.judge(cache, runs)
            self.stats.timings["judge"] = time.perf_counter() - t
            self.score_metrics(cache, runs)
        t = time.perf_counter()
        result = analyse(self.config, runs, self, created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self.stats.timings["analyse"] = time.perf_counter() - t
        self.stats.timings["total"] = time.perf_counter() - t0
        return result.model_copy(update={"timings": dict(self.stats.timings)})


def run_benchmark(config: BenchConfig, out: str | Path | None = None, log: Log | None = None) -> tuple[BenchmarkResult, RunStats]:
    """Run ``config``; returns the result and what was computed vs taken from the cache."""
    runner = Runner(config, out, log)
    return runner.run(), runner.stats


__all__ = ["DatasetRun", "RunStats", "Runner", "SystemRun", "run_benchmark"]


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
