"""The benchmark YAML, as pydantic models.

Relative input paths are resolved against the config file's folder; ``{data_dir}`` in a path is
replaced by ``data_dir`` (itself relative to the config file; the environment variable
``CXREVAL_DATA_DIR`` overrides it). ``out`` is relative to the working directory. Metric names,
``metric_options`` keys and ``rank_by`` are checked here (unknown names get a close-match hint);
a system whose reports mostly equal their references is flagged by the runner.

```yaml
name: rexrank-iu-test
out: bench-out/rexrank-iu-test
data_dir: ../../../shared/data
engine: {name: rules, uncertain: positive}   # optional: executor: ray, ray_address: auto (cxreval[ray]);
                                             # rules: my-rules.yaml (a rule file, relative to this file)
metrics: [spec-errors, bleu2, rouge-l, bleu4-corpus]
rank_by: spec-errors
bootstrap: {resamples: 1000, seed: 0}
datasets:
  - name: iu-test
    references: {path: "{data_dir}/rexrank-iu/ReXRank_IUXray_test.json", section: findings}
    normal_from: findings            # or: metadata (with metadata.normal_col)
    metadata: {path: meta.csv, id_col: id, site_col: site, normal_col: normal}   # optional
  # a public dataset in its own layout (cxreval.io.datasets): mimic-cxr (the report tree),
  # mimic-cxr-sectioned, chexpert-plus, rexgradient, rexrank; where: picks the studies by field
  - name: chexpert-plus-valid
    references: {path: df_chexpert_plus_240401.csv, layout: chexpert-plus, section: findings, where: {split: valid}}
systems:
  - {name: MoERad, path: "{data_dir}/iu-gen-moerad/preds.csv", id_col: study_id, text_col: report}
  # a ReXrank-layout JSON reads text_col, else section, else model_prediction (the generated report)
  - {name: MoERad-json, path: "{data_dir}/iu-gen-moerad/MoERad.json", text_col: model_prediction}
  - {name: normal-template, baseline: normal-template}
  - {name: copy-reference, baseline: copy-reference}
  # IU X-ray train-split reports built at run time from data_dir (cxreval.datasets.baselines)
  - {name: random-train, baseline: random-train, seed: 0}
  - {name: retrieval-oracle, baseline: retrieval-oracle, seed: 0}
  - {name: oracle-noise-0.3, baseline: retrieval-oracle, noise: 0.3, seed: 0}
```
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxreval.io import InputError, InputProblem
from cxreval.literals import (
    RETRIEVAL_BASELINES,
    Baseline,
    BenchEngineName,
    DatasetLayout,
    Executor,
    Section,
    UncertainPolicy,
)
from cxreval.metrics import available_metrics
from cxreval.metrics.table import table_metric_names

DATA_DIR_ENV = "CXREVAL_DATA_DIR"
#: Baselines retrieved from the IU X-ray train split at run time (:mod:`cxreval.datasets.baselines`).
IU_BASELINES = RETRIEVAL_BASELINES
NORMAL_TEMPLATE = (
    "The heart size and mediastinal contours are within normal limits. The lungs are clear. "
    "No pleural effusion or pneumothorax. No acute bony abnormality."
)
JUDGEMENT_METRIC = "spec-errors"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The field of a ReXrank-layout prediction file that holds the generated report.
PREDICTION_FIELD = "model_prediction"


class StudiesConfig(_Model):
    """A table listing the studies to benchmark (one row per study or per image), e.g.
    ``{path: mimic-cxr-2.0.0-split.csv.gz, id_col: study_id, where: {split: test}}``."""

    path: Path
    format: str | None = None
    id_col: str = "study_id"
    where: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(default_factory=dict)


class ReferencesConfig(_Model):
    """Where a dataset's reference reports are (any format ``cxreval.io.read_reports`` reads).

    A tabular file reads ``text_col`` (default ``report``). A ReXrank-layout file reads
    ``text_col`` when it is given, else the field of ``section`` (default ``findings``).
    """

    path: Path
    format: str | None = None
    id_col: str | None = None
    """The id column of a tabular file (default ``id``); with a layout, only where it has several."""
    text_col: str | None = None
    section: Section = "findings"
    layout: DatasetLayout | None = None
    """A public dataset in its own layout (:mod:`cxreval.io.datasets`); ``section`` picks the text."""
    where: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(default_factory=dict)
    """With ``layout``: the studies to benchmark, by field (``{split: test}``)."""
    studies: StudiesConfig | None = None
    """With ``layout``: the studies to benchmark, listed in a table (MIMIC-CXR's split file)."""

    @model_validator(mode="after")
    def _layout_options(self) -> ReferencesConfig:
        if (self.where or self.studies) and self.layout is None:
            raise ValueError("references: where and studies select studies of a dataset layout; give layout too")
        return self


class MetadataConfig(_Model):
    """Per-study metadata: a site column and/or a normal flag column (CSV, TSV, JSONL, Parquet)."""

    path: Path
    format: str | None = None
    id_col: str = "id"
    site_col: str | None = None
    normal_col: str | None = None


class DatasetConfig(_Model):
    name: str = Field(..., min_length=1)
    references: ReferencesConfig
    metadata: MetadataConfig | None = None
    normal_from: Literal["findings", "metadata"] = "findings"

    @model_validator(mode="after")
    def _normal_source(self) -> DatasetConfig:
        if self.normal_from == "metadata" and (self.metadata is None or self.metadata.normal_col is None):
            raise ValueError(f"dataset {self.name!r}: normal_from: metadata needs metadata.normal_col")
        return self


class SystemConfig(_Model):
    """A system: a prediction file, or a built-in baseline (``normal-template``, ``copy-reference``,
    or IU X-ray train-split reports ``random-train`` / ``retrieval-oracle`` with ``seed`` and
    ``noise``, built from ``data_dir`` at run time; ``section`` picks the train report's section,
    default the dataset's reference section).

    A tabular file reads ``text_col`` (default ``report``). A ReXrank-layout file reads
    ``text_col`` when given, else the field of ``section`` when given, else ``model_prediction``
    (never the reference fields unless asked: a system that reads its reference ranks first).
    """

    name: str = Field(..., min_length=1)
    path: Path | None = None
    format: str | None = None
    id_col: str = "id"
    text_col: str | None = None
    section: Section | None = None
    datasets: list[str] | None = None  # None: every dataset
    baseline: Baseline | None = None
    text: str | None = None  # the normal-template text
    seed: int | None = None  # random-train / retrieval-oracle: the seed of draws and ties (default 0)
    noise: float | None = Field(None, ge=0, le=1, description="retrieval-oracle: label-noise probability")

    @model_validator(mode="after")
    def _one_source(self) -> SystemConfig:
        if (self.path is None) == (self.baseline is None):
            raise ValueError(f"system {self.name!r}: give exactly one of path or baseline")
        if self.seed is not None and self.baseline not in IU_BASELINES:
            raise ValueError(f"system {self.name!r}: seed applies to baseline: {' or '.join(IU_BASELINES)} only")
        if self.noise is not None and self.baseline != "retrieval-oracle":
            raise ValueError(f"system {self.name!r}: noise applies to baseline: retrieval-oracle only")
        if self.text is not None and self.baseline != "normal-template":
            raise ValueError(f"system {self.name!r}: text applies to baseline: normal-template only")
        if self.text_col is not None and self.section is not None:
            raise ValueError(
                f"system {self.name!r}: give text_col or section, not both "
                "(text_col names the field; section picks a ReXrank report section)"
            )
        return self

    @property
    def template(self) -> str:
        return self.text if self.text is not None else NORMAL_TEMPLATE


class EngineConfig(_Model):
    """The judgement engine; ``llm`` holds ``LLMConfig`` fields for the LLM engines."""

    name: BenchEngineName = "rules"
    uncertain: UncertainPolicy = "positive"
    spec_compat: bool = Field(False, description="SPEC-CXR's three comparison verdicts only (conflicts count as other)")
    hierarchy: bool = Field(True, description="the finding hierarchy's judgement rule; false: every entity on its own")
    ontology: Path | None = None
    #: A rule file that adds or overrides the rule engine's rules (docs/engine.md, "Adding a rule"),
    #: relative to the config file; its hash enters the engine signature.
    rules: Path | None = None
    llm: dict[str, Any] | None = None
    workers: int | None = Field(None, ge=1, description="processes for the rule engine; None = CPU count")
    executor: Executor | None = Field(
        None,
        description=(
            "where the rule engine judges the missing pairs: local processes, or Ray actors (workers of them; "
            "optional extra 'ray'); None = local, or ray when ray_address is set"
        ),
    )
    ray_address: str | None = Field(
        None, min_length=1, description=("an existing Ray cluster (auto, ray://head:10001, head:6379); None = start a local one")
    )

    @model_validator(mode="after")
    def _graded_needs_rules(self) -> EngineConfig:
        from cxreval.engines import graded_policy_problem

        problem = graded_policy_problem(self.name, self.uncertain)
        if problem:
            raise ValueError(problem)
        if self.ray_address is not None and self.executor == "local":
            raise ValueError("ray_address applies to executor: ray")
        if self.on_ray and self.name != "rules":
            raise ValueError(f"executor: ray applies to the rules engine; engine {self.name!r} judges in this process")
        if self.rules is not None and self.name != "rules":
            raise ValueError(f"rules (a rule file) applies to the rules engine; engine {self.name!r} reads reports without it")
        return self

    @property
    def on_ray(self) -> bool:
        """Whether the rule engine's pairs are judged on Ray (``executor: ray``, or a ``ray_address``)."""
        return self.executor == "ray" or (self.executor is None and self.ray_address is not None)


class BootstrapConfig(_Model):
    resamples: int = Field(1000, ge=0, le=100_000)
    seed: int = 0
    confidence: float = Field(0.95, gt=0, lt=1)


class BenchConfig(_Model):
    name: str = Field(..., min_length=1)
    out: Path = Path("bench-out")
    data_dir: Path | None = None
    engine: EngineConfig = EngineConfig()
    metrics: list[str] = Field(default_factory=lambda: [JUDGEMENT_METRIC, "bleu2", "rouge-l", "bleu4-corpus"])
    metric_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rank_by: str = JUDGEMENT_METRIC
    bootstrap: BootstrapConfig = BootstrapConfig()
    examples_per_kind: int = Field(3, ge=0, le=50)
    datasets: list[DatasetConfig] = Field(..., min_length=1)
    systems: list[SystemConfig] = Field(..., min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """``rank_by`` may still use a derived metric's old name (``presence-macro-f1``...)."""
        if isinstance(data, dict) and isinstance(data.get("rank_by"), str) and data["rank_by"] in OLD_NAMES:
            data = {**data, "rank_by": OLD_NAMES[data["rank_by"]]}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> BenchConfig:
        problems = []
        for kind, names in (("dataset", [d.name for d in self.datasets]), ("system", [s.name for s in self.systems])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                problems.append(f"duplicate {kind} names: {', '.join(dupes)}")
        known = {d.name for d in self.datasets}
        for s in self.systems:
            for d in s.datasets or []:
                if d not in known:
                    problems.append(f"system {s.name!r} names unknown dataset {d!r}")
        problems += self._metric_problems()
        if problems:
            raise ValueError("\n".join(problems))  # one line each: load_config lists them apart
        return self

    def _metric_problems(self) -> list[str]:
        """What is wrong with ``metrics``, ``metric_options`` and ``rank_by``, one line each."""
        problems = []
        registered = [m for m in available_metrics() if m not in DERIVED_METRICS]
        for name in dict.fromkeys(self.metrics):
            if name in DERIVED_METRICS:
                problems.append(
                    f"metric {name!r} is computed from the judgements for every benchmark: "
                    "rank by it with rank_by, do not list it under metrics"
                )
            elif name not in registered:
                problems.append(f"unknown metric {name!r}{did_you_mean(name, registered)}; known: {', '.join(registered)}")
        if JUDGEMENT_METRIC not in self.metrics:
            problems.append(f"metrics must include {JUDGEMENT_METRIC!r} (the judgement-based metric)")
        if len(set(self.metrics)) != len(self.metrics):
            problems.append("metrics are listed twice")
        for name in self.metric_options:
            if name not in self.metrics:
                problems.append(f"metric_options names {name!r}, which is not among metrics {self.metrics}")
            elif name in table_metric_names():
                problems.append(
                    f"metric_options names {name!r}, which is computed from the judgement table with "
                    "the engine section's settings: set them under engine"
                )
        if self.rank_by not in self.metrics and self.rank_by not in DERIVED_METRICS:
            rankable = [*self.metrics, *DERIVED_METRICS]
            problems.append(
                f"rank_by {self.rank_by!r} is not one of the metrics{did_you_mean(self.rank_by, rankable)}; "
                f"choose from {', '.join(rankable)}"
            )
        return problems

    def systems_for(self, dataset: str) -> list[SystemConfig]:
        return [s for s in self.systems if s.datasets is None or dataset in s.datasets]


#: Table metrics (:mod:`cxreval.metrics.table`) every benchmark adds to the listed ones, by their
#: registry names: computed from the judgement table, never listed under ``metrics``.
DERIVED_METRICS: tuple[str, ...] = (
    "spec-presence-macro-f1",
    "spec-presence-micro-f1",
    "spec-report-error-free-rate",
    "spec-report-critical-error-free-rate",
)
#: Names the derived metrics had before cxreval 0.x used one name per number; still read.
OLD_NAMES: dict[str, str] = {
    "presence-macro-f1": "spec-presence-macro-f1",
    "presence-micro-f1": "spec-presence-micro-f1",
    "error-free": "spec-report-error-free-rate",
    "critical-error-free": "spec-report-critical-error-free-rate",
}


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice (case-insensitive too), else ``""``."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    close = close or [c for c in choices if c.lower() == name.lower()]
    return f"; did you mean {close[0]!r}?" if close else ""


def _resolve(path: Path, base: Path, data_dir: Path | None) -> Path:
    text = str(path)
    if "{data_dir}" in text:
        if data_dir is None:
            raise ValueError(f"path {text!r} uses {{data_dir}} but no data_dir is set (config or ${DATA_DIR_ENV})")
        text = text.replace("{data_dir}", str(data_dir))
    p = Path(os.path.expanduser(text))
    return p if p.is_absolute() else (base / p).resolve()


def resolve_paths(config: BenchConfig, base: Path) -> BenchConfig:
    """``config`` with every input path absolute (see module doc)."""
    env = os.environ.get(DATA_DIR_ENV)
    data_dir = Path(env).resolve() if env else (None if config.data_dir is None else _resolve(config.data_dir, base, None))

    def fix(model: BaseModel, field: str = "path") -> Any:
        value = getattr(model, field)
        return model if value is None else model.model_copy(update={field: _resolve(value, base, data_dir)})

    def fix_references(ref: ReferencesConfig) -> ReferencesConfig:
        ref = fix(ref)
        return ref if ref.studies is None else ref.model_copy(update={"studies": fix(ref.studies)})

    datasets = [
        d.model_copy(
            update={"references": fix_references(d.references), "metadata": None if d.metadata is None else fix(d.metadata)}
        )
        for d in config.datasets
    ]
    systems = [fix(s) for s in config.systems]
    engine = fix(fix(config.engine, "ontology"), "rules")
    return config.model_copy(update={"datasets": datasets, "systems": systems, "engine": engine, "data_dir": data_dir})


def _messages(err: Any) -> list[str]:
    """A pydantic error's message(s): a validator's own problems one per line, unprefixed; an
    unknown key named with the closest known one and the keys allowed there."""
    if err["type"] == "extra_forbidden" and err["loc"]:
        key = str(err["loc"][-1])
        known = _keys_at(BenchConfig, err["loc"][:-1])
        if known:
            return [f"unknown key {key!r}{did_you_mean(key, known)} (the keys here: {', '.join(known)})"]
    cause = err.get("ctx", {}).get("error") if err["type"] == "value_error" else None
    return str(cause).splitlines() if isinstance(cause, ValueError) else [err["msg"]]


def _keys_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The keys a config model takes at ``loc`` (list positions skipped), [] when not a model."""
    import typing

    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return []
        current = current.model_fields[part].annotation
        while typing.get_origin(current) is not None:  # list[X], X | None, dict[str, X]: the model inside
            models = [a for a in typing.get_args(current) if isinstance(a, type) and issubclass(a, BaseModel)]
            inner = [a for a in typing.get_args(current) if typing.get_origin(a) is not None]
            current = models[0] if models else (inner[0] if inner else None)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def load_config(path: str | Path) -> BenchConfig:
    """Read, validate and resolve a benchmark YAML; problems raise :class:`InputError`."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError([InputProblem(file=str(p), message=f"cannot read: {exc.strerror or exc}")]) from None
    except yaml.YAMLError as exc:
        raise InputError([InputProblem(file=str(p), message=f"invalid YAML: {exc}")]) from None
    if not isinstance(raw, dict):
        raise InputError([InputProblem(file=str(p), message="the config must be a mapping")])
    try:
        config = BenchConfig.model_validate(raw)
        return resolve_paths(config, p.resolve().parent)
    except ValidationError as exc:
        raise InputError(
            [
                InputProblem(file=str(p), field=".".join(str(x) for x in err["loc"]) or None, message=line)
                for err in exc.errors()
                for line in _messages(err)
            ]
        ) from None
    except ValueError as exc:
        raise InputError([InputProblem(file=str(p), message=str(exc))]) from None
