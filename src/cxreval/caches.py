"""One bounded cache for every cache of the package: least recently used out, under a byte budget.

A cache keyed by report or sentence text grows with every new text a model writes; a count of
entries bounds nothing when entries differ in size (a one-word sentence against a whole report's
extraction). :class:`BoundedCache` keeps an estimate of the bytes it holds (each entry weighed once,
when it is put, by the owner's ``weigh``) and drops the least recently used entries once the
estimate passes its budget. The weights are estimates, set above what ``tracemalloc`` measured
(docs/engine.md, "Caches and memory"); ``benchmarks/memory.py`` checks the whole process against
them.

The budgets (MiB; each owner takes a budget argument, 0 turns its cache off):

- :data:`EXTRACTOR_MIB` for a :class:`~cxreval.extract.rules.RuleExtractor`, shared by its four
  caches (:data:`EXTRACTOR_SHARES`: sentences, sections, pieces between full stops, whole reports);
- :data:`REWARD_REFERENCES_MIB` and :data:`REWARD_COMPLETIONS_MIB` for
  :class:`~cxreval.reward.ClinicalReward`'s entity states of references and of completions;
- :data:`INJECTION_MIB` for the instruction signals of texts sent to an LLM judge;
- :data:`WEIGHT_METRIC_MIB` for what a weight-based metric keeps of each text (RadGraph
  annotations; RaTEScore's entities and their vectors, half each).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MIB = 1 << 20
#: A rule extractor's budget in all (its four caches share it by :data:`EXTRACTOR_SHARES`).
EXTRACTOR_MIB = 96.0
#: How the extractor's budget is shared: distinct sentences, sections, pieces between full stops
#: (the normal statements' matches) and whole reports.
EXTRACTOR_SHARES = {"sentences": 0.35, "sections": 0.35, "pieces": 0.05, "reports": 0.25}
#: The reward's entity states of distinct references (a training set's references repeat every epoch).
REWARD_REFERENCES_MIB = 48.0
#: The reward's entity states of distinct completions (a GRPO group often repeats a short report).
REWARD_COMPLETIONS_MIB = 16.0
#: The instruction signals of distinct texts sent to an LLM judge (:mod:`cxreval.llm.injection`).
INJECTION_MIB = 8.0
#: A weight-based metric's model outputs of distinct texts (a bootstrap or a bench scores the same
#: texts again): RadGraph annotations, RaTEScore entities and vectors.
WEIGHT_METRIC_MIB = 64.0

#: Estimated bytes of one entry's key, value container and map slot, whatever it holds.
ENTRY_BYTES = 320
#: Estimated bytes of one character of text held (str is 1 byte a character for ASCII; 2 leaves
#: room for the other texts an entry keeps of it: an evidence quote, a normalised copy).
CHAR_BYTES = 2
#: Estimated bytes of one extracted mention (a pydantic model with its attributes; tracemalloc
#: measured 625 bytes a mention over 3,000 IU X-ray reports read apart, 460 in the section cache).
MENTION_BYTES = 700
#: Estimated bytes of one mention of a cached report: a copy moved from the section cache, which
#: shares its attribute values with the cached section's (tracemalloc: about 180 bytes).
MOVED_MENTION_BYTES = 300
#: Estimated bytes of one entity state (:class:`~cxreval.extract.models.EntityState`) and its key
#: (tracemalloc: 677 bytes a state over the same reports).
STATE_BYTES = 750


def mib(budget: float) -> int:
    """A budget in MiB as bytes (a negative budget is an error: 0 turns a cache off)."""
    if budget < 0:
        raise ValueError(f"a cache budget must be >= 0 MiB, got {budget}")
    return int(budget * MIB)


def text_weight(text: str, items: int = 0, item_bytes: int = MENTION_BYTES) -> int:
    """The estimated bytes of an entry that keeps ``text`` and ``items`` objects of ``item_bytes``."""
    return ENTRY_BYTES + CHAR_BYTES * len(text) + items * item_bytes


class BoundedCache(Generic[K, V]):
    """A map of at most ``budget`` estimated bytes, least recently used out first.

    ``weigh(key, value)`` estimates an entry's bytes once, when it is put. An entry heavier than
    the whole budget is not kept. ``get`` of a hit makes it the most recently used; ``put`` of a
    key already held replaces it.
    """

    __slots__ = ("budget", "name", "nbytes", "_data", "_weigh")

    def __init__(self, budget: int, weigh: Callable[[K, V], int], name: str = "cache") -> None:
        self.budget = budget
        self.name = name
        self.nbytes = 0
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weigh = weigh

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        hit = self._data.get(key)
        if hit is None:
            return None
        self._data.move_to_end(key)
        return hit[0]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` while the budget allows; returns ``value``."""
        if not self.budget:
            return value
        size = self._weigh(key, value)
        if size > self.budget:
            return value
        old = self._data.pop(key, None)
        if old is not None:
            self.nbytes -= old[1]
        self._data[key] = (value, size)
        self.nbytes += size
        data = self._data
        while self.nbytes > self.budget:
            _, (_, dropped) = data.popitem(last=False)
            self.nbytes -= dropped
        return value

    def clear(self) -> None:
        self._data.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(self._data)

    def __repr__(self) -> str:
        return f"BoundedCache({self.name!r}, {len(self)} entries, {self.nbytes:,} of {self.budget:,} bytes)"
