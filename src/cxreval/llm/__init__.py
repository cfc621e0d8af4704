"""The LLM infrastructure the engines are built on: settings, backends, the runner, the answer
store, prompt rendering and generic answer parsing (JSON loading, errors for the model, votes,
entity ids).

It knows no engine: the engines' own answers live next to them (:mod:`cxreval.extract.llm`,
:mod:`cxreval.judge.llm_pairwise`, :mod:`cxreval.judge.twopass`, the labeler in
:mod:`cxreval.labelers`), and nothing here imports ``extract``, ``judge`` or ``scores``.
Importing this package makes no network call and does not import the HTTP client; a backend
is created (and its client imported) only when an LLM engine actually runs.
"""

from cxreval.llm.cache import AnswerCache, CachedAnswer, cache_key
from cxreval.llm.config import LLMConfig, LLMConfigError, is_loopback_url
from cxreval.llm.runner import LLMRunner, Outcome, Task, Usage

__all__ = [
    "AnswerCache",
    "CachedAnswer",
    "LLMConfig",
    "LLMConfigError",
    "LLMRunner",
    "Outcome",
    "Task",
    "Usage",
    "cache_key",
    "is_loopback_url",
]
