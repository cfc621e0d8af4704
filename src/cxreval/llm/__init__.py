"""LLM engines' shared parts: settings, backends, schemas, prompts, the answer cache and the runner.

Importing this package makes no network call and does not import the provider SDKs; a backend
is created (and its SDK imported) only when an LLM engine actually runs.
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
