"""cxreval: entity-level, clinically grounded evaluation of generated chest X-ray reports.

Quick start::

    import cxreval
    pairs = cxreval.read_pairs("pairs.csv")
    result = cxreval.evaluate(pairs)
    result.averages.macro_f1, result.error_summary.mean

Nothing here touches the network.
"""

from cxreval._version import __version__
from cxreval.evaluate import EvaluationResult, Evaluator, evaluate
from cxreval.io import InputError, ReportPair, read_pair_files, read_pairs, read_reports
from cxreval.ontology import Ontology, OntologyError, load_ontology

__all__ = [
    "EvaluationResult",
    "Evaluator",
    "InputError",
    "Ontology",
    "OntologyError",
    "ReportPair",
    "__version__",
    "evaluate",
    "load_ontology",
    "read_pair_files",
    "read_pairs",
    "read_reports",
]
