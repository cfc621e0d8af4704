"""cxreval: entity-level, clinically grounded evaluation of generated chest X-ray reports.

Quick start::

    import cxreval
    pairs = cxreval.read_pairs("pairs.csv")
    result = cxreval.evaluate(pairs)
    result.averages.macro_f1, result.error_summary.mean

Nothing here touches the network. Names are imported on first use (PEP 562), so ``import
cxreval`` and ``cxreval --version`` do not pay for pandas, scipy or the LLM backends' HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cxreval._version import __version__

if TYPE_CHECKING:
    from cxreval.evaluate import EvaluationResult, Evaluator, evaluate
    from cxreval.io import InputError, ReportPair, read_pair_files, read_pairs, read_reports
    from cxreval.ontology import Ontology, OntologyError, load_ontology
    from cxreval.scores.signature import Signature
    from cxreval.streaming import evaluate_to

#: public name -> the module that defines it
_LAZY: dict[str, str] = {
    "EvaluationResult": "cxreval.evaluate",
    "Evaluator": "cxreval.evaluate",
    "InputError": "cxreval.io",
    "ReportPair": "cxreval.io",
    "read_pair_files": "cxreval.io",
    "read_pairs": "cxreval.io",
    "read_reports": "cxreval.io",
    "Ontology": "cxreval.ontology",
    "OntologyError": "cxreval.ontology",
    "load_ontology": "cxreval.ontology",
    "Signature": "cxreval.scores.signature",
    "evaluate_to": "cxreval.streaming",
}

__all__ = [*sorted(_LAZY), "__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "evaluate":
        # the module, which is callable as the function (see the end of cxreval/evaluate.py):
        # ``import cxreval.evaluate`` anywhere puts the module on the package under this name
        return importlib.import_module("cxreval.evaluate")
    raise AttributeError(f"module 'cxreval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
