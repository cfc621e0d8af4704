"""Render a ``BenchmarkResult`` as one self-contained HTML page.

The page needs no network: CSS, JavaScript, charts (inline SVG) and the drill-down data (JSON in
a ``<script type="application/json">`` block) are all inline. Text from the result is escaped by
jinja2's autoescape (HTML) and by ``_json_for_script`` (the embedded JSON).

Layout: a header with the run's provenance, an overview across datasets, one tab per dataset
(leaderboards per stratum, spider charts over the ontology's plot groups, the per-group table,
the system x entity matrix with drill-down to example pairs, the site heatmap and the metric
correlation heatmaps), and the metric signatures.

Report text enters the page only through the example pairs of the drill-down (their sentences
and the cue phrases of their rule lines). ``include_text=False`` (``--no-text``) renders
:meth:`BenchmarkResult.without_text <cxreval.bench.models.BenchmarkResult.without_text>`, so the
page holds none, and says so; a result saved without text renders the same way.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from cxreval.page import charts
from cxreval.render import number

if TYPE_CHECKING:  # pragma: no cover
    from cxreval.bench.models import BenchmarkResult, EntityResult, Interval, Leaderboard

TEMPLATES = Path(__file__).parent / "templates"
TOP_K = 5  # systems shown on the spider charts by default
_STRATUM_ORDER = {"all": 0, "normal": 1, "abnormal": 2}
_ATTRS = [("location_acc", "Location"), ("severity_acc", "Severity"), ("comparison_acc", "Comparison")]


def _is_num(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))


def fmt(v: float | None, digits: int = 3) -> str:
    """Format a metric value (:func:`cxreval.render.number`); ``n/a`` for undefined."""
    return number(v, digits) if _is_num(v) else "n/a"


def pct(v: float | None) -> str:
    """Format a share in [0, 1] as a percentage; ``n/a`` for undefined."""
    return "n/a" if not _is_num(v) else f"{100 * v:.1f}%"


def _sort_value(v: float | None) -> str:
    return "" if not _is_num(v) else f"{float(v):.6g}"


def _slug(text: str, seen: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"
    slug, k = base, 2
    while slug in seen:
        slug, k = f"{base}-{k}", k + 1
    seen.add(slug)
    return slug


def _natural_key(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


def _json_for_script(obj: Any) -> Markup:
    """JSON safe to place inside ``<script type="application/json">`` (no ``<``, ``>``, ``&``)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _clean(v: float | None) -> float | None:
    if not _is_num(v):
        return None
    return round(float(v), 4)


@dataclass
class Cell:
    """One table cell: display text, sort value, optional sub-line, CSS class and background."""

    text: str
    sort: str = ""
    sub: str = ""
    cls: str = ""
    bg: str = ""
    fg: str = ""
    title: str = ""


@dataclass
class Column:
    """A sortable table column."""

    label: str
    kind: str = "num"  # num | text
    first: str = "desc"  # direction of the first click
    title: str = ""
    cls: str = ""


@dataclass
class Table:
    """A sortable table: columns and rows of cells."""

    columns: list[Column]
    rows: list[list[Cell]]
    row_attrs: list[dict[str, str]] = field(default_factory=list)
    css_class: str = ""
    caption: str = ""


def _interval_cell(iv: Interval | None, as_pct: bool = False, primary: bool = False) -> Cell:
    if iv is None:
        return Cell("n/a", "", cls="na")
    f = pct if as_pct else fmt
    sub = ""
    if _is_num(iv.low) and _is_num(iv.high):
        sub = f"{f(iv.low)} \u2013 {f(iv.high)}"
    cls = "primary" if primary else ""
    if not _is_num(iv.value):
        cls += " na"
    return Cell(f(iv.value), _sort_value(iv.value), sub=sub, cls=cls.strip())


def _strata(result: BenchmarkResult, dataset: str) -> list[Leaderboard]:
    boards = [lb for lb in result.leaderboards if lb.dataset == dataset]

    def key(lb: Leaderboard) -> tuple[int, list[Any]]:
        return (_STRATUM_ORDER.get(lb.stratum, 3), _natural_key(lb.stratum))

    return sorted(boards, key=key)


def _stratum_label(stratum: str) -> str:
    if stratum.startswith("site:"):
        return "site " + stratum[5:]
    return {"all": "all studies", "normal": "normal studies", "abnormal": "abnormal studies"}.get(stratum, stratum)


class _Builder:
    """Turns a ``BenchmarkResult`` into the template's view model."""

    def __init__(self, result: BenchmarkResult, top_k: int = TOP_K) -> None:
        self.r = result
        self.top_k = top_k
        self.metric_info = {m.name: m for m in result.metrics}
        self.baselines = set(getattr(result, "baselines", []) or [])
        self.order = self._global_order()
        self.color = {s: charts.system_color(i) for i, s in enumerate(self.order)}
        self.texts: list[str] = []
        self._text_index: dict[str, int] = {}
        self.has_text = result.has_text
        self.slugs: set[str] = set()

    # -- helpers ---------------------------------------------------------------------------
    def _global_order(self) -> list[str]:
        ranks: dict[str, list[int]] = defaultdict(list)
        for lb in self.r.leaderboards:
            if lb.stratum == "all":
                for row in lb.rows:
                    ranks[row.system].append(row.rank)
        systems = list(dict.fromkeys([*self.r.systems, *ranks]))
        pos = {s: i for i, s in enumerate(systems)}
        return sorted(systems, key=lambda s: (sum(ranks[s]) / len(ranks[s]) if ranks[s] else 1e9, pos[s]))

    def label(self, metric: str) -> str:
        info = self.metric_info.get(metric)
        return info.label if info and info.label else metric

    def _text(self, s: str) -> int | None:
        """``s``'s index in the page's string table; None on a page without report text."""
        if not self.has_text:
            return None
        idx = self._text_index.get(s)
        if idx is None:
            idx = self._text_index[s] = len(self.texts)
            self.texts.append(s)
        return idx

    def dataset_order(self, dataset: str) -> list[str]:
        """Systems of ``dataset`` by rank on its 'all' leaderboard, then the global order."""
        try:
            rows = self.r.leaderboard(dataset, "all").rows
        except KeyError:
            rows = []
        ranked = [row.system for row in sorted(rows, key=lambda x: x.rank)]
        present = {e.system for e in self.r.entities if e.dataset == dataset}
        present |= {g.system for g in self.r.groups if g.dataset == dataset}
        rest = [s for s in self.order if s not in ranked and s in present]
        return ranked + rest

    # -- sections --------------------------------------------------------------------------
    def leaderboard_table(self, lb: Leaderboard) -> Table:
        metric_names = [m for m in [self.r.primary_metric, *self.metric_info] if any(m in row.metrics for row in lb.rows)]
        metric_names = list(dict.fromkeys(metric_names))
        for row in lb.rows:  # metrics on the board that the result does not describe
            for m in row.metrics:
                if m not in metric_names:
                    metric_names.append(m)

        def shown_as_metric(attr: str) -> bool:  # the same numbers are already a metric column
            return any(
                all(getattr(row, attr) is not None and row.metrics.get(m) == getattr(row, attr) for row in lb.rows)
                for m in metric_names
            )

        has_ef = any(row.error_free is not None for row in lb.rows) and not shown_as_metric("error_free")
        has_cef = any(row.critical_error_free is not None for row in lb.rows) and not shown_as_metric("critical_error_free")
        has_failed = any(row.n_failed for row in lb.rows)
        cols = [
            Column("Rank", first="asc", title="rank by " + self.label(lb.rank_by) + "; below: 95% rank interval"),
            Column("System", kind="text", first="asc"),
        ]
        for m in metric_names:
            info = self.metric_info.get(m)  # direction arrow; signature in the tooltip
            hib = info.higher_is_better if info else True
            arrow = "\u2191" if hib else "\u2193"
            tip = (info.signature if info else m) + ("  (higher is better)" if hib else "  (lower is better)")
            cls = "primary" if m == lb.rank_by else ""
            cols.append(Column(f"{self.label(m)} {arrow}", first="desc" if hib else "asc", title=tip, cls=cls))
        if has_ef:
            cols.append(Column("Error-free \u2191", title="share of studies with no clinically significant error"))
        if has_cef:
            cols.append(Column("No critical error \u2191", title="share of studies with no error on a critical entity"))
        cols.append(Column("Pairs", first="desc"))
        if has_failed:
            cols.append(Column("Failed", first="desc", title="pairs the system failed to produce or the judge failed to score"))
        rows, attrs = [], []
        for row in sorted(lb.rows, key=lambda x: x.rank):
            span = f"{row.rank_low}\u2013{row.rank_high}" if row.rank_low != row.rank_high else ""
            sys_cell = Cell(row.system, row.system.lower(), cls="sys")
            if row.system in self.baselines or getattr(row, "baseline", False):
                sys_cell.sub = "baseline"
            cells = [Cell(str(row.rank), str(row.rank), sub=span, cls="rank"), sys_cell]
            for m in metric_names:
                cells.append(_interval_cell(row.metrics.get(m), primary=m == lb.rank_by))
            if has_ef:
                cells.append(_interval_cell(row.error_free, as_pct=True))
            if has_cef:
                cells.append(_interval_cell(row.critical_error_free, as_pct=True))
            cells.append(Cell(str(row.n_pairs), str(row.n_pairs)))
            if has_failed:
                cells.append(Cell(str(row.n_failed), str(row.n_failed), cls="warn" if row.n_failed else ""))
            rows.append(cells)
            attrs.append({"data-system": row.system})
        return Table(cols, rows, attrs, css_class="leaderboard")

    def overview(self) -> Table | None:
        pm = self.r.primary_metric
        boards = {d: lb for d in self.r.datasets for lb in self.r.leaderboards if lb.dataset == d and lb.stratum == "all"}
        if not boards:
            return None
        info = self.metric_info.get(pm)
        hib = info.higher_is_better if info else True
        cols = [
            Column("System", kind="text", first="asc"),
            Column("Mean rank", first="asc", title="mean of the ranks on the datasets where the system is ranked"),
        ]
        for d in boards:
            cols.append(
                Column(f"{d}", first="desc" if hib else "asc", title=f"{self.label(pm)} on {d} (all studies); rank below")
            )
        rows, attrs = [], []
        for s in self.order:
            ranks, cells = [], []
            for lb in boards.values():
                row = next((x for x in lb.rows if x.system == s), None)
                if row is None:
                    cells.append(Cell("\u2013", "", cls="na"))
                    continue
                ranks.append(row.rank)
                iv = row.metrics.get(pm)
                c = _interval_cell(iv)
                c.sub = f"#{row.rank}"
                cells.append(c)
            if not ranks:
                continue
            mean_rank = sum(ranks) / len(ranks)
            rows.append(
                [
                    Cell(s, s.lower(), cls="sys", sub="baseline" if s in self.baselines else ""),
                    Cell(f"{mean_rank:.1f}", repr(mean_rank)),
                    *cells,
                ]
            )
            attrs.append({"data-system": s})
        return Table(cols, rows, attrs, css_class="overview")

    def _groups(self, dataset: str) -> tuple[list[str], dict[str, str], dict[tuple[str, str], Any]]:
        order: dict[str, str] = {}
        by: dict[tuple[str, str], Any] = {}
        for g in self.r.groups:
            if g.dataset != dataset:
                continue
            order.setdefault(g.group, g.name or g.group)
            by[(g.system, g.group)] = g
        return list(order), order, by

    def _macro(self, dataset: str) -> dict[str, dict[str, float | None]]:
        """Per system: macro presence F1 and pooled attribute accuracies, exactly as computed by
        :func:`cxreval.scores.spec_scores` (the numbers ``cxreval evaluate`` prints), never
        re-aggregated here."""
        keys = {
            "f1": "presence_macro_f1",
            "location_acc": "location_accuracy",
            "severity_acc": "severity_accuracy",
            "comparison_acc": "comparison_accuracy",
        }
        return {s.system: {k: s.values.get(v) for k, v in keys.items()} for s in self.r.summaries if s.dataset == dataset}

    def spider(self, dataset: str, ds_slug: str) -> dict[str, Any] | None:
        gids, gnames, by = self._groups(dataset)
        if not gids:
            return None
        systems = [s for s in self.dataset_order(dataset) if any((s, g) in by for g in gids)]
        visible = set(systems[: self.top_k])
        supports = [max((by[(s, g)].support for s in systems if (s, g) in by), default=0) for g in gids]
        top = max(supports, default=0)
        background = [math.log1p(x) / math.log1p(top) if top > 0 else None for x in supports]
        axes = [gnames[g] for g in gids]
        macro = self._macro(dataset)

        def chart(attr: str, title: str) -> Markup:
            series = [
                charts.RadarSeries(
                    name=s,
                    color=self.color.get(s, "#444"),
                    values=[_clean(getattr(by[(s, g)], attr)) if (s, g) in by else None for g in gids],
                    visible=s in visible,
                    dashed=s in self.baselines,
                )
                for s in systems
            ]
            return charts.radar_svg(
                charts.RadarChart(
                    axes=axes,
                    series=series,
                    title=title,
                    background=background,
                    background_label="grey area: log(1 + reference positives) of the group, scaled to the largest",
                )
            )

        legend = []
        for s in systems:
            m = macro.get(s, {})
            legend.append(
                {
                    "system": s,
                    "color": self.color.get(s, "#444"),
                    "checked": s in visible,
                    "baseline": s in self.baselines,
                    "f1": fmt(m.get("f1")),
                    "attr": " / ".join(fmt(m.get(k), 2) for k, _ in _ATTRS),
                }
            )
        attr_charts = [
            {"key": key, "label": label, "svg": chart(key, f"{label} accuracy by group on {dataset}")} for key, label in _ATTRS
        ]
        # per-group table: F1, with support
        cols = [
            Column("System", kind="text", first="asc"),
            Column("Macro F1", title="mean presence F1 over the entities where it is defined"),
        ]
        for g, sup in zip(gids, supports, strict=True):
            cols.append(Column(gnames[g], title=f"{gnames[g]}: presence F1 ({sup} reference positives)"))
        rows, attrs = [], []
        for s in systems:
            cells = [
                Cell(s, s.lower(), cls="sys"),
                Cell(fmt(macro.get(s, {}).get("f1")), _sort_value(macro.get(s, {}).get("f1"))),
            ]
            for g in gids:
                gr = by.get((s, g))
                v = gr.f1 if gr else None
                bg = charts.sequential_color(v) if _is_num(v) else ""
                tip = ""
                if gr is not None:
                    tip = (
                        f"{s} | {gnames[g]}: F1 {fmt(gr.f1)}, P {fmt(gr.precision)}, R {fmt(gr.recall)}; "
                        f"location {fmt(gr.location_acc)}, severity {fmt(gr.severity_acc)}, comparison {fmt(gr.comparison_acc)}"
                    )
                cells.append(
                    Cell(
                        fmt(v, 2),
                        _sort_value(v),
                        cls="heat" + ("" if _is_num(v) else " na"),
                        bg=bg,
                        fg=charts.text_color(bg) if bg else "",
                        title=tip,
                    )
                )
            rows.append(cells)
            attrs.append({"data-system": s})
        return {
            "presence": chart("f1", f"Presence F1 by group on {dataset}"),
            "attrs": attr_charts,
            "legend": legend,
            "top_k": min(self.top_k, len(systems)),
            "n_systems": len(systems),
            "group_table": Table(cols, rows, attrs, css_class="groups"),
            "id": ds_slug,
        }

    def entity_matrix(self, dataset: str, ds_index: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        ents = [e for e in self.r.entities if e.dataset == dataset]
        if not ents:
            return None, {}
        systems = [s for s in self.dataset_order(dataset) if any(e.system == s for e in ents)]
        sys_idx = {s: i for i, s in enumerate(systems)}
        gids, gnames, _ = self._groups(dataset)
        info: dict[str, dict[str, Any]] = {}
        cell: dict[tuple[str, str], EntityResult] = {}
        for e in ents:
            d = info.setdefault(e.entity, {"name": e.name or e.entity, "group": e.group, "support": 0, "critical": False})
            d["support"] = max(d["support"], e.tp + e.fn)
            d["critical"] = d["critical"] or bool(getattr(e, "critical", False))
            cell[(e.system, e.entity)] = e
            if e.group not in gnames:
                gnames[e.group] = e.group
                gids.append(e.group)
        gpos = {g: i for i, g in enumerate(gids)}
        entity_ids = sorted(info, key=lambda k: (gpos.get(info[k]["group"], 99), -info[k]["support"], info[k]["name"].lower()))
        ent_idx = {k: i for i, k in enumerate(entity_ids)}

        blocks = []
        for g in gids:
            members = [k for k in entity_ids if info[k]["group"] == g]
            if not members:
                continue
            rows = []
            for k in members:
                cells: list[dict[str, str] | None] = []
                for s in systems:
                    got = cell.get((s, k))
                    if got is None:
                        cells.append(None)
                    elif _is_num(got.f1):
                        cells.append({"text": f"{got.f1:.2f}".lstrip("0") or "0", "q": str(min(9, int(got.f1 * 10)))})
                    else:
                        cells.append({"text": "\u00b7", "q": "n"})
                rows.append(
                    {
                        "id": k,
                        "i": ent_idx[k],
                        "name": info[k]["name"],
                        "support": info[k]["support"],
                        "critical": info[k]["critical"],
                        "cells": cells,
                    }
                )
            blocks.append({"group": gnames.get(g, g), "rows": rows})

        # drill-down data: texts are shared through a string table
        data_cells: dict[str, list[Any]] = {}
        for (s, k), e in cell.items():
            data_cells[f"{sys_idx[s]}_{ent_idx[k]}"] = [
                e.tp,
                e.fp,
                e.fn,
                _clean(e.precision),
                _clean(e.recall),
                _clean(e.f1),
                _clean(e.location_acc),
                _clean(e.severity_acc),
                _clean(e.comparison_acc),
                getattr(e, "location_errors", 0),
                getattr(e, "severity_errors", 0),
                getattr(e, "comparison_errors", 0),
                [
                    [x.pair_id, x.kind, self._text(x.reference), self._text(x.candidate), x.reference_rules, x.candidate_rules]
                    for x in e.examples
                ],
            ]
        data = {
            "name": dataset,
            "systems": systems,
            "entities": [[k, info[k]["name"], gnames.get(info[k]["group"], info[k]["group"])] for k in entity_ids],
            "cells": data_cells,
        }
        max_support = max((info[k]["support"] for k in entity_ids), default=0)
        thresholds = [t for t in (1, 5, 10, 25, 50, 100) if t <= max_support]
        view = {"systems": systems, "blocks": blocks, "ds": ds_index, "n_entities": len(entity_ids), "thresholds": thresholds}
        return view, data

    def sites(self, dataset: str) -> list[dict[str, Any]]:
        cells = [c for c in self.r.sites if c.dataset == dataset]
        if not cells:
            return []
        metrics = list(dict.fromkeys([self.r.primary_metric, *self.metric_info]))
        metrics = [m for m in metrics if any(c.metric == m for c in cells)] + sorted({c.metric for c in cells} - set(metrics))
        order = self.dataset_order(dataset)
        out = []
        for m in metrics:
            mc = [c for c in cells if c.metric == m]
            site_n: dict[str, int] = defaultdict(int)
            for c in mc:
                site_n[c.site] = max(site_n[c.site], getattr(c, "n_pairs", 0) or 0)
            sites = sorted(site_n, key=_natural_key)
            systems = [s for s in order if any(c.system == s for c in mc)]
            systems += sorted({c.system for c in mc} - set(systems))
            by = {(c.system, c.site): c for c in mc}
            n_sys = max(len(systems), 2)
            values: list[list[float | None]] = []
            labels: list[list[str]] = []
            tips: list[list[str]] = []
            for s in systems:
                vrow: list[float | None] = []
                lrow: list[str] = []
                trow: list[str] = []
                for site in sites:
                    at = by.get((s, site))
                    if at is None or at.rank is None:
                        vrow.append(None)
                        lrow.append("" if at is None else "\u00b7")
                    else:
                        vrow.append(0.1 + 0.9 * (1 - (at.rank - 1) / (n_sys - 1)))
                        lrow.append(str(at.rank))
                    trow.append(
                        f"{s} @ {site}: #{at.rank if at and at.rank is not None else 'n/a'}, {fmt(at.value) if at else 'n/a'}"
                    )
                values.append(vrow)
                labels.append(lrow)
                tips.append(trow)
            col_labels = [f"{site} (n={site_n[site]})" if site_n[site] else site for site in sites]
            svg = charts.heatmap_svg(
                charts.Heatmap(
                    rows=systems,
                    cols=col_labels,
                    values=values,
                    labels=labels,
                    tooltips=tips,
                    color=charts.sequential_color,
                    scale_color=lambda t: charts.sequential_color(0.1 + 0.9 * t),
                    title=f"Rank of each system at each site by {self.label(m)} on {dataset}",
                    scale_low=f"rank {len(systems)} (worst)",
                    scale_high="rank 1 (best)",
                    cell_w=30 if len(sites) > 12 else 40,
                    cell_h=20 if len(systems) > 12 else 24,
                )
            )
            out.append({"metric": m, "label": self.label(m), "svg": svg, "n_sites": len(sites)})
        return out

    def correlations(self, dataset: str) -> list[dict[str, Any]]:
        out = []
        for c in self.r.correlations:
            if c.dataset != dataset or not c.metrics:
                continue
            names = [self.label(m) for m in c.metrics]
            values = [[_clean(v) for v in row] for row in c.matrix]
            svg = charts.heatmap_svg(
                charts.Heatmap(
                    rows=names,
                    cols=names,
                    values=values,
                    color=charts.diverging_color,
                    scale_color=lambda t: charts.diverging_color(2 * t - 1),
                    title=f"{c.method.title()} correlation between metrics on {dataset}",
                    scale_low="-1",
                    scale_high="+1",
                    cell_w=52,
                    cell_h=30,
                    col_label_h=110,
                    row_label_w=190,
                )
            )
            n = getattr(c, "n", 0)
            out.append({"method": c.method, "svg": svg, "n": n})
        return out

    def build(self) -> dict[str, Any]:
        r = self.r
        datasets = list(dict.fromkeys([*r.datasets, *(lb.dataset for lb in r.leaderboards)]))
        panels = []
        drill: list[dict[str, Any]] = []
        for i, d in enumerate(datasets):
            slug = _slug(d, self.slugs)
            boards = []
            for lb in _strata(r, d):
                boards.append(
                    {
                        "id": _slug(f"{d}-{lb.stratum}", self.slugs),
                        "stratum": lb.stratum,
                        "label": _stratum_label(lb.stratum),
                        "is_site": lb.stratum.startswith("site:"),
                        "n_pairs": getattr(lb, "n_pairs", 0),
                        "rank_by": self.label(lb.rank_by),
                        "table": self.leaderboard_table(lb),
                    }
                )
            matrix, data = self.entity_matrix(d, i)
            drill.append(data)
            panels.append(
                {
                    "name": d,
                    "id": slug,
                    "boards": boards,
                    "spider": self.spider(d, slug),
                    "matrix": matrix,
                    "sites": self.sites(d),
                    "correlations": self.correlations(d),
                }
            )
        metrics = [
            {
                "name": m.name,
                "label": m.label or m.name,
                "direction": "higher is better" if m.higher_is_better else "lower is better",
                "signature": m.signature,
                "level": getattr(m, "level", ""),
                "description": getattr(m, "description", ""),
                "primary": m.name == r.primary_metric,
            }
            for m in r.metrics
        ]
        data = {"texts": self.texts, "datasets": drill, "has_text": self.has_text}
        qcss = []
        for q in range(10):
            bg = charts.sequential_color((q + 0.5) / 10)
            qcss.append({"q": str(q), "bg": bg, "fg": charts.text_color(bg)})
        qcss.append({"q": "n", "bg": charts.NA_FILL, "fg": "#777"})
        timings = getattr(r, "timings", {}) or {}
        return {
            "r": r,
            "primary_label": self.label(r.primary_metric),
            "overview": self.overview(),
            "panels": panels,
            "metrics": metrics,
            "data_json": _json_for_script(data),
            "n_systems": len(self.order),
            "qcss": qcss,
            "timings": [(k, f"{v:.1f}s") for k, v in timings.items()],
        }


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render_html(result: BenchmarkResult, top_k: int = TOP_K, *, include_text: bool = True) -> str:
    """Render ``result`` as a self-contained HTML page (a string); ``top_k`` systems are drawn
    on the spider charts by default (the others can be switched on in the legend).
    ``include_text=False``: no report text on the page (example pairs by id, kind and rule ids
    only), to share it."""
    view = _Builder(result if include_text else result.without_text(), top_k=top_k).build()
    return _environment().get_template("report.html.j2").render(**view)


def write_html(result: BenchmarkResult, path: str | Path, top_k: int = TOP_K, *, include_text: bool = True) -> Path:
    """Write the page for ``result`` to ``path`` (parent folders created); returns the path.
    ``include_text``: as for :func:`render_html`."""
    from cxreval.io.writers import atomic_write_text

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render_html(result, top_k=top_k, include_text=include_text))
    return out
