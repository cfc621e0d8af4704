"""A clinical reward for reinforcement learning: the offline rule engine, one number per rollout.

RL pipelines that train report generators (TRL's GRPO, verl, OpenRLHF) need a reward for every
sampled report, millions of them, on CPUs beside the trainer. :class:`ClinicalReward` scores a
completion against its reference with cxreval's SPEC-CXR judgement, in one of three shapes:

- ``neg-errors``: minus the SPEC-CXR error count of the pair (FP + FN + not-aligned location or
  severity + comparison errors; the rule of :data:`cxreval.judge.models.ERROR_KINDS`). 0 is best.
- ``entity-f1``: entity presence F1 of the pair, 2 TP / (2 TP + FP + FN), in [0, 1]. When neither
  report states a positive entity (both normal) the pair agrees fully: 1.0.
- ``critical-weighted``: minus (errors + (``critical_weight`` - 1) x errors on entities the
  ontology marks ``critical``), so missing a pneumothorax costs more than missing a granuloma;
  an error of the finding hierarchy on a critical entity ("pneumothorax" for "tension
  pneumothorax": the critical finding was reported) is not weighted.
- ``graded``: minus a weighted sum that orders, for one finding, the reference's own reading (0)
  > a specificity or attribute error (:data:`GRADED_WEIGHTS`: 0.5) > leaving it out (1.0) > denying
  it (1.25) > adding a critical finding the reference does not state (2.0); an added finding
  that is not critical costs as an omission (1.0). Reasons in docs/scoring.md, "The reward
  that grades".

Every value carries :attr:`ClinicalReward.signature` (shape, weight, engine, ontology, policy).
``rules``: a rule file that adds or overrides the rule engine's rules (as ``cxreval evaluate
--rules``); its hash is in the signature.

**Defined for any completion**: ``None``, non-text values and empty or garbage text are read as
text (``None`` as ""), so a report that states nothing is scored as a report that states nothing
(every reference finding missed), never as an exception that kills a training step.

**No gain from look-alike letters**: a completion that writes a finding with letters of another
script ("pneumоthorax" with a Cyrillic "о") or combining accents put on Latin letters is read as
the word it imitates, and is worth no more than :meth:`ClinicalReward.lookalike_floor`: 0.0 for ``entity-f1``,
the empty completion's reward for the other shapes. A policy cannot hide a finding this way, nor
profit from trying.

**Fast on repeats, bounded in memory**: the entity states of each distinct reference are kept
while ``reference_cache_mib`` allows (a training set repeats its references across epochs and
across the group of a GRPO prompt), and those of recent completions in a cache of their own
(``completion_cache_mib``; a group's rollouts often say the same short thing, "No acute
cardiopulmonary process."), so that new completions never push references out. Both are
:class:`~cxreval.caches.BoundedCache`: least recently used out once their byte estimate passes the
budget; 0 turns one off.

**Many cores**: ``num_workers=N`` scores a batch of at least ``parallel_min`` (256) completions in
N worker processes, in contiguous chunks (a GRPO group's completions share a reference and stay
in one worker, with its caches). The workers are spawned, never forked, so a trainer's CUDA
context is not copied; they live until :meth:`ClinicalReward.close` (or exit) and give the
rewards one process gives. A spawned worker imports the script that made it, so a training script
keeps its top-level work under ``if __name__ == "__main__":``.

Use with TRL (a reward function receives the completions and the dataset's columns)::

    reward = ClinicalReward("neg-errors", reference_key="reference")
    GRPOTrainer(..., reward_funcs=[reward])

and with verl, as ``custom_reward_function.path`` pointing at this module and ``name:
compute_score`` (ground truth = the reference report).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cxreval.caches import (
    REWARD_COMPLETIONS_MIB,
    REWARD_REFERENCES_MIB,
    STATE_BYTES,
    BoundedCache,
    mib,
    text_weight,
)
from cxreval.extract.text import lookalike_count
from cxreval.scores.signature import Signature

if TYPE_CHECKING:
    from cxreval.executors import LocalProcesses
    from cxreval.extract.rules import RuleSet

RewardShape = Literal["neg-errors", "entity-f1", "critical-weighted", "graded"]
SHAPES: tuple[str, ...] = ("neg-errors", "entity-f1", "critical-weighted", "graded")
#: The ``graded`` shape's cost of each error of a pair (see the module doc): a wrong attribute or
#: specificity keeps the finding, so it costs less than leaving the finding out; saying a finding
#: is absent misleads the reader more than saying nothing; inventing a critical finding (an
#: intervention the patient does not need) costs most.
GRADED_WEIGHTS: dict[str, float] = {
    "attribute": 0.5,
    "specificity": 0.5,
    "omission": 1.0,
    "denial": 1.25,
    "invented": 1.0,
    "invented_critical": 2.0,
}
#: Pairs judged into one table at a time when a batch is scored.
TABLE_PAIRS = 64
#: Batches smaller than this are scored in the calling process even with ``num_workers`` > 1.
PARALLEL_MIN_COMPLETIONS = 256


def _states_weight(text: str, states: dict[str, Any]) -> int:
    """Estimated bytes of a report's cached entity states."""
    return text_weight(text, len(states), STATE_BYTES)


def completion_text(completion: Any) -> str:
    """The text of a completion as TRL or verl give it: a string, a chat message list
    (``[{"role": "assistant", "content": ...}]``, the last message's content), or anything
    else (``None`` -> "", other values -> ``str``)."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return completion_text(completion.get("content"))
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return completion_text(completion[-1].get("content"))
    return str(completion)


class ClinicalReward:
    """Reward of generated reports against references (see the module doc)."""

    def __init__(
        self,
        shape: RewardShape = "neg-errors",
        *,
        reference_key: str = "reference",
        critical_weight: float = 3.0,
        ontology: str | Path | None = None,
        uncertain: str = "positive",
        reference_cache_mib: float = REWARD_REFERENCES_MIB,
        completion_cache_mib: float = REWARD_COMPLETIONS_MIB,
        rules: str | Path | RuleSet | None = None,
        hierarchy: bool = True,
        num_workers: int = 1,
        parallel_min: int = PARALLEL_MIN_COMPLETIONS,
    ) -> None:
        from cxreval.engines import EngineRunner
        from cxreval.metrics.table import table_metric
        from cxreval.ontology import Ontology, load_ontology

        if shape not in SHAPES:
            raise ValueError(f"unknown reward shape {shape!r}; choose from {', '.join(SHAPES)}")
        if critical_weight < 1:
            raise ValueError("critical_weight must be >= 1 (1 = every error counts the same)")
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.shape: RewardShape = shape
        self.reference_key = reference_key
        self.critical_weight = float(critical_weight)
        self.ontology = ontology if isinstance(ontology, Ontology) else load_ontology(ontology)
        self.uncertain = uncertain
        self.hierarchy = hierarchy
        self._runner = EngineRunner.build(
            self.ontology,
            uncertain=uncertain,  # type: ignore[arg-type]
            rules=rules,
            hierarchy=hierarchy,
        )
        self._extractor = self._runner.engine.extractor  # type: ignore[attr-defined]
        # the registered metrics whose per-pair values the shapes are (one arithmetic for all)
        self._metric = table_metric("spec-presence-micro-f1" if shape == "entity-f1" else "spec-errors", self.ontology)
        self._references: BoundedCache[str, Any] = BoundedCache(mib(reference_cache_mib), _states_weight, "reward references")
        self._completions: BoundedCache[str, Any] = BoundedCache(mib(completion_cache_mib), _states_weight, "reward completions")
        self.__name__ = f"cxreval_{shape.replace('-', '_')}"  # TRL logs a reward function by its name
        self.num_workers = num_workers
        """Processes that score a batch of at least :attr:`parallel_min` completions (spawned, so a
        trainer's CUDA context is never forked; results identical to one process)."""
        self.parallel_min = parallel_min
        #: What builds this reward again in a worker (its rule set travels whole).
        self._init_args = {
            "shape": shape,
            "reference_key": reference_key,
            "critical_weight": critical_weight,
            "ontology": self.ontology,
            "uncertain": uncertain,
            "reference_cache_mib": reference_cache_mib,
            "completion_cache_mib": completion_cache_mib,
            "rules": self._runner.engine.rules,  # type: ignore[attr-defined]
            "hierarchy": hierarchy,
        }
        self._pool: LocalProcesses | None = None

    @property
    def signature(self) -> Signature:
        options: dict[str, str] = {"shape": self.shape}
        if self.shape == "critical-weighted":
            options["critical_weight"] = f"{self.critical_weight:g}"
        sig = self._runner.engine.signature.with_metric(f"reward-{self.shape}")
        return sig.model_copy(update={"options": {**sig.options, **options}})

    @property
    def cached_references(self) -> list[str]:
        """The reference texts read and kept, least recently used first."""
        return list(self._references)

    def _states(self, text: str, cache: BoundedCache[str, Any]) -> Any:
        """A report's entity states, read once while ``cache`` keeps them."""
        hit = cache.get(text)
        return hit if hit is not None else cache.put(text, self._extractor.extract(text).states())

    def score_one(self, reference: Any, completion: Any) -> float:
        """The reward of one completion against one reference (a completion holding look-alike
        letters is worth no more than the floor of :meth:`lookalike_floor`)."""
        return self.score([reference], [completion])[0]

    def lookalike_floor(self, reference: Any) -> float:
        """The most a completion with look-alike letters (a Cyrillic "о" in "pneumоthorax",
        accents on Latin letters; :func:`~cxreval.extract.text.lookalike_count`) can earn: the
        engine reads such words as the letters they imitate, and this floor takes away any gain a
        policy could find in writing them. ``entity-f1``: 0.0, the least F1; ``neg-errors`` and
        ``critical-weighted``: the reward of an empty completion (every reference finding missed)."""
        ref = self._states(completion_text(reference), self._references)
        return float(self._floors([ref])[0])

    def _floors(self, reference_states: Sequence[Any]) -> np.ndarray:
        if self.shape == "entity-f1":
            return np.zeros(len(reference_states))
        empty = self._states("", self._completions)
        return self._values(reference_states, [empty] * len(reference_states))

    def _values(self, refs: Sequence[Any], cands: Sequence[Any]) -> np.ndarray:
        """The rewards of candidate states against reference states, in this shape, a slice of
        :data:`TABLE_PAIRS` pairs at a time (a batch's judgement rows all alive at once would
        make the garbage collector walk them again and again)."""
        return (
            np.concatenate(
                [
                    self._table_values(refs[i : i + TABLE_PAIRS], cands[i : i + TABLE_PAIRS])
                    for i in range(0, len(refs), TABLE_PAIRS)
                ]
            )
            if len(refs)
            else np.zeros(0)
        )

    def _table_values(self, refs: Sequence[Any], cands: Sequence[Any]) -> np.ndarray:
        """Each pair's value of a registered table metric (``spec-presence-micro-f1``,
        ``spec-errors``), from the table statistics of these pairs (read once for them)."""
        from cxreval.judge.compare import compare_states
        from cxreval.judge.table import JudgementTable
        from cxreval.scores.statistics import TableStatistics

        ids = [str(i) for i in range(len(refs))]
        rows = [
            row
            for i, ref, cand in zip(ids, refs, cands, strict=True)
            for row in compare_states(
                i,
                ref,
                cand,
                self.ontology,
                self.uncertain,  # type: ignore[arg-type]
                hierarchy=self.hierarchy,
            )
            if not row.implied
        ]  # a TN row without error counts in no statistic
        stats = TableStatistics(JudgementTable.from_rows(rows, ids), self.ontology)
        values = np.asarray(self._metric.compute(self._metric.table_stats(stats)), dtype=float)
        if self.shape == "entity-f1":
            return np.where(np.isnan(values), 1.0, values)  # undefined: both reports normal, full agreement
        if self.shape == "critical-weighted":
            cost = values + (self.critical_weight - 1) * stats.critical_errors(specificity=False)
        elif self.shape == "graded":
            cost = graded_cost(stats)
        else:
            cost = values
        return 0.0 - cost  # a cost of 0 is a reward of 0.0, never -0.0 (which a log prints as "-0.0")

    def score(self, references: Sequence[Any], completions: Sequence[Any]) -> list[float]:
        """Rewards of completions against their references, in order (one table for the batch)."""
        if len(references) != len(completions):
            raise ValueError(f"{len(references)} references but {len(completions)} completions")
        if not len(references):
            return []
        texts = [completion_text(c) for c in completions]
        if self.num_workers > 1 and len(texts) >= self.parallel_min:
            return self._score_in_workers([completion_text(r) for r in references], texts)
        refs = [self._states(completion_text(r), self._references) for r in references]
        cands = [self._states(t, self._completions) for t in texts]
        values = self._values(refs, cands)
        marked = [i for i, t in enumerate(texts) if lookalike_count(t)]
        if marked:
            floors = self._floors([refs[i] for i in marked])
            values[marked] = np.minimum(values[marked], floors)
        return [float(v) for v in values]

    def _score_in_workers(self, references: list[str], texts: list[str]) -> list[float]:
        """:meth:`score` in :attr:`num_workers` spawned processes (:mod:`cxreval.executors`; they
        start on the first large batch and serve every later one), in contiguous chunks (a GRPO
        group's completions, which share a reference, stay together and hit one worker's cache)."""
        from cxreval.executors import LocalProcesses
        from cxreval.parallel import chunked

        if self._pool is None:
            self._pool = LocalProcesses(self.num_workers, partial(ClinicalReward, **self._init_args), start_method="spawn")
            weakref.finalize(self, self._pool.close)
        parts = chunked(list(zip(references, texts, strict=True)), self.num_workers)
        return [v for values in self._pool.map(_score_chunk, parts) for v in values]

    def close(self) -> None:
        """Stop the worker processes, if any (they are stopped at exit too)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> ClinicalReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """A pickled reward carries no worker pool (a copy starts its own when it needs one)."""
        return {**self.__dict__, "_pool": None}

    def __call__(self, prompts: Any = None, completions: Sequence[Any] | None = None, **columns: Any) -> list[float]:
        """TRL's reward-function call: the completions, and the dataset's columns as keywords
        (the references under ``reference_key``)."""
        if completions is None:
            raise TypeError("a reward function is called with completions=...")
        if self.reference_key not in columns:
            raise KeyError(
                f"the dataset has no column {self.reference_key!r} (columns given: "
                f"{', '.join(sorted(columns)) or 'none'}); set reference_key="
            )
        return self.score(columns[self.reference_key], completions)


def graded_cost(stats: Any) -> np.ndarray:
    """The ``graded`` shape's cost per pair (:data:`GRADED_WEIGHTS`), from the pairs' error kinds
    (:class:`~cxreval.scores.statistics.TableStatistics`)."""
    from cxreval.scores.statistics import ERROR_COLUMNS, SPECIFICITY_KINDS

    kinds = stats.error_kinds()
    column = {name: kinds[:, k] for k, name in enumerate(ERROR_COLUMNS)}
    denials, critical = stats.denials(), stats.invented_critical()
    attribute = sum(column[k] for k in ERROR_COLUMNS if k not in ("fp", "fn", *SPECIFICITY_KINDS))
    w = GRADED_WEIGHTS
    cost: np.ndarray = (
        w["attribute"] * attribute
        + w["specificity"] * sum(column[k] for k in SPECIFICITY_KINDS)
        + w["omission"] * (column["fn"] - denials)
        + w["denial"] * denials
        + w["invented"] * (column["fp"] - critical)
        + w["invented_critical"] * critical
    ).astype(float)
    return cost


def _score_chunk(reward: ClinicalReward, part: Sequence[tuple[str, str]]) -> list[float]:
    """Worker: the rewards of a chunk of (reference, completion) texts (the worker's own reward,
    built once from the parent's settings)."""
    return reward.score([r for r, _ in part], [c for _, c in part])


_DEFAULT: dict[str, ClinicalReward] = {}


def compute_score(
    data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, shape: RewardShape = "neg-errors"
) -> float:
    """verl's reward entry point: the reward of ``solution_str`` against the reference report
    ``ground_truth`` (one shared :class:`ClinicalReward` per shape and process)."""
    reward = _DEFAULT.get(shape)
    if reward is None:
        reward = _DEFAULT[shape] = ClinicalReward(shape)
    return reward.score_one(ground_truth, solution_str)
