"""Judgement engines behind one protocol, and the registry that builds them by name.

An :class:`Engine` judges a batch of (reference, candidate) pairs for one run and returns an
:class:`EngineOutput`: the judgement table of the pairs it scored, the extractions it really made
(``None`` for an engine that judges pairs without reading reports one by one), the pairs it could
not score (:class:`Failure`) and what its LLM calls cost. Every score is computed from that output
(:func:`cxreval.scores.spec_scores` on the table; label metrics from the extractions), whichever
engine wrote it, and signed with the engine's :attr:`Engine.signature`.

Registered engines (:func:`engine_names`):

- ``rules``: the offline rule engine, one extraction per distinct text (cached for the engine's
  life), then the deterministic comparison of :mod:`cxreval.judge.compare`.

``spec_compat=True`` keeps the comparison verdicts to SPEC-CXR's three values (a
``conflicting-comparison`` becomes ``other``); the engines that compare extractions (``rules``,
``llm-extract``) sign it as ``comparison:spec`` (default ``comparison:conflicts``). The pairwise
engines' model answers SPEC's three values only, so the option changes nothing there and their
signatures do not carry it.
- ``llm-extract``: one LLM call per distinct report text (:mod:`cxreval.extract.llm`), then the
  same comparison.
- ``llm-pairwise``: SPEC-CXR, one LLM call per pair (:mod:`cxreval.judge.llm_pairwise`).
- ``llm-pairwise-2pass``: ``llm-pairwise`` then a verification call per pair that returns the
  corrected table (:mod:`cxreval.judge.twopass`).

This module sits above ``judge`` and ``scores`` (it signs with :class:`~cxreval.scores.Signature`)
and below ``evaluate``, which dispatches through :func:`get_engine`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from cxreval.extract.models import Extraction
from cxreval.extract.rules import RuleExtractor, RuleSet, load_rules
from cxreval.io import ReportPair
from cxreval.judge.compare import SIZE_TOLERANCE, UncertainPolicy, compare_extractions
from cxreval.judge.crosscheck import REASON, STAGE, CrossCheck, InjectionFlag
from cxreval.judge.models import EntityJudgement
from cxreval.judge.table import COLUMNS, JudgementTable
from cxreval.literals import UNCERTAIN_POLICIES, UNGRADED_POLICIES, EngineName
from cxreval.ontology import Ontology
from cxreval.scores.signature import Signature

if TYPE_CHECKING:
    from cxreval.extract.llm import LLMExtractor
    from cxreval.judge.llm_pairwise import LLMPairwiseJudge
    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.config import LLMConfig
    from cxreval.llm.runner import LLMRunner, Outcome, Usage

T = TypeVar("T")


class Failure(BaseModel):
    """A pair that could not be judged, and why; it is left out of every score.

    ``stage``: which call failed (``pairwise``, ``verify``, ``extract-reference``,
    ``extract-candidate``; ``extract`` for a report read on its own, whose ``pair_id`` is empty;
    ``injection-check`` for a pair the cross-check of :mod:`cxreval.judge.crosscheck` listed).
    ``reason``: ``answer`` (invalid after the re-ask), ``transport`` (no answer after all
    retries), ``deadline`` (the last attempt had no whole answer within ``--timeout``),
    ``budget`` (not run: ``--max-cost`` reached), ``stopped`` (not run: the endpoint
    refused the run) or ``injection`` (its text reads like instructions to the judge and the
    answer disagrees with the rule engine). ``raw`` holds the model's answers, if any.
    """

    model_config = ConfigDict(frozen=True)

    pair_id: str
    stage: str
    reason: str
    error: str
    raw: list[str] = []
    run: int = 1


@dataclass(frozen=True)
class EngineOutput:
    """What an engine made of a batch of pairs in one run.

    ``table``: the judgement rows of the pairs it scored (``table.pair_ids``), signed with the
    engine's signature. ``extractions``: text -> :class:`Extraction` for every report text it read
    (``None``: the engine makes no extraction). ``failures``: the pairs it could not score.
    ``usage``: calls, tokens and cost (``None`` for an offline engine). ``flags``: the pairs
    whose text reads like instructions to the judge (LLM engines; :mod:`cxreval.judge.crosscheck`).
    """

    table: JudgementTable
    extractions: dict[str, Extraction] | None
    failures: list[Failure] = field(default_factory=list)
    usage: Usage | None = None
    flags: list[InjectionFlag] = field(default_factory=list)


@dataclass(frozen=True)
class ExtractOutput:
    """What an extracting engine read in report texts: ``extractions`` (text -> Extraction) for
    the texts it read, ``failures`` (text -> :class:`Failure`, stage ``extract``) for the others."""

    extractions: dict[str, Extraction]
    failures: dict[str, Failure] = field(default_factory=dict)
    usage: Usage | None = None


@runtime_checkable
class Engine(Protocol):
    """A judgement engine: report pairs -> :class:`EngineOutput`.

    ``offline``: the engine makes no call and its coroutines never await, so it can be run
    without an event loop (:func:`run_offline`) and repeated runs are copies of the first.
    ``runner``: the LLM runner (answer store, backend, budget) an LLM engine makes its calls
    through, shared by the caller across runs; without one an LLM engine opens its own.
    """

    name: str
    offline: bool
    ontology: Ontology

    @property
    def signature(self) -> Signature: ...

    async def judge(
        self,
        pairs: Sequence[ReportPair],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> EngineOutput:
        """Judge ``pairs`` for run ``run`` (0-based: repeated runs have their own cache keys)."""
        ...

    async def extract(
        self,
        texts: Sequence[str],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> ExtractOutput:
        """Extractions of report texts; an engine that makes none raises :class:`NoExtraction`."""
        ...


class UnknownEngine(ValueError):
    """An engine name that is not registered; the message lists the registered ones."""


class NoExtraction(ValueError):
    """Asked for the extraction of a report from an engine that makes none."""


def run_offline(coro: Coroutine[Any, Any, T]) -> T:
    """The result of an offline engine's coroutine, run here (no event loop needed, and none
    disturbed when the caller is inside one)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("an offline engine's coroutine awaited; run it in an event loop")


@asynccontextmanager
async def open_runner(
    config: LLMConfig, runner: LLMRunner | None = None, *, cache: AnswerCache | None = None, retry_failed: bool = False
) -> AsyncIterator[LLMRunner]:
    """``runner`` when given (the caller closes it), else a runner on ``cache`` (or the answer
    store of ``config``, closed afterwards) that is closed on exit."""
    if runner is not None:
        yield runner
        return
    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.runner import LLMRunner

    store = cache or AnswerCache(config.resolved_cache_path())
    own = LLMRunner(config, cache=store, retry_failed=retry_failed)
    try:
        yield own
    finally:
        await own.aclose()
        if cache is None:
            store.close()


def _failure(pair_id: str, stage: str, out: Outcome, run: int) -> Failure:
    return Failure(pair_id=pair_id, stage=stage, reason=out.stage or "answer", error=out.error, raw=out.raw, run=run + 1)


# -- rules ---------------------------------------------------------------------------------------
class RulesEngine:
    """The offline rule engine; each distinct text is read once for the engine's life.

    ``rules``: a user's rule file (or the :class:`~cxreval.extract.rules.RuleSet` loaded from one)
    that adds or overrides packaged rules; its hash enters the signature. A file that cannot be
    used raises :class:`~cxreval.extract.rules.RulesError` (naming the file and line).
    """

    name = "rules"
    offline = True

    def __init__(
        self,
        ontology: Ontology,
        uncertain: UncertainPolicy = "positive",
        spec_compat: bool = False,
        rules: RuleSet | str | Path | None = None,
        hierarchy: bool = True,
    ) -> None:
        self.ontology = ontology
        self.uncertain: UncertainPolicy = uncertain
        self.spec_compat = spec_compat
        self.hierarchy = hierarchy
        """The is-a rule (:func:`cxreval.judge.compare.match_hierarchy`); False: every entity on its own."""
        self.rules: RuleSet | None = user_rules(ontology, rules)
        """The rule set with a user's rules (None: the packaged rules only)."""
        self.extractor = RuleExtractor(ontology, self.rules)
        self.workers = 1
        """Processes that judge a batch of at least :data:`PARALLEL_MIN_PAIRS` pairs (results identical)."""

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="spec-cxr",
            ontology=self.ontology.signature,
            engine=self.extractor.signature,
            options={"uncertain": self.uncertain, **compare_options(self.spec_compat, self.hierarchy, self.ontology)},
        )

    @property
    def init_args(self) -> tuple[Ontology, UncertainPolicy, bool, RuleSet | None, bool]:
        """What builds this engine again (``RulesEngine(*init_args)``) in a worker process or a Ray
        actor (:attr:`factory`): the same ontology, policies, rules and judgement rule."""
        return (self.ontology, self.uncertain, self.spec_compat, self.rules, self.hierarchy)

    @property
    def factory(self) -> Callable[[], RulesEngine]:
        """A picklable function that builds this engine again (``RulesEngine(*init_args)``): the
        state of an :mod:`executor <cxreval.executors>`'s workers (its rule set travels whole, so a
        worker never reads the rule file again)."""
        return partial(RulesEngine, *self.init_args)

    def read(self, texts: Iterable[str]) -> dict[str, Extraction]:
        """The extraction of each distinct text (a text read before comes from the extractor's
        report cache, bounded by its byte budget: :mod:`cxreval.caches`)."""
        extract = self.extractor.extract
        return {text: extract(text) for text in dict.fromkeys(texts)}

    async def judge(
        self,
        pairs: Sequence[ReportPair],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "judging pairs",
    ) -> EngineOutput:
        if self.workers > 1 and len(pairs) >= PARALLEL_MIN_PAIRS:
            return self._judge_in_workers(pairs, progress, label)
        return self.judge_here(pairs, progress=progress, label=label)

    def judge_here(self, pairs: Sequence[ReportPair], *, progress: bool = False, label: str = "judging pairs") -> EngineOutput:
        """Judge in this process, whatever :attr:`workers` says (a worker's own chunk)."""
        read: dict[str, Extraction] = {}
        rows = self.judge_rows(progress_iter(pairs, progress, label), read)
        table = JudgementTable.from_rows(rows, [p.pair_id for p in pairs], str(self.signature))
        return EngineOutput(table=table, extractions=read)

    def judge_rows(self, pairs: Iterable[ReportPair], read: dict[str, Extraction] | None = None) -> list[EntityJudgement]:
        """The judgement rows of ``pairs``, in order (``read`` collects the extractions made)."""
        read = {} if read is None else read
        rows: list[EntityJudgement] = []
        for pair in pairs:
            rows.extend(self.judge_texts(pair.pair_id, pair.reference, pair.candidate, read))
        return rows

    def judge_texts(
        self, pair_id: str, reference: str, candidate: str, read: dict[str, Extraction] | None = None
    ) -> list[EntityJudgement]:
        """One pair's judgement rows from its two texts (each read once for the engine's life);
        every path that judges with the rule engine (evaluate, its workers, bench, Ray) calls it."""
        got = self.read([reference, candidate])
        if read is not None:
            read.update(got)
        return compare_extractions(
            pair_id, got[reference], got[candidate], self.ontology, self.uncertain, self.spec_compat, self.hierarchy
        )

    async def extract(
        self, texts: Sequence[str], run: int = 0, *, runner: LLMRunner | None = None, progress: bool = False, label: str = ""
    ) -> ExtractOutput:
        return ExtractOutput(extractions=self.read(texts))

    def _judge_in_workers(self, pairs: Sequence[ReportPair], progress: bool, label: str) -> EngineOutput:
        """The same rows as the one-process path, judged in chunks by :attr:`workers` processes
        (:mod:`cxreval.executors`); each worker reads a chunk's texts once. The extractions stay in
        the workers (label metrics read texts again through :meth:`extract`)."""
        from cxreval.executors import executor
        from cxreval.parallel import chunked

        items = [(p.pair_id, p.reference, p.candidate) for p in pairs]
        parts = chunked(items, self.workers)
        rows: list[EntityJudgement] = []
        with executor(self.workers, self.factory) as pool:
            done = pool.map(_judge_rows, parts)  # in order: rows come back in pair order
            for _, fields in progress_iter(zip(parts, done), progress, label, total=len(items), step=lambda got: len(got[0])):
                rows.extend(EntityJudgement.model_construct(**dict(zip(_ROW_FIELDS, f, strict=True))) for f in fields)
        table = JudgementTable.from_rows(rows, [p.pair_id for p in pairs], str(self.signature))
        return EngineOutput(table=table, extractions={})


#: Batches smaller than this are judged in the calling process (a pool costs more than it saves).
PARALLEL_MIN_PAIRS = 2_000
_ROW_FIELDS = COLUMNS  # a row as a worker sends it back: the judgement table's columns


def user_rules(ontology: Ontology, rules: RuleSet | str | Path | None) -> RuleSet | None:
    """The rule set of a user's rule file (loaded and checked now: :class:`RulesError` names the
    file and line), a rule set given as it is, or None (the packaged rules)."""
    if rules is None or isinstance(rules, RuleSet):
        return rules
    return load_rules(ontology, Path(rules))


def _judge_rows(engine: RulesEngine, items: Sequence[tuple[str, str, str]]) -> list[tuple[str, ...]]:
    """Worker: the judgement rows of a chunk of (pair id, reference, candidate), as plain tuples."""
    rows = engine.judge_rows(ReportPair(pair_id=pid, reference=ref, candidate=cand) for pid, ref, cand in items)
    return [tuple(getattr(r, f) for f in _ROW_FIELDS) for r in rows]


def progress_iter(
    pairs: Iterable[Any], show: bool, label: str, *, total: int | None = None, step: Callable[[Any], int] | None = None
) -> Iterable[Any]:
    """``pairs`` with a progress bar on stderr when ``show`` (``step``: how many pairs an item is;
    ``total``: how many pairs in all, when ``pairs`` is not a sequence of single pairs)."""
    if not show:
        yield from pairs
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("judge", total=len(pairs) if total is None else total)  # type: ignore[arg-type]
        for pair in pairs:
            yield pair
            bar.advance(task, 1 if step is None else step(pair))


# -- LLM engines ---------------------------------------------------------------------------------
class _LLMEngine:
    """What the LLM engines share: the endpoint checks, the signature and the own-runner rule."""

    name: str
    offline = False
    calls: LLMExtractor | LLMPairwiseJudge
    answers_spec = False  # the model answers SPEC-CXR's three comparison values only (pairwise)

    def __init__(
        self, ontology: Ontology, uncertain: UncertainPolicy, llm: LLMConfig, spec_compat: bool = False, hierarchy: bool = True
    ) -> None:
        llm.check_endpoint()  # --local-only, before anything is sent
        llm.api_key()  # a missing key fails now, naming the variable (never the value)
        self.ontology = ontology
        self.uncertain: UncertainPolicy = uncertain
        self.spec_compat = spec_compat
        self.hierarchy = hierarchy
        self.llm = llm
        self._checker: CrossCheck | None = None

    @property
    def prompt_signature(self) -> str:
        return self.calls.prompt.signature

    @property
    def judged_by_hierarchy(self) -> bool:
        """Whether this engine's rows follow the finding hierarchy's rule (the cross-check compares
        them with the rule engine's under the same rule)."""
        return self.hierarchy

    def signature_options(self) -> dict[str, str]:
        cfg = self.llm
        return {
            "uncertain": self.uncertain,
            "schema": cfg.schema_style,
            "temperature": cfg.temperature_label(),
            "format": cfg.response_format,
        }

    def cross_check(
        self, judged: Sequence[tuple[ReportPair, list[EntityJudgement]]], run: int
    ) -> tuple[list[tuple[ReportPair, list[EntityJudgement]]], list[Failure], list[InjectionFlag]]:
        """The judged pairs to score, the ones listed as failures, and the flags: a pair whose text
        reads like instructions to the judge is flagged, and listed when this engine and the rule
        engine disagree on it (:mod:`cxreval.judge.crosscheck`). The pairwise engines' model
        answers SPEC-CXR's comparison values, so they are compared with the rule engine's."""
        if self._checker is None:
            spec = self.spec_compat or self.answers_spec
            self._checker = CrossCheck(self.ontology, self.uncertain, spec, hierarchy=self.judged_by_hierarchy)
        kept: list[tuple[ReportPair, list[EntityJudgement]]] = []
        failures: list[Failure] = []
        flags: list[InjectionFlag] = []
        for pair, rows in judged:
            flag = self._checker.check(pair, rows, run + 1)
            if flag is not None:
                flags.append(flag)
            if flag is not None and flag.listed:
                failures.append(
                    Failure(pair_id=pair.pair_id, stage=STAGE, reason=REASON, run=run + 1, error=flag.error(self.calls.signature))
                )
            else:
                kept.append((pair, rows))
        return kept, failures, flags

    def output(
        self,
        judged: Sequence[tuple[ReportPair, list[EntityJudgement]]],
        failures: list[Failure],
        usage: Usage | None,
        run: int,
        extractions: dict[str, Extraction] | None = None,
    ) -> EngineOutput:
        """The engine's output from its judged pairs: :meth:`cross_check`, then the judgement
        table of the pairs kept, the failures (the calls' and the cross-check's) and the flags."""
        kept, listed, flags = self.cross_check(judged, run)
        table = JudgementTable.from_rows([r for _, rows in kept for r in rows], [p.pair_id for p, _ in kept], str(self.signature))
        return EngineOutput(table=table, extractions=extractions, failures=failures + listed, usage=usage, flags=flags)

    @property
    def signature(self) -> Signature:
        return Signature(
            metric="spec-cxr",
            ontology=self.ontology.signature,
            engine=self.calls.signature,
            model=f"{self.llm.provider}:{self.llm.model}",
            prompt=self.prompt_signature,
            options=self.signature_options(),
        )

    async def extract(
        self,
        texts: Sequence[str],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> ExtractOutput:
        raise no_extraction(self.name)


class LLMExtractEngine(_LLMEngine):
    """``llm-extract``: one LLM call per distinct report text, then the deterministic comparison."""

    name = "llm-extract"

    def __init__(
        self, ontology: Ontology, uncertain: UncertainPolicy, llm: LLMConfig, spec_compat: bool = False, hierarchy: bool = True
    ) -> None:
        from cxreval.extract.llm import LLMExtractor

        super().__init__(ontology, uncertain, llm, spec_compat, hierarchy)
        self.calls: LLMExtractor = LLMExtractor(ontology, llm)

    def signature_options(self) -> dict[str, str]:
        return {**super().signature_options(), **compare_options(self.spec_compat, self.hierarchy, self.ontology)}

    async def extract(
        self,
        texts: Sequence[str],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> ExtractOutput:
        tasks = {t: self.calls.task(t, run) for t in texts}
        async with open_runner(self.llm, runner) as r:
            outcomes, usage = await r.run(list(tasks.values()), progress=progress, label=label)
        done: dict[str, Extraction] = {}
        failed: dict[str, Failure] = {}
        for text, task in tasks.items():
            out = outcomes[task.key]
            if out.ok and out.value is not None:
                done[text] = self.calls.extraction(out.value)
            else:
                failed[text] = _failure("", "extract", out, run)
        return ExtractOutput(extractions=done, failures=failed, usage=usage)

    async def judge(
        self,
        pairs: Sequence[ReportPair],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> EngineOutput:
        read = await self.extract(
            [t for p in pairs for t in (p.reference, p.candidate)], run, runner=runner, progress=progress, label=label
        )
        done = read.extractions
        judged: list[tuple[ReportPair, list[EntityJudgement]]] = []
        failures: list[Failure] = []
        for p in pairs:
            ok = True
            for stage, text in (("extract-reference", p.reference), ("extract-candidate", p.candidate)):
                if text not in done:
                    failures.append(read.failures[text].model_copy(update={"pair_id": p.pair_id, "stage": stage}))
                    ok = False
            if ok:
                judged.append(
                    (
                        p,
                        compare_extractions(
                            p.pair_id,
                            done[p.reference],
                            done[p.candidate],
                            self.ontology,
                            self.uncertain,
                            self.spec_compat,
                            self.hierarchy,
                        ),
                    )
                )
        return self.output(judged, failures, read.usage, run, extractions=done)


class LLMPairwiseEngine(_LLMEngine):
    """``llm-pairwise``: SPEC-CXR's judge, one LLM call per (reference, candidate) pair."""

    name = "llm-pairwise"
    answers_spec = True

    def __init__(
        self, ontology: Ontology, uncertain: UncertainPolicy, llm: LLMConfig, spec_compat: bool = False, hierarchy: bool = True
    ) -> None:
        from cxreval.judge.llm_pairwise import LLMPairwiseJudge

        super().__init__(ontology, uncertain, llm, spec_compat, hierarchy)
        self.calls: LLMPairwiseJudge = LLMPairwiseJudge(ontology, llm, uncertain, hierarchy)

    @property
    def judged_by_hierarchy(self) -> bool:
        return self.calls.hierarchy  # sparse answers only: a dense answer is SPEC-CXR's, flat

    def signature_options(self) -> dict[str, str]:
        return {**super().signature_options(), "hierarchy": hierarchy_option(self.calls.hierarchy, self.ontology)}

    async def first_pass(
        self, pairs: Sequence[ReportPair], run: int, runner: LLMRunner, progress: bool, label: str
    ) -> tuple[list[tuple[ReportPair, list[EntityJudgement]]], list[Failure], Usage]:
        """Each pair the pairwise call judged with its rows (in pair order), the failures, usage."""
        tasks = {p.pair_id: self.calls.task(p, run) for p in pairs}
        outcomes, usage = await runner.run(list(tasks.values()), progress=progress, label=label)
        judged: list[tuple[ReportPair, list[EntityJudgement]]] = []
        failures: list[Failure] = []
        for p in pairs:
            out = outcomes[tasks[p.pair_id].key]
            if out.ok:
                assert out.value is not None
                judged.append((p, self.calls.rows(p.pair_id, out.value)))
            else:
                failures.append(_failure(p.pair_id, "pairwise", out, run))
        return judged, failures, usage

    async def judge(
        self,
        pairs: Sequence[ReportPair],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> EngineOutput:
        async with open_runner(self.llm, runner) as r:
            judged, failures, usage = await self.first_pass(pairs, run, r, progress, label)
        return self.output(judged, failures, usage, run)


class TwoPassEngine(LLMPairwiseEngine):
    """``llm-pairwise-2pass``: the pairwise judgement, then a verification call per judged pair
    whose corrected table replaces the first (:mod:`cxreval.judge.twopass`)."""

    name = "llm-pairwise-2pass"

    def __init__(
        self, ontology: Ontology, uncertain: UncertainPolicy, llm: LLMConfig, spec_compat: bool = False, hierarchy: bool = True
    ) -> None:
        from cxreval.judge.twopass import TwoPassJudge

        super().__init__(ontology, uncertain, llm, spec_compat, hierarchy)
        self.verifier = TwoPassJudge(self.calls)

    @property
    def prompt_signature(self) -> str:
        return self.verifier.prompt_signature

    def signature_options(self) -> dict[str, str]:
        return {**super().signature_options(), "passes": "2"}

    async def judge(
        self,
        pairs: Sequence[ReportPair],
        run: int = 0,
        *,
        runner: LLMRunner | None = None,
        progress: bool = False,
        label: str = "LLM calls",
    ) -> EngineOutput:
        async with open_runner(self.llm, runner) as r:
            judged, failures, usage = await self.first_pass(pairs, run, r, progress, label)
            checks = [(p, self.verifier.verify_task(p.reference, p.candidate, rows, run)) for p, rows in judged]
            outcomes, verify_usage = await r.run([t for _, t in checks], progress=progress, label="verification calls")
        usage.add(verify_usage)
        verified: list[tuple[ReportPair, list[EntityJudgement]]] = []
        for p, task in checks:
            out = outcomes[task.key]
            if out.ok and out.value is not None:
                verified.append((p, self.calls.rows(p.pair_id, out.value)))
            else:
                failures.append(_failure(p.pair_id, "verify", out, run))
        return self.output(verified, failures, usage, run)


# -- registry ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineInfo:
    """A registered engine: how to build it, whether it needs ``llm=LLMConfig(...)`` and whether it
    makes extractions (what label metrics such as the Ran Score are computed from). The names are
    :data:`cxreval.literals.ENGINES`, in order (the command line's choices; a test keeps them so)."""

    name: EngineName
    build: Callable[[Ontology, UncertainPolicy, LLMConfig | None, bool, bool], Engine]
    needs_llm: bool
    extracts: bool
    help: str


def _llm(
    cls: Callable[[Ontology, UncertainPolicy, LLMConfig, bool, bool], Engine],
) -> Callable[[Ontology, UncertainPolicy, LLMConfig | None, bool, bool], Engine]:
    def build(
        ontology: Ontology, uncertain: UncertainPolicy, llm: LLMConfig | None, spec_compat: bool, hierarchy: bool
    ) -> Engine:
        assert llm is not None
        return cls(ontology, uncertain, llm, spec_compat, hierarchy)

    return build


ENGINES: dict[str, EngineInfo] = {
    info.name: info
    for info in (
        EngineInfo(
            "rules",
            lambda onto, unc, llm, spec, hier: RulesEngine(onto, unc, spec, None, hier),
            needs_llm=False,
            extracts=True,
            help="offline rule engine",
        ),
        EngineInfo(
            "llm-extract",
            _llm(LLMExtractEngine),
            needs_llm=True,
            extracts=True,
            help="one LLM call per report text, then the deterministic comparison",
        ),
        EngineInfo(
            "llm-pairwise", _llm(LLMPairwiseEngine), needs_llm=True, extracts=False, help="SPEC-CXR: one LLM call per pair"
        ),
        EngineInfo(
            "llm-pairwise-2pass",
            _llm(TwoPassEngine),
            needs_llm=True,
            extracts=False,
            help="llm-pairwise, then one verification call per pair",
        ),
    )
}


def engine_names() -> tuple[str, ...]:
    """The registered engines, in registry order."""
    return tuple(ENGINES)


def engine_info(name: str) -> EngineInfo:
    """The registry entry of ``name``; :class:`UnknownEngine` lists the registered ones."""
    info = ENGINES.get(name)
    if info is None:
        raise UnknownEngine(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return info


def check_engine_options(
    name: str, uncertain: str, *, llm: LLMConfig | None = None, rules: RuleSet | str | Path | None = None, hierarchy: bool = True
) -> None:
    """Refuse engine options that cannot work together, before anything is built: an unknown
    engine or uncertain policy, an LLM engine without ``llm`` or with a graded policy, a rule
    file for an engine other than ``rules``."""
    info = engine_info(name)
    if rules is not None and name != "rules":
        raise ValueError(f"a rule file applies to the rules engine; engine {name!r} reads reports without it")
    if uncertain not in UNCERTAIN_POLICIES:
        raise ValueError(f"unknown uncertain policy {uncertain!r}; choose from {', '.join(UNCERTAIN_POLICIES)}")
    if info.needs_llm and llm is None:
        raise ValueError(f"engine {name!r} needs llm=LLMConfig(...)")
    problem = graded_policy_problem(name, uncertain)
    if problem:
        raise ValueError(problem)


def graded_policy_problem(name: str, uncertain: str) -> str | None:
    """Why engine ``name`` cannot take the uncertainty policy ``uncertain``, or None. llm-extract's
    answers grade no hedge (a status only): a graded policy would silently read every hedge as
    "possible". The rule engine grades hedges, and the pairwise judges are told each grade's words."""
    info = engine_info(name)
    if info.needs_llm and info.extracts and uncertain not in UNGRADED_POLICIES:
        return (
            f"uncertain policy {uncertain!r} counts graded hedges, which engine {name!r} does not grade "
            "(its answers give a status only); it takes positive or negative"
        )
    return None


def get_engine(
    name: str,
    ontology: Ontology,
    uncertain: UncertainPolicy = "positive",
    *,
    llm: LLMConfig | None = None,
    spec_compat: bool = False,
    rules: RuleSet | str | Path | None = None,
    hierarchy: bool = True,
) -> Engine:
    """The engine ``name`` for ``ontology``, the uncertain policy and ``spec_compat`` (SPEC-CXR's
    three comparison values only); LLM engines need ``llm`` and check its endpoint
    (``--local-only``) and API key now, before anything is sent. ``rules``: a user's rule file
    for the rule engine (:class:`RulesEngine`); the other engines take none."""
    check_engine_options(name, uncertain, llm=llm, rules=rules, hierarchy=hierarchy)
    info = engine_info(name)
    if rules is not None:
        return RulesEngine(ontology, uncertain, spec_compat, rules, hierarchy)
    return info.build(ontology, uncertain, llm, spec_compat, hierarchy)


def compare_options(spec_compat: bool, hierarchy: bool, ontology: Ontology) -> dict[str, str]:
    """The signature options of an engine that compares extractions itself: its comparison values,
    judgement rule and size rule (the rule engine and ``llm-extract``)."""
    return {
        "comparison": comparison_option(spec_compat),
        "hierarchy": hierarchy_option(hierarchy, ontology),
        "sizes": sizes_option(),
    }


def hierarchy_option(hierarchy: bool, ontology: Ontology) -> str:
    """The signature's ``hierarchy`` option: ``is-a`` (the finding hierarchy's judgement rule, with
    the ontology's parents and near-synonym classes) or ``flat`` (every entity on its own; also
    for an ontology that declares no hierarchy)."""
    return "is-a" if hierarchy and ontology.has_hierarchy else "flat"


def sizes_option() -> str:
    """The signature's ``sizes`` option: the tolerance within which two stated sizes of one finding
    agree (:data:`cxreval.judge.compare.SIZE_TOLERANCE`, ``x1.5``); the size thresholds are the
    ontology's (its version is in the signature)."""
    return f"x{SIZE_TOLERANCE:g}"


def comparison_option(spec_compat: bool) -> str:
    """The signature's ``comparison`` option: ``spec`` (SPEC-CXR's three values) or ``conflicts``
    (with ``conflicting-comparison``)."""
    return "spec" if spec_compat else "conflicts"


def no_extraction(name: str) -> NoExtraction:
    """The error for asking engine ``name`` for an extraction it does not make."""
    extracting = " or ".join(repr(n) for n, i in ENGINES.items() if i.extracts)
    return NoExtraction(
        f"engine {name!r} judges pairs and makes no extraction of a report; label metrics "
        f"(Ran Score, CheXpert-14) need the {extracting} engine"
    )


class ExtractionFailed(RuntimeError):
    """Reports whose LLM extraction stayed unusable, so no number can be computed from them."""


class EngineRunner:
    """An engine with what it needs to run: the LLM settings, the answer store and the retry
    policy. The one path from report texts to a judgement table or to extractions, which the
    evaluator, the table metrics and the label metrics all take.

    An offline engine runs here; an LLM engine opens a runner on the answer store (the given one,
    else the config's) for each call, so a rerun repeats no finished LLM call.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        llm: LLMConfig | None = None,
        cache: AnswerCache | None = None,
        retry_failed: bool = False,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.engine = engine
        self.llm = llm
        self.cache = cache
        self.retry_failed = retry_failed
        self._options = dict(options or {})

    @classmethod
    def build(
        cls,
        ontology: Ontology,
        *,
        uncertain: UncertainPolicy = "positive",
        engine: EngineName = "rules",
        llm: LLMConfig | None = None,
        spec_compat: bool = False,
        retry_failed: bool = False,
        cache: AnswerCache | None = None,
        rules: RuleSet | str | Path | None = None,
        workers: int | None = None,
        hierarchy: bool = True,
    ) -> EngineRunner:
        """The engine ``engine`` for these options (:func:`get_engine`), ready to run; ``workers``
        processes judge a large batch with the rule engine (LLM engines use ``concurrency``)."""
        info = engine_info(engine)  # an unknown name fails first, listing the known ones
        if info.needs_llm and llm is not None:
            from cxreval.llm.config import require_backend

            require_backend(llm.provider)  # the HTTP client is an optional extra: say so before any work
        built = get_engine(engine, ontology, uncertain, llm=llm, spec_compat=spec_compat, rules=rules, hierarchy=hierarchy)
        if workers is not None:
            if workers < 1:
                raise ValueError("workers must be at least 1")
            if hasattr(built, "workers"):  # the rule engine; LLM engines use concurrency
                built.workers = workers
        options = {
            "ontology": ontology,
            "uncertain": uncertain,
            "engine": engine,
            "llm": llm,
            "spec_compat": spec_compat,
            "retry_failed": retry_failed,
            "cache": cache,
            "rules": getattr(built, "rules", None),
            "workers": workers,
            "hierarchy": hierarchy,
        }
        return cls(built, llm=llm, cache=cache, retry_failed=retry_failed, options=options)

    def options(self) -> dict[str, Any]:
        """The options :meth:`build` was given (what rebuilds the same engine elsewhere)."""
        return dict(self._options)

    @property
    def offline(self) -> bool:
        return bool(self.engine.offline)

    def open(self) -> Any:
        """An async context with the LLM runner of one call (see the class doc)."""
        assert self.llm is not None
        return open_runner(self.llm, cache=self.cache, retry_failed=self.retry_failed)

    def judge(
        self, pairs: Sequence[ReportPair], run: int = 0, *, progress: bool = False, label: str = "LLM calls"
    ) -> EngineOutput:
        """The engine's output on ``pairs`` for run ``run`` (an LLM engine's failures included)."""
        if self.offline:
            return run_offline(self.engine.judge(pairs, run, progress=progress))
        import asyncio

        async def go() -> EngineOutput:
            async with self.open() as runner:
                return await self.engine.judge(pairs, run, runner=runner, progress=progress, label=label)

        return asyncio.run(go())

    def judge_texts(self, references: Sequence[str], candidates: Sequence[str]) -> EngineOutput:
        """:meth:`judge` on pairs of texts, their ids ``"0"``, ``"1"``... in input order."""
        return self.judge(
            [
                ReportPair(pair_id=str(i), reference=r, candidate=c)
                for i, (r, c) in enumerate(zip(references, candidates, strict=True))
            ]
        )

    def extract(self, text: str) -> Extraction:
        """The extraction of one report text (:meth:`extract_all`)."""
        return self.extract_all([text])[text]

    def extract_all(self, texts: Iterable[str]) -> dict[str, Extraction]:
        """Extractions of report texts by this engine.

        ``rules``: the rule engine, cached by the text's hash for the life of the engine.
        ``llm-extract``: one LLM call per distinct text, through the answer store; a text whose
        answer stayed unusable raises :class:`ExtractionFailed` (never a rule-engine stand-in).
        The pairwise engines judge pairs and make no extraction: asking for one is an error
        (:class:`NoExtraction`, a ``ValueError``).
        """
        distinct = list(dict.fromkeys(texts))
        if self.offline:
            return run_offline(self.engine.extract(distinct)).extractions
        import asyncio

        async def go() -> ExtractOutput:
            async with self.open() as runner:
                return await self.engine.extract(distinct, 0, runner=runner, progress=False, label="LLM calls")

        read = asyncio.run(go())
        failed = [t for t in distinct if t not in read.extractions]
        if failed:
            first = read.failures[failed[0]]
            raise ExtractionFailed(
                f"{len(failed)} of {len(distinct)} reports have no usable LLM extraction "
                f"(first: {first.reason}: {first.error}); rerun with --retry-failed "
                "or use the rules engine"
            )
        return read.extractions
