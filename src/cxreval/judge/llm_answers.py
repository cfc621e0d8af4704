"""Moved to :mod:`cxreval.judge.llm_verdicts` in 0.8.1 (one name, one meaning); this path goes in 0.9."""

import importlib
import warnings
from typing import Any

_NEW = "cxreval.judge.llm_verdicts"
warnings.warn(
    "cxreval.judge.llm_answers moved to " + _NEW + " (0.8.1); the old path goes in 0.9", DeprecationWarning, stacklevel=2
)


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module(_NEW), name)
