"""Moved to :mod:`cxreval.io.writers` in 0.8.1 (reading and writing files live in one package); this path goes in 0.9."""

import importlib
import warnings
from typing import Any

_NEW = "cxreval.io.writers"
warnings.warn("cxreval.outputs moved to " + _NEW + " (0.8.1); the old path goes in 0.9", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module(_NEW), name)
