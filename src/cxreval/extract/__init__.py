"""Extraction: one report -> the entity mentions it contains."""

from cxreval.extract.models import EntityState, Extraction, Mention
from cxreval.extract.rules import RuleExtractor, default_extractor, load_rules

__all__ = ["EntityState", "Extraction", "Mention", "RuleExtractor", "default_extractor", "load_rules"]
