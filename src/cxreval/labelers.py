"""A Ran-style LLM labeler: one call per report returns one binary value per label.

The few-shot prompt is built from a versioned exemplar library (``exemplars/<labelset>.yaml``:
a definition and positive / negative example sentences per label, written by us) and the
label set of the ontology. Answers are validated like every other LLM answer (one re-ask that
shows the error; still invalid -> a failure with the raw answer, never a label).

A labeler, not a judgement engine: it reads one report at a time into labels, and
:func:`llm_label_metrics` scores them (:mod:`cxreval.scores.labels`). It sits above ``llm``
(calls, answer store, prompts and exemplars, which stay in ``cxreval/llm/``) and ``scores``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from functools import cache
from importlib import resources
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cxreval.literals import UncertainLabel
from cxreval.llm.cache import AnswerCache, cache_key
from cxreval.llm.config import LLMConfig
from cxreval.llm.prompts import load_prompt, report_blocks
from cxreval.llm.runner import LLMRunner, Outcome, Task, Usage
from cxreval.llm.schemas import AnswerError, ParsedAnswer, load_json
from cxreval.ontology import Ontology

# 2: chat-template tokens in report text neutralised before sending
# 3: prompt labels@3: a hedged finding is -1 (uncertain), left out of the Ran Score as the paper
#    leaves uncertain cases out of its reference; exemplars ran21@2
ENGINE_VERSION = "3"
#: A label's values: present, absent (denied or not mentioned), uncertain (only raised as a possibility).
LABEL_VALUES = (1, 0, -1)


class LabelExemplars(BaseModel):
    """What one label means, with sentences that are and are not that label."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    definition: str
    positive: list[str] = Field(min_length=1)
    negative: list[str] = Field(min_length=1)


class ExemplarLibrary(BaseModel):
    """The versioned few-shot library of one label set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    version: str
    labelset: str
    labels: dict[str, LabelExemplars]

    @property
    def signature(self) -> str:
        return f"{self.id}@{self.version}"

    @field_validator("labels")
    @classmethod
    def _not_empty(cls, value: dict[str, LabelExemplars]) -> dict[str, LabelExemplars]:
        if not value:
            raise ValueError("an exemplar library needs at least one label")
        return value


@cache
def load_exemplars(labelset: str) -> ExemplarLibrary:
    """The packaged exemplar library of ``labelset`` (e.g. ``ran21``)."""
    ref = resources.files("cxreval.llm") / "exemplars" / f"{labelset}.yaml"
    return ExemplarLibrary.model_validate(yaml.safe_load(ref.read_text(encoding="utf-8")))


def label_key(label: str) -> str:
    """A JSON-friendly key for a label name: ``Pleural Effusion`` -> ``pleural_effusion``."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


class LLMLabeler:
    """Builds the labelling call for a report and validates its answer."""

    name = "llm-labels"

    def __init__(
        self, ontology: Ontology, config: LLMConfig, labelset: str = "ran21", exemplars: ExemplarLibrary | None = None
    ) -> None:
        if labelset not in ontology.labelsets:
            raise KeyError(f"ontology {ontology.signature} has no label set {labelset!r}")
        self.ontology = ontology
        self.config = config
        self.labelset = labelset
        self.labels: list[str] = list(ontology.labelsets[labelset].labels)
        self.library = exemplars or load_exemplars(labelset)
        missing = [lab for lab in self.labels if lab not in self.library.labels]
        extra = [lab for lab in self.library.labels if lab not in self.labels]
        if missing or extra:
            raise ValueError(
                f"exemplar library {self.library.signature} does not match label set {labelset!r}: "
                f"missing {missing}, unknown {extra}"
            )
        self.keys = {label_key(lab): lab for lab in self.labels}
        self.prompt = load_prompt("labels")
        self.schema: dict[str, Any] = {
            "type": "object",
            "properties": {k: {"type": "integer", "enum": list(LABEL_VALUES)} for k in self.keys},
            "required": list(self.keys),
            "additionalProperties": False,
        }
        self._system = self.prompt.render("system")
        self._labels_block = "\n".join(self._describe(lab) for lab in self.labels)

    def _describe(self, label: str) -> str:
        ex = self.library.labels[label]
        pos = "; ".join(f'"{s}"' for s in ex.positive)
        neg = "; ".join(f'"{s}"' for s in ex.negative)
        return f"- {label_key(label)} ({label}): {ex.definition} 1 = {pos}. 0 = {neg}."

    @property
    def signature(self) -> str:
        return f"{self.name}@{ENGINE_VERSION}"

    @property
    def prompt_signature(self) -> str:
        return f"{self.prompt.signature}+{self.library.signature}"

    def messages(self, text: str) -> list[dict[str, str]]:
        user = self.prompt.render("user", labels=self._labels_block, keys=", ".join(self.keys), **report_blocks(report=text))
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    def key(self, text: str, run: int = 0) -> str:
        return cache_key(
            {
                "engine": self.signature,
                "prompt": self.prompt_signature,
                "prompt_sha": self.prompt.sha256,
                "exemplars": self.library.model_dump(),
                "labelset": self.labels,
                "params": self.config.answer_params(),
                "run": run,
                "text_sha": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            }
        )

    def parse(self, raw: str) -> ParsedAnswer:
        """Every label key present, each 1, 0 or -1 (``true``/``false`` accepted); nothing else."""
        value, duplicates = load_json(raw)
        if not isinstance(value, dict):
            raise AnswerError(["the answer must be a JSON object of label keys"])
        problems = [f"{k}: given twice" for k, _ in duplicates]
        items = []
        for k, label in self.keys.items():
            v = value.get(k)
            if isinstance(v, bool):
                v = int(v)
            if v not in LABEL_VALUES:
                problems.append(f"{k}: {'missing' if k not in value else f'{v!r} is not 1, 0 or -1'}")
                continue
            items.append({"label": label, "value": int(v)})
        unknown = sorted(set(value) - set(self.keys))
        if unknown:
            problems.append(f"unknown label keys {unknown}; use only: {', '.join(self.keys)}")
        if problems:
            raise AnswerError(problems)
        return ParsedAnswer(items=items)

    def task(self, text: str, run: int = 0) -> Task:
        return Task(
            key=self.key(text, run),
            kind="labels",
            engine=self.signature,
            messages=self.messages(text),
            schema=self.schema,
            schema_name=f"{self.labelset}_labels",
            parse=self.parse,
            reask_hint="with every label key of the list, each 0 or 1, and no other key",
        )


class LabelFailure(BaseModel):
    """A report the labeler could not label: never turned into labels."""

    id: str
    reason: str
    error: str
    raw: list[str] = Field(default_factory=list)


class LabelRun(BaseModel):
    """Labels of many reports (ids x labels, 1 / 0), the failures, and what it cost."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    labels: Any  # pandas.DataFrame
    failures: list[LabelFailure]
    usage: Usage
    engine: str
    prompt: str
    model: str


def label_reports(
    texts: dict[str, str],
    ontology: Ontology,
    config: LLMConfig,
    *,
    labelset: str = "ran21",
    cache: AnswerCache | None = None,
    progress: bool = False,
    run: int = 0,
) -> LabelRun:
    """Label every report (id -> text); identical texts cost one call; failures are listed."""
    return asyncio.run(alabel_reports(texts, ontology, config, labelset=labelset, cache=cache, progress=progress, run=run))


async def alabel_reports(
    texts: dict[str, str],
    ontology: Ontology,
    config: LLMConfig,
    *,
    labelset: str = "ran21",
    cache: AnswerCache | None = None,
    progress: bool = False,
    run: int = 0,
) -> LabelRun:
    labeler = LLMLabeler(ontology, config, labelset)
    own_cache = cache is None
    store = cache or AnswerCache(config.resolved_cache_path())
    runner = LLMRunner(config, cache=store)
    try:
        tasks = {t: labeler.task(t, run) for t in dict.fromkeys(texts.values())}
        outcomes, usage = await runner.run(list(tasks.values()), progress=progress, label="LLM labels")
    finally:
        await runner.aclose()
        if own_cache:
            store.close()
    rows: dict[str, dict[str, int]] = {}
    failures: list[LabelFailure] = []
    for rid, text in texts.items():
        out: Outcome = outcomes[tasks[text].key]
        if out.ok and out.value is not None:
            rows[rid] = {i["label"]: i["value"] for i in out.value["items"]}
        else:
            failures.append(LabelFailure(id=rid, reason=out.stage or "answer", error=out.error, raw=out.raw))
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=labeler.labels, dtype=float)
    frame.index.name = "id"
    return LabelRun(
        labels=frame,
        failures=failures,
        usage=usage,
        engine=labeler.signature,
        prompt=labeler.prompt_signature,
        model=config.model,
    )


def answer_json(values: dict[str, int]) -> str:
    """A well-formed answer for ``values`` (label name -> 0/1), as the labeler expects it."""
    return json.dumps({label_key(k): int(v) for k, v in values.items()})


class PairLabels(BaseModel):
    """Label metrics of report pairs from the LLM labeler, and the pairs it could not label."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    metrics: Any  # cxreval.scores.labels.LabelMetrics
    failed_pairs: dict[str, list[LabelFailure]]
    run: LabelRun


def llm_label_metrics(
    pairs: list[Any],
    ontology: Ontology,
    config: LLMConfig,
    *,
    labelset: str = "ran21",
    cache: AnswerCache | None = None,
    progress: bool = False,
    uncertain: UncertainLabel = "exclude",
) -> PairLabels:
    """Ran Score (``labelset="ran21"``: macro F1) and the other label metrics, labelled by the LLM.

    Each distinct report text costs one call. A pair is scored only when both of its reports got
    a valid answer; the others are listed in ``failed_pairs`` and left out of every metric. A
    label either report gives as uncertain (-1) is left out of that pair's counts for that label
    (``uncertain="exclude"``, as the Ran Score paper leaves uncertain cases out of its reference);
    ``negative`` or ``positive`` counts it as 0 or 1 instead.
    """
    from cxreval.scores.labels import label_metrics
    from cxreval.scores.signature import Signature

    texts = {}
    for p in pairs:
        texts[f"reference:{p.pair_id}"] = p.reference
        texts[f"candidate:{p.pair_id}"] = p.candidate
    run = label_reports(texts, ontology, config, labelset=labelset, cache=cache, progress=progress)
    by_id: dict[str, list[LabelFailure]] = {}
    for f in run.failures:
        by_id.setdefault(f.id.split(":", 1)[1], []).append(f)
    ok = [p.pair_id for p in pairs if p.pair_id not in by_id]
    ref = run.labels.loc[[f"reference:{i}" for i in ok]].set_axis(ok)
    cand = run.labels.loc[[f"candidate:{i}" for i in ok]].set_axis(ok)
    base = Signature(metric="labels", ontology=ontology.signature, engine=run.engine, model=run.model, prompt=run.prompt)
    metrics = label_metrics(ref, cand, labelset=labelset, signature=base, uncertain=uncertain)
    return PairLabels(metrics=metrics, failed_pairs=by_id, run=run)
