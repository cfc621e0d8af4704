"""A clinical reward for reinforcement learning: the offline rule engine, one number per rollout.

RL pipelines that train report generators (TRL's GRPO, verl, OpenRLHF) need a reward for every
sampled report, millions of them, on CPUs beside the trainer. :class:`ClinicalReward` scores a
completion against its reference with cxreval's SPEC-CXR judgement, in one of three shapes:

- ``neg-errors``: minus the SPEC-CXR error count of the pair (FP + FN + not-aligned location or
  severity + comparison errors; the rule of :data:`cxreval.judge.models.ERROR_KINDS`). 0 is best.
- ``entity-f1``: entity presence F1 of the pair, 2 TP / (2 TP + FP + FN), in [0, 1]. When neither
  report states a positive entity (both normal) the pair agrees fully: 1.0.
- ``critical-weighted``: minus (errors + (``critical_weight`` - 1) x errors on entities the
  ontology marks ``critical``), so missing a pneumothorax costs more than missing a granuloma.

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

**Fast on repeats**: each distinct reference is read once and kept (a training set repeats its
references across epochs and across the group of a GRPO prompt); so is each distinct completion
among the last ``completion_cache`` (a group's rollouts often say the same short thing, "No acute
cardiopulmonary process."), in a cache of its own, so that new completions never push references
out.

Use with TRL (a reward function receives the completions and the dataset's columns)::

    reward = ClinicalReward("neg-errors", reference_key="reference")
    GRPOTrainer(..., reward_funcs=[reward])

and with verl, as ``custom_reward_function.path`` pointing at this module and ``name:
compute_score`` (ground truth = the reference report).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from cxreval.extract.text import lookalike_count
from cxreval.scores.ratios import f1_score
from cxreval.scores.signature import Signature

RewardShape = Literal["neg-errors", "entity-f1", "critical-weighted"]
SHAPES: tuple[str, ...] = ("neg-errors", "entity-f1", "critical-weighted")


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
        cache_size: int = 100_000,
        completion_cache: int = 10_000,
        rules: str | Path | None = None,
    ) -> None:
        from cxreval.evaluate import Evaluator

        if shape not in SHAPES:
            raise ValueError(f"unknown reward shape {shape!r}; choose from {', '.join(SHAPES)}")
        if critical_weight < 1:
            raise ValueError("critical_weight must be >= 1 (1 = every error counts the same)")
        self.shape: RewardShape = shape
        self.reference_key = reference_key
        self.critical_weight = float(critical_weight)
        self._evaluator = Evaluator(ontology, uncertain=uncertain, rules=rules)  # type: ignore[arg-type]
        self._critical = frozenset(e.id for e in self._evaluator.ontology.entities if e.critical)
        self._references: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size
        self._completions: OrderedDict[str, Any] = OrderedDict()
        self._completion_cache = completion_cache
        self.__name__ = f"cxreval_{shape.replace('-', '_')}"  # TRL logs a reward function by its name

    @property
    def signature(self) -> Signature:
        options = {"shape": self.shape}
        if self.shape == "critical-weighted":
            options["critical_weight"] = f"{self.critical_weight:g}"
        sig = self._evaluator.signature.with_metric(f"reward-{self.shape}")
        return sig.model_copy(update={"options": {**sig.options, **options}})

    @property
    def cached_references(self) -> list[str]:
        """The reference texts read and kept, least recently used first."""
        return list(self._references)

    def _states(self, text: str, cache: OrderedDict[str, Any], size: int) -> Any:
        """A report's entity states, read once while ``cache`` (an LRU of ``size``) keeps them."""
        hit = cache.get(text)
        if hit is None:
            hit = self._evaluator.extractor.extract(text).states()
            if size:
                cache[text] = hit
                if len(cache) > size:
                    cache.popitem(last=False)
        else:
            cache.move_to_end(text)
        return hit

    def score_one(self, reference: Any, completion: Any) -> float:
        """The reward of one completion against one reference (a completion holding look-alike
        letters is worth no more than the floor of :meth:`lookalike_floor`)."""
        text = completion_text(completion)
        ref = self._states(completion_text(reference), self._references, self._cache_size)
        value = self._value(ref, self._states(text, self._completions, self._completion_cache))
        return min(value, self._floor(ref)) if lookalike_count(text) else value

    def lookalike_floor(self, reference: Any) -> float:
        """The most a completion with look-alike letters (a Cyrillic "о" in "pneumоthorax",
        accents on Latin letters; :func:`~cxreval.extract.text.lookalike_count`) can earn: the
        engine reads such words as the letters they imitate, and this floor takes away any gain a
        policy could find in writing them. ``entity-f1``: 0.0, the least F1; ``neg-errors`` and
        ``critical-weighted``: the reward of an empty completion (every reference finding missed)."""
        return self._floor(self._states(completion_text(reference), self._references, self._cache_size))

    def _floor(self, reference_states: Any) -> float:
        if self.shape == "entity-f1":
            return 0.0
        return self._value(reference_states, self._states("", self._completions, self._completion_cache))

    def _value(self, ref: Any, cand: Any) -> float:
        """The reward of candidate states against reference states, in this shape."""
        from cxreval.judge.compare import compare_states

        ev = self._evaluator
        rows = compare_states("r", ref, cand, ev.ontology, ev.uncertain)
        if self.shape == "entity-f1":
            tp = sum(r.presence == "TP" for r in rows)
            fp = sum(r.presence == "FP" for r in rows)
            fn = sum(r.presence == "FN" for r in rows)
            f1 = f1_score(tp, fp, fn)  # the F1 every score uses; undefined = both normal
            return 1.0 if f1 is None else f1
        errors = sum(r.error_count for r in rows)
        if self.shape == "critical-weighted":
            critical = sum(r.error_count for r in rows if r.entity in self._critical)
            return -float(errors + (self.critical_weight - 1) * critical)
        return -float(errors)

    def score(self, references: Sequence[Any], completions: Sequence[Any]) -> list[float]:
        """Rewards of completions against their references, in order."""
        if len(references) != len(completions):
            raise ValueError(f"{len(references)} references but {len(completions)} completions")
        return [self.score_one(r, c) for r, c in zip(references, completions)]

    def __call__(self, prompts: Any = None, completions: Sequence[Any] | None = None, **columns: Any) -> list[float]:
        """TRL's reward-function call: the completions, and the dataset's columns as keywords
        (the references under ``reference_key``)."""
        if completions is None:
            raise TypeError("a reward function is called with completions=...")
        if self.reference_key not in columns:
            raise KeyError(f"the dataset has no column {self.reference_key!r} (columns given: "
                           f"{', '.join(sorted(columns)) or 'none'}); set reference_key=")
        return self.score(columns[self.reference_key], completions)


_DEFAULT: dict[str, ClinicalReward] = {}


def compute_score(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None,
                  shape: RewardShape = "neg-errors") -> float:
    """verl's reward entry point: the reward of ``solution_str`` against the reference report
    ``ground_truth`` (one shared :class:`ClinicalReward` per shape and process)."""
    reward = _DEFAULT.get(shape)
    if reward is None:
        reward = _DEFAULT[shape] = ClinicalReward(shape)
    return reward.score_one(ground_truth, solution_str)
