"""The readable summary that ``cxreval evaluate`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from typing import Any

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
    print_llm_usage(result, console)


def print_llm_usage(result: "EvaluationResult", console: Console) -> None:
    """Calls, cache hits, tokens, cost and failures of an LLM run (nothing for the rule engine)."""
    u = result.usage
    if u is None:
        return
    console.print(
        f"[bold]LLM[/] {u.tasks} calls needed, {u.cache_hits} from cache, {u.requests} requests sent "
        f"({u.retries} retries, {u.reasks} re-asks), tokens in {u.input_tokens:,} / out {u.output_tokens:,}, "
        f"cost {u.cost:.4f} USD, {u.seconds:.1f} s, response format {u.response_format}",
        highlight=False,
    )
    if result.failures:
        reasons: dict[str, int] = {}
        for f in result.failures:
            reasons[f.reason] = reasons.get(f.reason, 0) + 1
        console.print(
            f"[bold yellow]{result.n_failed} pair(s) not scored[/] ("
            + ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
            + "), listed in failures.jsonl",
            highlight=False,
        )


def print_runs(results: "list[EvaluationResult]", summary: "dict[str, Any]", console: Console) -> None:
    """Mean +- sd of the headline metrics over ``--runs`` independent runs."""
    console.print(f"[bold]cxreval[/] {len(results)} runs over {results[0].n_pairs + results[0].n_failed} pairs",
                  highlight=False)
    table = Table(title="Headline metrics, mean +- sd over runs", title_justify="left")
    for col, just in (("metric", "left"), ("mean", "right"), ("sd", "right"), ("runs", "right"), ("better", "center")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for m in summary["metrics"]:
        table.add_row(m["name"], _f(m["mean"]), _f(m["sd"]), str(m["n_runs"]), "↑" if m["higher_is_better"] else "↓")
    console.print(table)
    for r in results:
        if r.failures:
            console.print(f"run {r.run}: {r.n_failed} pair(s) not scored (run-{r.run}/failures.jsonl)", highlight=False)
    console.print(f"[dim]signature: {summary['signature']}[/]", highlight=False)
