"""The readable summary that ``cxreval evaluate`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from cxreval.evaluate import EvaluationResult
    from cxreval.scores import AttributeScore


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _acc(score: "AttributeScore", counts: bool = True) -> str:
    if score.accuracy is None:
        return "n/a"
    return f"{score.accuracy:.2f} ({score.correct}/{score.judged})" if counts else f"{score.accuracy:.2f}"


def print_summary(result: "EvaluationResult", console: Console, top: int = 15) -> None:
    """Overall metrics, per-group and top per-entity tables, report-level error distribution."""
    console.print(f"[bold]cxreval[/] scored {result.n_pairs} pairs", highlight=False)

    overall = Table(title="Headline metrics", title_justify="left")
    overall.add_column("metric")
    overall.add_column("value", justify="right")
    overall.add_column("better", justify="center")
    for m in result.metrics():
        overall.add_row(m["name"], _f(m["value"]), "↑" if m["higher_is_better"] else "↓")
    console.print(overall)

    groups = Table(title="By group (counts pooled over the group's entities)", title_justify="left")
    groups.add_column("group", no_wrap=True, overflow="ellipsis", max_width=34)
    for col in ("support", "P", "R", "F1", "loc", "sev", "cmp"):
        groups.add_column(col, justify="right", no_wrap=True)
    for g in result.groups:
        p = g.presence
        if p.tp + p.fp + p.fn == 0:
            continue
        groups.add_row(g.name, str(p.support), _f(p.precision), _f(p.recall), _f(p.f1),
                       _acc(g.location, False), _acc(g.severity, False), _acc(g.comparison, False))
    console.print(groups)

    ranked = sorted(
        (e for e in result.entities if e.presence.tp + e.presence.fp + e.presence.fn > 0),
        key=lambda e: (-e.presence.support, -(e.presence.fp), e.entity),
    )
    ents = Table(title=f"Entities (top {min(top, len(ranked))} of {len(ranked)} seen, by reference support)",
                 title_justify="left")
    ents.add_column("entity", no_wrap=True, overflow="ellipsis", max_width=34)
    for col in ("TP", "FP", "FN", "P", "R", "F1", "location", "severity"):
        ents.add_column(col, justify="right", no_wrap=True)
    for e in ranked[:top]:
        p = e.presence
        ents.add_row(e.name, str(p.tp), str(p.fp), str(p.fn), _f(p.precision), _f(p.recall), _f(p.f1),
                     _acc(e.location), _acc(e.severity))
    console.print(ents)

    d = result.error_summary
    console.print(
        f"[bold]Report level[/] (errors per pair = FP + FN + not-aligned + comparison errors; lower is better): "
        f"mean {_f(d.mean)}, median {_f(d.median)}, max {d.max}, error-free {_f(d.error_free)}",
        highlight=False,
    )
    console.print("  distribution: " + "  ".join(f"{k}:{v}" for k, v in d.histogram.items()), highlight=False)
    console.print(f"[dim]signature: {result.signature}[/]", highlight=False)
