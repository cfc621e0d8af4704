"""The offline rule engine: named rules (``data/``) read a report into entity mentions.

The layout follows the data flow: ``scanning`` finds finding names and cue phrases, ``lexicon``
holds the word lists, ``ruleset`` loads the rule records (packaged and a user's), ``scopes``
and ``attributes`` read the words around a mention, ``interpreter`` applies the status rules in
their order, and ``engine`` reads whole reports with its caches. docs/engine.md describes it.
"""

from cxreval.extract.rules.engine import (
    MAX_SCOPE_CHARS,
    RULES_VERSION,
    RuleExtractor,
    RulesError,
    RuleSet,
    build_entity_trie,
    default_extractor,
    load_rules,
)

__all__ = [
    "MAX_SCOPE_CHARS",
    "RULES_VERSION",
    "RuleExtractor",
    "RuleSet",
    "RulesError",
    "build_entity_trie",
    "default_extractor",
    "load_rules",
]
