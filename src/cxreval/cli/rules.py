"""``cxreval rules``: the rule engine's rules, each with its id, kind and one-line doc.

``list`` prints every rule (the packaged ones, and a user's rule file's with ``--rules``), so a
user can see what a reading's rule ids mean and which id to override; ``show`` prints one rule
whole (its phrases, numbers and example). Registered by the main CLI as
``app.add_typer(rules_app, name="rules")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cxreval.cli.common import RulesOption, fail, ontology_or_fail, user_rules

if TYPE_CHECKING:
    from cxreval.extract.rules import RuleSet
    from cxreval.extract.rules.ruleset import Record

rules_app = typer.Typer(help="The rule engine's rules: ids, kinds, docs.", no_args_is_help=True)

OntologyOption = Annotated[
    Path | None, typer.Option("--ontology", help="Your own ontology YAML (a rule file may name its entities).")
]


def _rule_set(rules: Path | None, ontology: Path | None) -> RuleSet:
    from cxreval.extract.rules import load_rules

    onto = ontology_or_fail(ontology)
    return user_rules(onto, rules) or load_rules(onto)


def _kind(record: Record) -> str:
    """A record's kind as the table shows it: ``cue:negation_pre`` for a cue (its category)."""
    kind = str(getattr(record, "kind", ""))
    category = getattr(record, "category", None)
    return f"{kind}:{category}" if category else kind


def _holds(record: Record) -> str:
    """What a record holds, in short: its phrase count, its numbers, a site rule's entities."""
    phrases = getattr(record, "phrases", None)
    if phrases is not None:
        return f"{len(phrases)} phrases"
    if hasattr(record, "to"):
        return f"{getattr(record, 'entity', 'device')} -> {record.to}"
    numbers = [
        f"{name}={getattr(record, name)}"
        for name in ("max_tokens", "max_entity_hops", "predicate_tokens", "back", "forward", "max_skipped")
        if getattr(record, name, None) is not None
    ]
    return " ".join(numbers)


@rules_app.command("list")
def list_rules(
    rules: RulesOption = None,
    ontology: OntologyOption = None,
    kind: Annotated[
        str | None,
        typer.Option(
            help="only rules of this kind: cue, cue:negation_pre (a cue category), step, window, site, normal, name, derived"
        ),
    ] = None,
) -> None:
    """Every rule's id, kind (a cue's category), order (status steps), what it holds and its doc."""
    rule_set = _rule_set(rules, ontology)
    records = list(rule_set.records.values())
    kinds = sorted({_kind(r) for r in records} | {_kind(r).split(":")[0] for r in records})
    if kind is not None and kind not in kinds:
        fail(f"no rules of kind {kind!r}; the kinds are {', '.join(kinds)}")
    table = Table("id", "kind", "order", "holds", "doc", box=None, pad_edge=False)
    for record in sorted(records, key=lambda r: getattr(r, "order", 0)):
        shown = _kind(record)
        if kind is not None and kind not in (shown, shown.split(":")[0]):
            continue
        order = str(getattr(record, "order", "")) if record.enabled else "off"
        table.add_row(escape(record.id), escape(shown), order, escape(_holds(record)), escape(record.doc))
    Console(soft_wrap=True).print(table)


@rules_app.command("show")
def show_rule(
    rule_id: Annotated[str, typer.Argument(metavar="ID", help="a rule id, as `cxreval rules list` and --explain print it")],
    rules: RulesOption = None,
    ontology: OntologyOption = None,
) -> None:
    """One rule whole, as YAML: its kind, doc, example, phrases and numbers."""
    import yaml

    rule_set = _rule_set(rules, ontology)
    record = rule_set.records.get(rule_id)
    if record is None:
        near = [r for r in rule_set.records if rule_id in r][:5]
        fail(f"no rule {rule_id!r}" + (f"; did you mean {', '.join(near)}?" if near else "; see `cxreval rules list`"))
    typer.echo(
        yaml.safe_dump(record.model_dump(mode="json", exclude_none=True), sort_keys=False, allow_unicode=True, width=100).rstrip()
    )
