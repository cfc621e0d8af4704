"""The entity ontology: models, loader and the packaged default entity set."""

from cxreval.ontology.loader import OntologyError, load_ontology, parse_ontology
from cxreval.ontology.models import Category, Entity, Group, LabelSet, Ontology, normalize_term

__all__ = [
    "Category",
    "Entity",
    "Group",
    "LabelSet",
    "Ontology",
    "OntologyError",
    "load_ontology",
    "normalize_term",
    "parse_ontology",
]
