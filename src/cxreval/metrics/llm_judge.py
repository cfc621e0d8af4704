"""Report-pair metrics whose per-pair verdict comes from an LLM (GREEN-style, FineRadScore-style).

One :class:`PairJudge` turns a (reference, candidate) pair into one call through cxreval's LLM
stack: the versioned prompt file (``llm/prompts/<name>.md``, its hash in every cache key), the
answer store (:class:`~cxreval.llm.cache.AnswerCache`: a rerun asks nothing), and the runner's
fault handling (retries with backoff, ``Retry-After``, one re-ask showing the model its error,
the budget). A pair whose answer stayed unusable is not scored (NaN): the metric's value is the
mean over the scored pairs and the failures are kept in ``failures``.

:class:`LLMPairMetric` is the base of the registered metrics: each takes ``llm`` (an
:class:`~cxreval.llm.config.LLMConfig` or its settings) and reads one number per pair out of the
judge's validated answer. Metrics of one family share the judge's calls: the answer store
serves the second metric of a pair from the first one's answer.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cxreval.metrics.base import PairMeanMetric, check_lengths
from cxreval.scores.signature import Signature


@dataclass
class JudgeRun:
    """Validated answer items per pair (None: the pair could not be judged), failures and usage."""

    answers: list[dict[str, Any] | None]
    failures: dict[int, str] = field(default_factory=dict)  # pair index -> error
    usage: Any = None


class PairJudge:
    """Builds the call for a pair (prompt, schema, parser) and runs many through the LLM runner.

    Subclasses set ``name``, ``version``, ``prompt_name``, ``schema`` and implement
    :meth:`render` (the user prompt's values) and :meth:`parse_value` (an answer -> one item).
    """

    name: str
    version: str
    prompt_name: str
    schema: ClassVar[dict[str, Any]]
    #: What the one re-ask reminds the model of (the runner's default names entity ids, which
    #: a pair judge's answer does not have).
    reask_hint: str = "with every field the format requires and only the allowed values"

    def __init__(self, config: Any) -> None:
        from cxreval.llm.config import LLMConfig
        from cxreval.llm.prompts import load_prompt

        self.config: LLMConfig = config if isinstance(config, LLMConfig) else LLMConfig.from_settings(dict(config))
        self.prompt = load_prompt(self.prompt_name)

    @property
    def engine(self) -> str:
        return f"{self.name}@{self.version}"

    def signature(self, metric: str) -> Signature:
        """The signature of ``metric`` read out of this judge's answers."""
        p = self.config.answer_params()
        opts = {k: str(p[k]) for k in ("provider", "temperature", "max_tokens", "seed")}
        return Signature(
            metric=metric,
            ontology="none",
            engine=self.engine,
            model=self.config.model,
            prompt=f"{self.prompt.signature}#{self.prompt.sha256[:12]}",
            options=opts,
        )

    def render(self, reference: str, candidate: str) -> dict[str, str]:
        """The values of the user prompt (fenced report blocks included)."""
        raise NotImplementedError

    def parse_value(self, value: dict[str, Any], reference: str, candidate: str) -> dict[str, Any]:
        """One validated item from the answer object; raise :class:`AnswerError` when it does not fit."""
        raise NotImplementedError

    def key(self, reference: str, candidate: str) -> str:
        from cxreval.llm.cache import cache_key

        return cache_key(
            {
                "engine": self.engine,
                "prompt": self.prompt.signature,
                "prompt_sha": self.prompt.sha256,
                "schema": self.schema,
                "params": self.config.answer_params(),
                "pair_sha": hashlib.sha256(f"{reference}\x00{candidate}".encode()).hexdigest(),
            }
        )

    def task(self, reference: str, candidate: str) -> Any:
        from cxreval.llm.runner import Task
        from cxreval.llm.schemas import ParsedAnswer, load_json

        def parse(raw: str) -> ParsedAnswer:
            value, duplicates = load_json(raw)
            from cxreval.llm.schemas import raise_problems

            raise_problems([f"{k}: given twice" for k, _ in duplicates])
            return ParsedAnswer(items=[self.parse_value(value, reference, candidate)])

        messages = [
            {"role": "system", "content": self.prompt.render("system")},
            {"role": "user", "content": self.prompt.render("user", **self.render(reference, candidate))},
        ]
        return Task(
            key=self.key(reference, candidate),
            kind=self.name,
            engine=self.engine,
            messages=messages,
            schema=self.schema,
            schema_name=f"cxreval_{self.name.replace('-', '_')}",
            parse=parse,
            reask_hint=self.reask_hint,
        )

    def run(self, references: Sequence[str], candidates: Sequence[str], *, cache: Any = None) -> JudgeRun:
        """Judge every pair (identical pairs cost one call; cached answers cost none)."""
        check_lengths(references, candidates)
        return asyncio.run(self._arun(list(references), list(candidates), cache))

    async def _arun(self, references: list[str], candidates: list[str], cache: Any) -> JudgeRun:
        from cxreval.llm.cache import AnswerCache
        from cxreval.llm.runner import LLMRunner

        tasks = [self.task(r, c) for r, c in zip(references, candidates)]
        own = cache is None
        store = cache or AnswerCache(self.config.resolved_cache_path())
        runner = LLMRunner(self.config, cache=store)
        try:
            outcomes, usage = await runner.run(tasks, label=self.name)
        finally:
            await runner.aclose()
            if own:
                store.close()
        answers: list[dict[str, Any] | None] = []
        failures: dict[int, str] = {}
        for i, t in enumerate(tasks):
            out = outcomes[t.key]
            if out.ok and out.value is not None:
                answers.append(out.value["items"][0])
            else:
                answers.append(None)
                failures[i] = f"{out.stage or 'answer'}: {out.error}"
        return JudgeRun(answers, failures, usage)


class LLMPairMetric(PairMeanMetric):
    """A pair-mean metric read out of a :class:`PairJudge`'s answers (NaN where a pair failed).

    ``reader`` maps a validated answer item to the pair's value; ``last_run`` keeps the last
    :class:`JudgeRun` (failures, usage) for reports.
    """

    judge_class: type[PairJudge]
    reader: Callable[[dict[str, Any]], float]
    parallel_safe = False

    def __init__(self, llm: Any = None, **judge_options: Any) -> None:
        if llm is None:
            from cxreval.metrics.base import MetricUnavailable

            raise MetricUnavailable(
                f"metric {self.name!r} needs an LLM endpoint: give llm settings (an LLMConfig "
                "or its fields: model, base_url, ...), e.g. metric_options: {"
                + self.name
                + ": {llm: {model: ..., base_url: ...}}}"
            )
        self.judge = self.judge_class(llm, **judge_options)
        self.last_run: JudgeRun | None = None

    @property
    def signature(self) -> Signature:
        return self.judge.signature(self.name)

    def pair_values(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        run = self.last_run = self.judge.run(references, candidates)
        reader = type(self).reader
        return np.array([np.nan if a is None else float(reader(a)) for a in run.answers], dtype=float)


def fenced(**blocks: str) -> dict[str, str]:
    """Template values for fenced report blocks: each text as sent (chat-template tokens
    neutralised) and one ``fence`` code for all of them (:func:`cxreval.llm.prompts.report_blocks`)."""
    from cxreval.llm.prompts import report_blocks

    return report_blocks(**blocks)


__all__ = ["JudgeRun", "LLMPairMetric", "PairJudge", "fenced"]
