"""YAML as cxreval reads it: PyYAML's safe loader, through libyaml (C) where the wheel has it.

The pure-Python loader took most of the rule engine's start (the ontology, the attribute words
and the rule records are about 3,000 lines of YAML); libyaml reads the same documents to the same
values several times faster. ``parse`` also returns the node tree, whose marks give each item's
line for error messages, from the one parse.
"""

from __future__ import annotations

from typing import Any

import yaml

#: The safe loader, in C when PyYAML was built with libyaml (its wheels are).
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: What a document that cannot be read raises.
YAMLError = yaml.YAMLError


def safe_load(text: str) -> Any:
    """The value of one YAML document (``yaml.safe_load``)."""
    return yaml.load(text, Loader=Loader)


def parse(text: str) -> tuple[Any, yaml.Node | None]:
    """The value of one YAML document and its node tree (None for an empty document)."""
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()
