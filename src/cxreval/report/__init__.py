"""Moved to :mod:`cxreval.page` in 0.8.1 ("report" is the radiology report); this path goes in 0.9."""

import importlib
import warnings
from typing import Any

_NEW = "cxreval.page"
warnings.warn("cxreval.report moved to " + _NEW + " (0.8.1); the old path goes in 0.9", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module(_NEW), name)
