"""The readable summary that ``cxreval evaluate`` prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

from cxreval.render import Column, Table, print_signature, print_table
from cxreval.render import number as _f

if TYPE_CHECKING:
    from typing import Any

    import pandas as pd

    from cxreval.evaluate import EvaluationScores
    from cxreval.scores import AttributeScore


def _acc(score: AttributeScore, counts: bool = True) -> str:
    if score.accuracy is None:
        return "n/a"
    return f"{score.accuracy:.2f} ({score.correct}/{score.judged})" if counts else f"{score.accuracy:.2f}"


def print_summary(result: EvaluationScores, console: Console, top: int = 15) -> None:
    """Overall metrics, per-group and top per-entity tables, report-level error distribution."""
    console.print(f"[bold]cxreval[/] scored {result.n_pairs} pair{'' if result.n_pairs == 1 else 's'}", highlight=False)

    print_table(
        Table(
            [Column("metric", "left"), Column("value", keep=2), Column("better", "center", keep=1)],
            [(m["name"], _f(m["value"]), "↑" if m["higher_is_better"] else "↓") for m in result.metrics()],
            title="Headline metrics",
        ),
        console,
    )

    group_rows = []
    for g in result.groups:
        p = g.presence
        if p.tp + p.fp + p.fn == 0:
            continue
        group_rows.append(
            (
                g.name,
                str(p.support),
                _f(p.precision),
                _f(p.recall),
                _f(p.f1),
                _acc(g.location, False),
                _acc(g.severity, False),
                _acc(g.comparison, False),
            )
        )
    print_table(
        Table(
            [
                Column("group", "left"),
                Column("support", keep=5),
                Column("P", keep=3),
                Column("R", keep=3),
                Column("F1", keep=6),
                Column("loc", keep=2),
                Column("sev", keep=1),
                Column("cmp", keep=0),
            ],
            group_rows,
            title="By group (counts pooled over the group's entities)",
        ),
        console,
    )

    ranked = sorted(
        (e for e in result.entities if e.presence.tp + e.presence.fp + e.presence.fn > 0),
        key=lambda e: (-e.presence.support, -(e.presence.fp), e.entity),
    )
    entity_rows = []
    for e in ranked[:top]:
        p = e.presence
        entity_rows.append(
            (e.name, str(p.tp), str(p.fp), str(p.fn), _f(p.precision), _f(p.recall), _f(p.f1), _acc(e.location), _acc(e.severity))
        )
    print_table(
        Table(
            [
                Column("entity", "left"),
                Column("TP", keep=5),
                Column("FP", keep=5),
                Column("FN", keep=5),
                Column("P", keep=3),
                Column("R", keep=3),
                Column("F1", keep=6),
                Column("location", keep=1),
                Column("severity", keep=0),
            ],
            entity_rows,
            title=f"Entities (top {min(top, len(ranked))} of {len(ranked)} seen, by reference support)",
        ),
        console,
    )

    d = result.error_summary
    console.print(
        f"[bold]Report level[/] (errors per pair = FP + FN + not-aligned + comparison errors; lower is better): "
        f"mean {_f(d.mean)}, median {_f(d.median)}, max {d.max}, error-free {_f(d.error_free)}",
        highlight=False,
    )
    console.print("  distribution: " + "  ".join(f"{k}:{v}" for k, v in d.histogram.items()), highlight=False)
    print_signature(str(result.signature), console)
    print_llm_usage(result, console)


def print_llm_usage(result: EvaluationScores, console: Console) -> None:
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
    if u.estimated:
        console.print(
            f"[bold yellow]{u.estimated} answer(s) came without usable token usage[/]: their tokens and "
            "cost are estimated (1 token per 3 bytes)",
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


def print_runs(results: Sequence[EvaluationScores], summary: dict[str, Any], console: Console) -> None:
    """Mean +- sd of the headline metrics over ``--runs`` independent runs."""
    console.print(f"[bold]cxreval[/] {len(results)} runs over {results[0].n_pairs + results[0].n_failed} pairs", highlight=False)
    print_table(
        Table(
            [
                Column("metric", "left"),
                Column("mean", keep=4),
                Column("sd", keep=3),
                Column("runs", keep=1),
                Column("better", "center", keep=2),
            ],
            [
                (m["name"], _f(m["mean"]), _f(m["sd"]), str(m["n_runs"]), "↑" if m["higher_is_better"] else "↓")
                for m in summary["metrics"]
            ],
            title="Headline metrics, mean +- sd over runs",
        ),
        console,
    )
    for r in results:
        if r.failures:
            console.print(f"run {r.run}: {r.n_failed} pair(s) not scored (run-{r.run}/failures.jsonl)", highlight=False)
    print_signature(summary["signature"], console)


#: Short headers for the systems table, in the order columns are kept when space runs out.
SYSTEM_COLUMNS: dict[str, tuple[str, int]] = {
    "n_pairs": ("pairs", 3),
    "n_failed": ("failed", 10),
    "runs": ("runs", 2),
    "presence_macro_f1": ("macro F1", 9),
    "presence_micro_f1": ("micro F1", 7),
    "presence_micro_precision": ("P", 4),
    "presence_micro_recall": ("R", 4),
    "location_accuracy": ("loc", 1),
    "severity_accuracy": ("sev", 1),
    "comparison_accuracy": ("cmp", 0),
    "errors_per_report_mean": ("err/rep", 8),
    "error_free_rate": ("err-free", 6),
    "critical_error_free_rate": ("crit-free", 5),
}


def print_systems(frame: pd.DataFrame, console: Console, *, signature: str) -> None:
    """One row per system (``--system-col``): the headline metrics side by side."""
    cols = [c for c in SYSTEM_COLUMNS if c in frame.columns]
    rows = []
    for system, row in frame.iterrows():
        rows.append((str(system), *(str(int(row[c])) if c.startswith("n_") or c == "runs" else _f(_num(row[c])) for c in cols)))
    print_table(
        Table(
            [Column("system", "left"), *(Column(SYSTEM_COLUMNS[c][0], keep=SYSTEM_COLUMNS[c][1]) for c in cols)],
            rows,
            title=f"{len(frame)} systems (headline metrics; names as in scores.json: see systems.csv)",
            note="all in systems.csv",
            signature=signature,
        ),
        console,
    )


def _num(value: object) -> float | None:
    """A frame cell as a float, or None where the metric is undefined (NaN / None)."""
    if value is None:
        return None
    v = float(value)  # type: ignore[arg-type]
    return None if v != v else v
