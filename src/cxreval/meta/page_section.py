"""The discrimination / robustness section of an HTML page: a table and an inline SVG bar chart.

Self-contained: no external resources. When :mod:`cxreval.page` (the benchmark pages) is
installed alongside, its stylesheet and system colours are reused so the section looks like the
rest of the page; otherwise a small stylesheet of our own is inlined.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from jinja2 import Environment
from markupsafe import Markup

from cxreval.meta.perturb import ALL_TYPES
from cxreval.meta.robustness import RobustnessReport, TypeRow

_FALLBACK_CSS = """<style>
body{font-family:system-ui,sans-serif;color:#1d2330;background:#f5f7fa;margin:0;padding:16px}
section.meta{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:12px 16px;margin:12px 0}
table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #dde2ea;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}td.bad{color:#b45309;font-weight:600}.muted{color:#5b6475}
</style>"""
_PALETTE = ["#2b5d9b", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777"]

_SECTION = """<section class="meta" id="meta-robustness">
<h2>Discrimination and robustness ({{ n_pairs }} perturbed pairs)</h2>
<p class="muted">Discrimination: share of clinically significant variants a metric penalises (in brackets:
penalised on the right entity, entity-level engines only). Robustness: share of clinically insignificant
variants it leaves unpenalised. "Penalised" = scored worse than the (reference, reference) pair.
95 % Clopper-Pearson intervals in the tooltips. Suite: <code>{{ suite }}</code></p>
{% if variants|length > 1 %}<p class="muted">Target variants side by side: <code>mesh</code> edits the findings the
human coders coded (their sentences found by a plain word search), <code>engine</code> the findings the rule
engine reads; insignificant variants are shared, so their figures agree.</p>{% endif %}
<table>
<thead><tr><th>perturbation</th><th>significant</th><th>n{% if variants|length > 1 %} ({{ variants|join("/") }}){% endif %}</th>{% for m in columns %}<th>{{ m }}</th>{% endfor %}</tr></thead>
<tbody>
{% for line in lines %}<tr><td>{{ line.type }}</td><td>{{ line.sig }}</td><td>{{ line.n }}</td>
{% for c in line.cells %}<td{% if c.bad %} class="bad"{% endif %} title="{{ c.title }}">{{ c.text }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
<figure>{{ svg }}<figcaption class="muted">Per perturbation type: discrimination (significant types) or
robustness (insignificant types) per metric.</figcaption></figure>
<details><summary>Signatures</summary><ul>{% for m, s in signatures.items() %}<li>{{ m }}: <code>{{ s }}</code></li>{% endfor %}</ul></details>
</section>"""


def _style() -> str:
    try:
        from cxreval.page.html import TEMPLATES

        path = Path(TEMPLATES) / "_style.html.j2"
        if path.is_file():
            return path.read_text(encoding="utf-8") + "<style>section.meta{background:#fff;padding:12px 16px;margin:12px}</style>"
    except Exception:  # noqa: BLE001 - the benchmark pages are optional here
        pass
    return _FALLBACK_CSS


def _color(i: int) -> str:
    try:
        from cxreval.page.charts import system_color

        return system_color(i)
    except Exception:  # noqa: BLE001
        return _PALETTE[i % len(_PALETTE)]


def _types(report: RobustnessReport) -> list[str]:
    return [t for t in ALL_TYPES if t in report.counts] + ["overall-significant", "overall-insignificant"]


def _series(report: RobustnessReport) -> list[tuple[str, str, str]]:
    """(label, metric, target variant) of each column / bar series: metrics x variants."""
    two = len(report.variants) > 1
    return [(f"{m} [{v}]" if two else m, m, v) for m in report.metrics for v in report.variants]


def bar_chart_svg(report: RobustnessReport, width: int = 900, height: int = 320) -> Markup:
    """Grouped bars: one group per perturbation type, one bar per metric and target variant (value 0..1)."""
    types = [t for t in _types(report) if any(r.perturbation == t for r in report.rows)]
    series = _series(report)
    metrics = [label for label, _, _ in series]
    per_line = 5  # legend entries per line
    legend_lines = (len(metrics) + per_line - 1) // per_line
    left, bottom, top, right = 40, 110, 16 + 14 * max(1, legend_lines), 10
    plot_w, plot_h = width - left - right, height - top - bottom
    group_w = plot_w / max(1, len(types))
    bar_w = max(2.0, (group_w - 6) / max(1, len(metrics)))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="discrimination and robustness per type">'
    ]
    for k in range(6):
        v = k / 5
        y = top + plot_h * (1 - v)
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#dde2ea"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{v:.1f}</text>'
        )
    y95 = top + plot_h * 0.05
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{y95:.1f}" y2="{y95:.1f}" stroke="#b45309" stroke-dasharray="4 3"/>'
    )
    for gi, t in enumerate(types):
        x0 = left + gi * group_w + 3
        for mi, (m, metric, variant) in enumerate(series):
            row = next((r for r in report.rows if r.metric == metric and r.perturbation == t and r.targets == variant), None)
            if row is None or row.main.rate is None:
                continue
            v = row.main.rate
            h = plot_h * v
            x = x0 + mi * bar_w
            tip = f"{m} / {t}: {v:.3f} [{row.main.low:.3f}, {row.main.high:.3f}] (n={row.main.n})"
            parts.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 1:.1f}" height="{h:.1f}" '
                f'fill="{_color(mi)}"><title>{escape(tip)}</title></rect>'
            )
        cx = x0 + group_w / 2
        parts.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 8}" font-size="10" text-anchor="end" '
            f'transform="rotate(-40 {cx:.1f} {top + plot_h + 8})">{escape(t)}</text>'
        )
    for mi, m in enumerate(metrics):
        x, y = left + (mi % per_line) * 170, 6 + 14 * (mi // per_line)
        parts.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{_color(mi)}"/>'
            f'<text x="{x + 14}" y="{y + 9}" font-size="11">{escape(m)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _cell(row: TypeRow | None, target: float) -> dict[str, object]:
    if row is None:
        return {"text": "", "title": "", "bad": False}
    main = row.main
    if main.rate is None:
        return {"text": "n/a", "title": "no scored pairs", "bad": False}
    text = f"{main.rate:.3f}"
    title = f"{main.k}/{main.n}, 95% CI [{main.low:.3f}, {main.high:.3f}]"
    if row.significant and row.right_entity is not None and row.right_entity.rate is not None:
        text += f" ({row.right_entity.rate:.3f})"
        title += f"; right entity {row.right_entity.k}/{row.right_entity.n}"
    if row.n_nan:
        title += f"; {row.n_nan} unscored"
    return {"text": text, "title": title, "bad": main.rate < target}


def render_section(report: RobustnessReport, *, target: float = 0.95) -> Markup:
    """The section (table + SVG) to embed in a page."""
    lines = []
    series = _series(report)
    for t in _types(report):
        rows = {(r.metric, r.targets): r for r in report.rows if r.perturbation == t}
        if not rows:
            continue
        first = next(iter(rows.values()))
        ns = "/".join(str(next((r.n for (_, v), r in rows.items() if v == x), 0)) for x in report.variants)
        lines.append(
            {
                "type": t,
                "sig": "yes" if first.significant else "no",
                "n": ns,
                "cells": [_cell(rows.get((m, v)), target) for _, m, v in series],
            }
        )
    env = Environment(autoescape=True)
    html = env.from_string(_SECTION).render(
        n_pairs=report.n_pairs,
        suite=report.suite,
        columns=[label for label, _, _ in series],
        variants=report.variants,
        lines=lines,
        svg=bar_chart_svg(report),
        signatures=report.signatures,
    )
    return Markup(html)


def render_page(report: RobustnessReport, *, title: str = "cxreval meta-evaluation") -> str:
    """A complete, self-contained HTML page holding the section."""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"{_style()}</head><body><main><h1>{escape(title)}</h1>{render_section(report)}</main></body></html>"
    )


def write_page(report: RobustnessReport, path: str | Path, *, title: str = "cxreval meta-evaluation") -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(report, title=title), encoding="utf-8")
    return out
