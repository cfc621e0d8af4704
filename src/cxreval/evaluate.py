"""The main job: score candidate reports against references, entity by entity.

``Evaluator`` ties the flow together: extraction (cached per distinct text, so a reference
shared by many candidates is read once) -> judgement rows -> entity, group and report-level
scores, each carrying a signature.

Every engine of the registry (:mod:`cxreval.engines`: ``rules``, the offline default;
``llm-extract``, one LLM call per distinct report text, then the deterministic comparison;
``llm-pairwise``, SPEC-CXR's one LLM call per pair; ``llm-pairwise-2pass``, judge then verify)
writes the same judgement table, and the evaluator scores it the same way. A pair whose LLM
answer stayed unusable is never scored: it is listed in ``failures`` (and ``failures.jsonl``)
with the stage, the error and the raw answers.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import types
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cxreval._version import __version__
from cxreval.engines import (
    Engine,
    EngineOutput,
    EngineRunner,
    Failure,
    engine_names,
)
from cxreval.extract.models import Extraction
from cxreval.extract.rules import RuleExtractor, RuleSet
from cxreval.extract.text import lookalike_count
from cxreval.io import ReportPair
from cxreval.io.writers import OutputManifest, OutputRun, csv_value, frame_rows, write_csv
from cxreval.judge import EntityJudgement, UncertainPolicy
from cxreval.judge.crosscheck import InjectionFlag, injection_summary
from cxreval.judge.files import (
    JUDGEMENTS,
    JUDGEMENTS_PARQUET,
    JudgementsFileError,
    ParquetRows,
    RowsFormat,
    RowStyle,
    encode_members,
    judgements_file,
    read_rows,
    rows_arrow,
)
from cxreval.judge.table import JudgementTable
from cxreval.literals import EngineName
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores import (
    Averages,
    EntityScore,
    ErrorDistribution,
    GroupScore,
    Signature,
    spec_scores,
)
from cxreval.scores.fingerprint import candidates_fingerprint, fingerprints_comparable, references_fingerprint

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import numpy as np

    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.config import LLMConfig
    from cxreval.llm.runner import LLMRunner, Usage

PROGRESS_MIN_PAIRS = 200
ENGINES: tuple[str, ...] = engine_names()


@dataclass(kw_only=True)
class EvaluationScores:
    """The scores of one evaluation: everything ``scores.json`` holds.

    A streamed evaluation (:mod:`cxreval.streaming`) ends with this, its judgements and error
    counts already written; :class:`EvaluationResult` adds the rows themselves.
    """

    signature: Signature
    n_pairs: int
    """Pairs scored (failed pairs are not)."""
    entities: list[EntityScore]
    groups: list[GroupScore]
    averages: Averages
    error_summary: ErrorDistribution
    ontology: Ontology
    failures: list[Failure] = field(default_factory=list)
    usage: Usage | None = None
    flags: list[InjectionFlag] = field(default_factory=list)
    """Pairs whose text reads like instructions to the judge (LLM engines; :mod:`cxreval.judge.crosscheck`)."""
    run: int = 1
    block_sums: dict[str, np.ndarray] = field(default_factory=dict)
    """Each statistic block's sum over the scored pairs (:mod:`cxreval.scores.statistics`): what
    the headline metrics compute from."""
    references_sha256: str | None = None
    """Fingerprint of the input's (pair id, reference text) pairs (:func:`references_fingerprint`):
    two results compare only if equal."""
    candidates_sha256: str | None = None
    """The same of the (pair id, candidate text) pairs (:func:`~cxreval.scores.fingerprint.candidates_fingerprint`):
    with the references', what evidence offsets in ``judgements.jsonl.gz`` are checked against."""
    judgement_rows: RowStyle | None = None
    """The style of ``judgements.jsonl.gz`` written beside ``scores.json`` (:data:`~cxreval.judge.files.ROW_STYLES`)."""

    @property
    def n_failed(self) -> int:
        return len({f.pair_id for f in self.failures})

    def metrics(self) -> list[dict[str, Any]]:
        """The headline numbers (:data:`cxreval.metrics.table.HEADLINE`, each a registered metric
        computed from :attr:`block_sums`), each with direction and signature."""
        from cxreval.metrics.table import headline_metrics, headline_values

        metrics = headline_metrics(self.ontology)
        values = headline_values(metrics, self.block_sums)
        return [
            {
                "name": m.headline,
                "value": values[m.headline],
                "higher_is_better": m.higher_is_better,
                "signature": str(self.signature.with_metric(m.signature_id)),
            }
            for m in metrics
        ]

    @property
    def critical_error_free(self) -> float | None:
        """Share of pairs with no error on an entity the ontology marks critical (the
        ``spec-report-critical-error-free-rate`` metric)."""
        value: float | None = next(m["value"] for m in self.metrics() if m["name"] == "critical_error_free_rate")
        return value

    def to_dict(self) -> dict[str, Any]:
        """The content of ``scores.json``."""
        return {
            "cxreval_version": __version__,
            "signature": str(self.signature),
            "ontology": {"id": self.ontology.id, "version": self.ontology.version},
            "n_pairs": self.n_pairs,
            "n_failed": self.n_failed,
            "references_sha256": self.references_sha256,
            "candidates_sha256": self.candidates_sha256,
            **({"judgement_rows": self.judgement_rows} if self.judgement_rows is not None else {}),
            "metrics": self.metrics(),
            "averages": self.averages.model_dump(),
            "report_level": {
                "higher_is_better": False,
                "signature": str(self.signature.with_metric("spec-report-errors")),
                **self.error_summary.model_dump(),
            },
            "groups": [g.model_dump() for g in self.groups],
            "entities": [e.model_dump() for e in self.entities],
            **({"usage": self.usage.model_dump()} if self.usage is not None else {}),
            **({"injection_check": injection_summary(self.flags)} if self.usage is not None else {}),
        }

    def scores_json(self) -> str:
        """``scores.json``'s text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"


@dataclass(kw_only=True)
class EvaluationResult(EvaluationScores):
    """Everything one evaluation produced, rows included; ``save`` writes it to a directory."""

    table: JudgementTable
    """The judgement table of the scored pairs: every number here is computed from it."""
    errors: pd.DataFrame
    """Per pair: errors, then one column per error kind (``errors.csv``'s counts)."""
    meta: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per pair id, the extra input columns the user asked to keep (written to errors.csv)."""
    lookalikes: dict[str, int] = field(default_factory=dict)
    """Per pair id with any, the letters of its two reports read as the Latin letters they only
    look like (:func:`~cxreval.extract.text.lookalike_count`; errors.csv's ``lookalikes`` column)."""
    texts: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    """Per scored pair id, its (reference, candidate) texts: what the evidence offsets of a compact
    ``judgements.jsonl.gz`` point into (a pair not here has its evidence written as text)."""

    def __post_init__(self) -> None:
        if self.n_pairs != len(self.table.pair_ids):
            raise ValueError(f"n_pairs is {self.n_pairs} but the table holds {len(self.table.pair_ids)} pairs")

    @property
    def pair_ids(self) -> list[str]:
        """The scored pairs, error-free ones included."""
        return list(self.table.pair_ids)

    @property
    def judgements(self) -> list[EntityJudgement]:
        """The judgement rows (``judgements.jsonl``)."""
        return self.table.rows()

    def errors_table(self) -> pd.DataFrame:
        """``errors.csv``: error counts per pair, then the kept input columns (``--meta-col``)."""
        return errors_table(self.errors, self.meta, self.lookalikes)

    def save(self, out_dir: str | Path, *, rows: RowStyle = "compact", parquet: bool | None = None) -> dict[str, Path]:
        """Write ``judgements.jsonl.gz``, ``errors.csv`` and ``scores.json`` into ``out_dir``.

        ``rows``: ``compact`` (rows that are not implied, evidence as offsets into :attr:`texts`)
        or ``full`` (every row, evidence as text): :mod:`cxreval.judge.files`. ``parquet``: also
        write ``judgements.parquet`` (None: when pyarrow is installed). LLM engines (and any result
        with failures) also write ``failures.jsonl``, one line per pair that was not scored, empty
        when every pair was; a ``failures.jsonl`` left by an earlier run of another engine is
        removed. The files are written beside the earlier run's and replace them together once
        all are written (:class:`~cxreval.io.writers.OutputRun`), so an interrupted save leaves the
        earlier results whole.
        """
        with OutputRun() as run:
            paths = self.write_to(run.folder(out_dir), rows=rows, parquet=parquet)
        return paths

    def write_to(self, folder: OutputManifest, *, rows: RowStyle = "compact", parquet: bool | None = None) -> dict[str, Path]:
        """Write this result's files into ``folder`` under their partial names (see :meth:`save`);
        they are put in place when the run that owns ``folder`` commits. Returns their final paths."""
        fmt = RowsFormat.choose(rows, parquet)
        out = folder.folder
        paths = {"judgements": out / JUDGEMENTS, "errors": out / "errors.csv", "scores": out / "scores.json"}
        if self.usage is not None or self.failures:
            paths["failures"] = out / "failures.jsonl"
            with folder.writer("failures.jsonl") as fh:
                for failure in self.failures:
                    fh.write(failure.model_dump_json() + "\n")
        table_rows = self.table.rows()
        with folder.writer(JUDGEMENTS, binary=True) as fh:
            for member in encode_members(table_rows, self.texts, fmt.style):
                fh.write(member)
        if fmt.parquet:
            paths["parquet"] = out / JUDGEMENTS_PARQUET
            parquet_file = folder.open(JUDGEMENTS_PARQUET, binary=True)
            parquet_file.close()
            writer = ParquetRows(parquet_file.tmp, folder.scratch(JUDGEMENTS_PARQUET))
            writer.add(rows_arrow(table_rows, self.texts, fmt.style))
            writer.finish()
        with folder.writer("errors.csv", newline="") as fh:
            write_csv(fh, frame_rows(self.errors_table()))
        self.judgement_rows = fmt.style
        folder.write_text("scores.json", self.scores_json(), last=True)
        return paths


class Evaluator:
    """Scores (reference, candidate) pairs with the rule engine (default) or an LLM engine.

    ``engine`` names an engine of the registry (:func:`cxreval.engines.get_engine`); the LLM
    engines need ``llm=LLMConfig(...)``. Their answers are stored in the SQLite cache as they
    arrive, so a rerun repeats no finished call. ``spec_compat=True`` keeps the comparison
    verdicts to SPEC-CXR's three values (``conflicting-comparison`` becomes ``other``; signed
    ``comparison:spec``). ``workers`` processes judge a large batch with the rule engine
    (:mod:`cxreval.executors`; the results are identical; None or 1: this process only).
    ``rules``: a rule file (path) that adds or overrides the rule engine's rules
    (docs/engine.md, "Adding a rule"), or a :class:`~cxreval.extract.rules.RuleSet` loaded from
    one; its hash enters the signature (``rules@...u<hash>``). A file that cannot be used raises
    :class:`~cxreval.extract.rules.RulesError` (a ``ValueError`` naming the file and line).

    >>> from cxreval import Evaluator, ReportPair
    >>> ev = Evaluator()
    >>> res = ev.evaluate([ReportPair(pair_id="1", reference="Small left pleural effusion.",
    ...                               candidate="No pleural effusion.")])
    >>> res.errors.loc["1", "errors"]
    1
    """

    def __init__(
        self,
        ontology: Ontology | str | Path | None = None,
        *,
        uncertain: UncertainPolicy = "positive",
        engine: EngineName = "rules",
        llm: LLMConfig | None = None,
        retry_failed: bool = False,
        cache: AnswerCache | None = None,
        spec_compat: bool = False,
        workers: int | None = None,
        rules: RuleSet | str | Path | None = None,
        hierarchy: bool = True,
    ) -> None:
        self.ontology = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
        self.uncertain: UncertainPolicy = uncertain
        self.spec_compat = spec_compat
        self.hierarchy = hierarchy
        """The finding hierarchy's judgement rule (docs/scoring.md, "The judgement rule"); False:
        every entity on its own (the engines that compare extractions, and the pairwise judge's sparse
        answers, which say how specific the candidate is; a dense pairwise answer is SPEC-CXR's, flat)."""
        self.engine: EngineName = engine
        self.llm = llm
        self.retry_failed = retry_failed
        self.engine_runner = EngineRunner.build(
            self.ontology,
            uncertain=uncertain,
            engine=engine,
            llm=llm,
            spec_compat=spec_compat,
            retry_failed=retry_failed,
            cache=cache,
            rules=rules,
            workers=workers,
            hierarchy=hierarchy,
        )
        """The engine with its LLM settings and answer store: the one path to judgements and
        extractions, which the table metrics share (:meth:`TableMetric.from_runner`)."""
        self.judge_engine: Engine = self.engine_runner.engine
        self.rules: RuleSet | None = getattr(self.judge_engine, "rules", None)
        """The rule set with the user's rules (None: the packaged rules only)."""

    @cached_property
    def extractor(self) -> RuleExtractor:
        """The offline rule engine's extractor (the rules engine's own; bench's workers read with it)."""
        own = getattr(self.judge_engine, "extractor", None)
        return own if isinstance(own, RuleExtractor) else RuleExtractor(self.ontology)

    @property
    def signature(self) -> Signature:
        """What produced this evaluator's judgements: engine, model, prompt and policies."""
        return self.judge_engine.signature

    def extract(self, text: str) -> Extraction:
        """Extraction of one report by this evaluator's engine (see :meth:`extract_all`)."""
        return self.extract_all([text])[text]

    def extract_all(self, texts: Iterable[str]) -> dict[str, Extraction]:
        """Extractions of reports by this evaluator's own engine, so that what is computed from
        them (label metrics, the Ran Score) is what the evaluator's signature says.

        ``rules``: the rule engine, cached by the text's hash for the life of the evaluator.
        ``llm-extract``: one LLM call per distinct text, through the answer store; a text whose
        answer stayed unusable raises :class:`ExtractionFailed` (never a rule-engine stand-in).
        The pairwise engines judge pairs and make no extraction: asking for one is an error
        (:class:`cxreval.engines.NoExtraction`, a ``ValueError``).
        """
        return self.engine_runner.extract_all(texts)

    def _runner(self) -> AbstractAsyncContextManager[LLMRunner]:
        """The LLM runner of one evaluation (on the given answer store, else the config's)."""
        return self.engine_runner.open()  # type: ignore[no-any-return]

    def judge(self, pair: ReportPair) -> list[EntityJudgement]:
        """Judgement rows of one pair by an offline engine (the synchronous path)."""
        if not self.judge_engine.offline:
            raise ValueError(f"judge() is the rules engine's path; engine {self.engine!r} judges through evaluate()")
        return self.engine_runner.judge([pair]).table.rows()

    def evaluate(self, pairs: Iterable[ReportPair], *, progress: bool | None = None) -> EvaluationResult:
        """Judge every pair and compute all scores (pair ids must be unique)."""
        pairs = unique_pairs(pairs)
        if not self.judge_engine.offline:
            return self.evaluate_runs(pairs, runs=1, progress=progress)[0]
        if progress is None:
            progress = len(pairs) >= PROGRESS_MIN_PAIRS and sys.stderr.isatty()
        return self._result(self.engine_runner.judge(pairs, 0, progress=progress), pairs, 0)

    def evaluate_runs(
        self, pairs: Iterable[ReportPair], *, runs: int = 1, progress: bool | None = None
    ) -> list[EvaluationResult]:
        """``runs`` independent evaluations (the papers' mean +- sd); run i has its own cache keys.

        An offline engine (the rule engine) is deterministic, so its runs are identical copies.
        """
        pairs = unique_pairs(pairs)
        if runs < 1:
            raise ValueError("runs must be at least 1")
        if self.judge_engine.offline:
            first = self.evaluate(pairs, progress=progress)
            return [first] + [EvaluationResult(**{**first.__dict__, "run": i + 1}) for i in range(1, runs)]
        if progress is None:
            progress = sys.stderr.isatty()
        return asyncio.run(self.aevaluate_runs(pairs, runs=runs, progress=progress))

    async def aevaluate_runs(
        self, pairs: Sequence[ReportPair], *, runs: int = 1, progress: bool = False
    ) -> list[EvaluationResult]:
        """The async form of :meth:`evaluate_runs` (for callers already inside an event loop)."""
        if self.judge_engine.offline:
            return self.evaluate_runs(pairs, runs=runs, progress=progress)
        results = []
        async with self._runner() as runner:
            for run in range(runs):
                label = "LLM calls" if runs == 1 else f"LLM calls, run {run + 1}/{runs}"
                out = await self.judge_engine.judge(pairs, run, runner=runner, progress=progress, label=label)
                results.append(self._result(out, pairs, run))
        return results

    def _result(self, out: EngineOutput, pairs: Sequence[ReportPair], run: int) -> EvaluationResult:
        """Scores of one run's engine output, with its failures, usage and the scored pairs' kept columns."""
        result = score_table(out.table, self.ontology, with_format_used(self.signature, out.usage))
        result.failures = list(out.failures)
        result.usage = out.usage
        result.flags = list(out.flags)
        result.run = run + 1
        done = set(out.table.pair_ids)
        scored = [p for p in pairs if p.pair_id in done]
        result.meta = _pair_meta(scored)
        result.lookalikes = pair_lookalikes(scored)
        warn_lookalikes(len(result.lookalikes))
        result.references_sha256 = references_fingerprint(pairs)
        result.candidates_sha256 = candidates_fingerprint(pairs)
        result.texts = {p.pair_id: (p.reference, p.candidate) for p in scored}
        return result

    def score(self, rows: Sequence[EntityJudgement], pair_ids: Sequence[str]) -> EvaluationResult:
        """Scores from an existing judgement table (any engine's)."""
        return score_judgements(rows, pair_ids, self.ontology, self.signature)


def unique_pairs(pairs: Iterable[ReportPair]) -> list[ReportPair]:
    """The pairs as a list; a pair id given twice is an error (its rows would be pooled into one
    pair, a silently wrong number)."""
    pairs = list(pairs)
    seen: set[str] = set()
    for p in pairs:
        if p.pair_id in seen:
            raise ValueError(f"duplicate pair id {p.pair_id!r}: every pair needs an id of its own")
        seen.add(p.pair_id)
    return pairs


class FormatFallbackWarning(UserWarning):
    """The server refused the json_schema response format; answers were asked in a weaker one."""


def with_format_used(signature: Signature, usage: Usage | None) -> Signature:
    """``signature`` with ``format:auto>USED`` where an ``auto`` run's server refused json_schema
    and the answers were asked as json_object or with no format (warned once): a weaker check of
    the answers' shape, so numbers of the two are not the same measurement."""
    used = usage.response_format if usage is not None else None
    if signature.options.get("format") != "auto" or used not in ("json_object", "none"):
        return signature  # json_schema as asked, or Anthropic's forced tool (its only format)
    warnings.warn(
        FormatFallbackWarning(
            f"the server refused the json_schema response format: answers were asked as {used}, which it checks "
            f"less strictly (the signature says format:auto>{used}; --response-format fixes one)"
        ),
        stacklevel=3,
    )
    return signature.model_copy(update={"options": {**signature.options, "format": f"auto>{used}"}})


class LookalikeWarning(UserWarning):
    """Some reports wrote letters that only look like Latin ones (counted in errors.csv)."""


def pair_lookalikes(pairs: Iterable[ReportPair]) -> dict[str, int]:
    """Per pair id with any, the look-alike letters of its reference and candidate together."""
    counts = ((p.pair_id, lookalike_count(p.reference) + lookalike_count(p.candidate)) for p in pairs)
    return {pid: n for pid, n in counts if n}


def warn_lookalikes(n_pairs: int) -> None:
    """Warn once per run when ``n_pairs`` pairs hold look-alike letters."""
    if n_pairs:
        warnings.warn(
            LookalikeWarning(
                f"{n_pairs} pair{'s write' if n_pairs > 1 else ' writes'} letters that only look like Latin ones (a Cyrillic "
                "'о' in 'pneumоthorax', accents on Latin letters); they are read as the letters they imitate and "
                "counted in errors.csv's lookalikes column"
            ),
            stacklevel=3,
        )


def errors_table(
    errors: pd.DataFrame, meta: Mapping[str, Mapping[str, str]], lookalikes: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """``errors.csv``'s table: error counts per pair, the look-alike letters of the pair
    (``lookalikes``, 0 for most), then the kept input columns (``--meta-col``; one clashing with a
    column before it is written as ``meta_NAME``)."""
    counts = pd.Series(dict(lookalikes or {}), dtype="int64").reindex(errors.index, fill_value=0)
    errors = errors.assign(lookalikes=counts.to_numpy())
    if not meta:
        return errors
    kept = pd.DataFrame.from_dict(dict(meta), orient="index").reindex(errors.index)
    clash = [c for c in kept.columns if c in errors.columns]
    return errors.join(kept.rename(columns={c: f"meta_{c}" for c in clash}))


def score_judgements(
    rows: Sequence[EntityJudgement], pair_ids: Sequence[str], ontology: Ontology, signature: Signature
) -> EvaluationResult:
    """Every score of judgement rows of ``pair_ids`` as an :class:`EvaluationResult` (:func:`score_table`)."""
    return score_table(JudgementTable.from_rows(rows, pair_ids, str(signature)), ontology, signature)


def score_table(table: JudgementTable, ontology: Ontology, signature: Signature) -> EvaluationResult:
    """Every score of a judgement table (:func:`cxreval.scores.spec_scores`, the one place SPEC
    numbers are computed) as an :class:`EvaluationResult`."""
    spec = spec_scores(table, ontology)
    return EvaluationResult(
        signature=signature,
        n_pairs=len(table.pair_ids),
        table=table,
        entities=spec.entities,
        groups=spec.groups,
        averages=spec.averages,
        errors=spec.errors,
        error_summary=spec.error_summary,
        ontology=ontology,
        block_sums=spec.block_sums,
    )


class ResultsError(ValueError):
    """A results folder that cannot be read back (missing or damaged files, unknown ontology)."""


class PairsMismatch(ResultsError):
    """The pairs given with a results folder are not those it was scored on."""


def load_result(
    folder: str | Path, ontology: Ontology | str | Path | None = None, pairs: Iterable[ReportPair] | None = None
) -> EvaluationResult:
    """Read back what :meth:`EvaluationResult.save` wrote, re-scored from its judgement table.

    The scores are recomputed from the judgement rows (``judgements.jsonl.gz``, or the
    ``judgements.jsonl`` of cxreval 0.7 and before) and the pair list of ``errors.csv`` (never
    copied from ``scores.json``), and signed with the signature the run wrote. The ontology must be
    the one the run used: the packaged one by default, or ``ontology``. ``pairs``: the input that
    was scored, to show the evidence of a compact file as text (checked against the folder's
    fingerprints of the references and candidates); without it the evidence of a compact file
    reads as empty text and its offsets (every score is the same either way).
    """
    folder = Path(folder)
    rows_path = judgements_file(folder)
    paths = {"scores.json": folder / "scores.json", "errors.csv": folder / "errors.csv", JUDGEMENTS: rows_path}
    missing = [n for n, p in paths.items() if p is None or not p.is_file()]
    if missing:
        raise ResultsError(f"{folder}: not a finished cxreval evaluate folder (missing {', '.join(missing)})")
    assert rows_path is not None
    try:
        scores = json.loads(paths["scores.json"].read_text(encoding="utf-8"))  # type: ignore[union-attr]
        signature = Signature.parse(scores["signature"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{paths['scores.json']}: cannot read the signature ({exc})") from None
    onto = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
    if onto.signature != signature.ontology:
        raise ResultsError(
            f"{folder} was scored with ontology {signature.ontology}, not {onto.signature}; "
            "give the ontology it used (--ontology FILE)"
        )
    pair_ids = pd.read_csv(paths["errors.csv"], usecols=["pair_id"], dtype=str, keep_default_na=False)["pair_id"]
    ids = [csv_value(p) for p in pair_ids]  # ids as given
    texts = None if pairs is None else _scored_texts(folder, scores, ids, pairs)
    try:
        rows = read_rows(rows_path, texts)
    except JudgementsFileError as exc:
        raise ResultsError(str(exc)) from None
    result = score_judgements(rows, ids, onto, signature)
    result.references_sha256 = scores.get("references_sha256")
    result.candidates_sha256 = scores.get("candidates_sha256")
    result.judgement_rows = scores.get("judgement_rows")
    result.texts = dict(texts or {})
    return result


def _scored_texts(
    folder: Path, scores: Mapping[str, Any], pair_ids: Sequence[str], pairs: Iterable[ReportPair]
) -> dict[str, tuple[str, str]]:
    """The texts of the scored pairs from ``pairs``, which must hold every one and be the input
    the folder's fingerprints were made of (the whole input, or only the scored pairs)."""
    given = {p.pair_id: p for p in pairs}
    lost = [p for p in pair_ids if p not in given]
    if lost:
        raise PairsMismatch(
            f"{len(lost)} pairs of {folder} are not in the pairs given (e.g. "
            f"{', '.join(lost[:5])}); give the file that was evaluated"
        )
    scored = [given[p] for p in pair_ids]
    for key, fingerprint in (("references_sha256", references_fingerprint), ("candidates_sha256", candidates_fingerprint)):
        kept = scores.get(key)
        if kept and not fingerprints_comparable(kept, fingerprint(scored)):
            warnings.warn(
                f"{folder} was written by an older release, whose {key} cannot be compared: the pairs "
                "given are taken as those it was scored on, unchecked",
                UserWarning,
                stacklevel=3,
            )
        elif kept and kept not in (fingerprint(scored), fingerprint(given.values())):
            side = key.split("_")[0]
            raise PairsMismatch(
                f"the pairs given are not those {folder} was scored on (their {side} differ from "
                f"its {key}); give the file that was evaluated"
            )
    return {p.pair_id: (p.reference, p.candidate) for p in scored}


def _pair_meta(pairs: Sequence[ReportPair]) -> dict[str, dict[str, str]]:
    """The kept input columns per pair id (empty when no pair keeps any)."""
    return {p.pair_id: dict(p.meta) for p in pairs} if any(p.meta for p in pairs) else {}


def evaluate(
    pairs: Iterable[ReportPair],
    *,
    ontology: Ontology | str | Path | None = None,
    uncertain: UncertainPolicy = "positive",
    progress: bool | None = None,
    engine: EngineName = "rules",
    llm: LLMConfig | None = None,
    spec_compat: bool = False,
    workers: int | None = None,
    rules: RuleSet | str | Path | None = None,
    hierarchy: bool = True,
) -> EvaluationResult:
    """Functional form of :class:`Evaluator`: ``cxreval.evaluate(pairs)``."""
    return Evaluator(
        ontology,
        uncertain=uncertain,
        engine=engine,
        llm=llm,
        spec_compat=spec_compat,
        workers=workers,
        rules=rules,
        hierarchy=hierarchy,
    ).evaluate(pairs, progress=progress)


def systems_frame(results: Mapping[str, Sequence[EvaluationScores]]) -> pd.DataFrame:
    """One row per system: pairs scored and failed, then each headline metric of
    :meth:`EvaluationResult.metrics`; with several runs, each metric is its mean over the runs
    (:func:`summarize_runs`) and pairs/failures are those of the worst run."""
    rows = {}
    for system, runs in results.items():
        if len(runs) == 1:
            values = {m["name"]: m["value"] for m in runs[0].metrics()}
        else:
            values = {m["name"]: m["mean"] for m in summarize_runs(runs)["metrics"]}
        rows[system] = {
            "n_pairs": min(r.n_pairs for r in runs),
            "n_failed": max(r.n_failed for r in runs),
            **({"runs": len(runs)} if len(runs) > 1 else {}),
            **values,
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "system"
    return frame


def systems_signature(results: Sequence[Sequence[EvaluationScores]]) -> str:
    """The signature of a systems table: the evaluator's, with ``runs:N`` when runs were averaged."""
    first = results[0]
    if len(first) == 1:
        return str(first[0].signature)
    signature: str = summarize_runs(first)["signature"]
    return signature


def summarize_runs(results: Sequence[EvaluationScores]) -> dict[str, Any]:
    """Mean and sample sd of each headline metric over runs (``None`` values are left out)."""
    if not results:
        raise ValueError("no runs to summarise")
    sig = results[0].signature.model_copy(update={"options": {**results[0].signature.options, "runs": str(len(results))}})
    metrics = []
    for i, m in enumerate(results[0].metrics()):
        values = [r.metrics()[i]["value"] for r in results]
        defined = [v for v in values if v is not None]
        mean = sum(defined) / len(defined) if defined else None
        sd = (
            math.sqrt(sum((v - mean) ** 2 for v in defined) / (len(defined) - 1))
            if mean is not None and len(defined) > 1
            else None
        )
        metrics.append(
            {
                "name": m["name"],
                "mean": mean,
                "sd": sd,
                "n_runs": len(defined),
                "values": values,
                "higher_is_better": m["higher_is_better"],
                "signature": str(sig.with_metric(m["signature"].split("|")[0].removeprefix("metric:"))),
            }
        )
    return {
        "cxreval_version": __version__,
        "signature": str(sig),
        "runs": len(results),
        "n_pairs": [r.n_pairs for r in results],
        "n_failed": [r.n_failed for r in results],
        "metrics": metrics,
    }


class _CallableModule(types.ModuleType):
    """``cxreval.evaluate`` is this module (``from cxreval.evaluate import Evaluator``) and the
    function (``cxreval.evaluate(pairs)``): calling the module calls :func:`evaluate`."""

    def __call__(self, *args: Any, **kwargs: Any) -> EvaluationResult:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
