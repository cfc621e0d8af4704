"""Server-side SVG charts for the HTML report: spider (radar) charts, heatmaps, colour scales.

Every function returns SVG markup as a ``markupsafe.Markup`` string; all text that comes from
the data (system, group, metric and site names) is escaped here. No scripts, fonts or images:
the charts are plain inline SVG styled by the page's CSS. Undefined values (``None``) are left
out (no point is drawn), never plotted as zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

# Categorical colours for systems: Tableau 10 first (the top systems get the most distinct
# colours), then darker / lighter companions; beyond these, golden-angle hues.
_PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#ff9da7",
    "#bab0ac",
    "#1f4e79",
    "#a0522d",
    "#8b1a1a",
    "#2e6b30",
    "#6a3d9a",
    "#2a8c8c",
    "#b8860b",
    "#5c4033",
    "#d6336c",
    "#6c757d",
    "#0b7285",
    "#e8590c",
    "#5f3dc4",
    "#2b8a3e",
]

# Sequential blues (light -> dark) and a diverging red-white-blue scale.
_BLUES = [(247, 251, 255), (198, 219, 239), (107, 174, 214), (33, 113, 181), (8, 48, 107)]
_DIVERGING = [(178, 24, 43), (239, 138, 98), (247, 247, 247), (103, 169, 207), (33, 102, 172)]
NA_FILL = "#eeeeee"


def system_color(index: int) -> str:
    """Colour of the ``index``-th system (stable, distinct for the first 24)."""
    if index < len(_PALETTE):
        return _PALETTE[index]
    hue = (index * 137.508) % 360
    return f"hsl({hue:.0f},55%,45%)"


def _interp(stops: Sequence[tuple[int, int, int]], t: float) -> tuple[int, int, int]:
    t = min(1.0, max(0.0, t))
    pos = t * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    f = pos - i
    a, b = stops[i], stops[i + 1]
    return (
        round(a[0] + (b[0] - a[0]) * f),
        round(a[1] + (b[1] - a[1]) * f),
        round(a[2] + (b[2] - a[2]) * f),
    )


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def sequential_color(t: float | None) -> str:
    """Blue scale for ``t`` in [0, 1] (darker = larger); grey for undefined."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return NA_FILL
    return _hex(_interp(_BLUES, t))


def diverging_color(v: float | None) -> str:
    """Red (-1) - white (0) - blue (+1) scale; grey for undefined."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return NA_FILL
    return _hex(_interp(_DIVERGING, (v + 1) / 2))


def text_color(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (a ``#rrggbb`` colour)."""
    if not fill.startswith("#") or len(fill) != 7:
        return "#111"
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    luminance = 0.299 * r + 0.587 * g + 0.114 * b
    return "#111" if luminance > 150 else "#fff"


def fmt_value(v: float | None, digits: int = 2) -> str:
    """A short number for a chart label; ``n/a`` for undefined."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def _wrap(label: str, width: int = 16, max_lines: int = 3) -> list[str]:
    words, lines, line = label.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [" ".join(lines[max_lines - 1 :])]
    return lines or [""]


@dataclass
class RadarSeries:
    """One polygon of a radar chart: a system's values over the axes (None = no point)."""

    name: str
    color: str
    values: list[float | None]
    visible: bool = True
    dashed: bool = False


@dataclass
class RadarChart:
    """A spider chart over ``axes`` with values in [0, 1]."""

    axes: list[str]
    series: list[RadarSeries]
    title: str = ""
    background: list[float | None] | None = None  # in [0, 1], drawn as a grey area
    background_label: str = ""
    size: int = 500
    radius: int = 150
    css_class: str = "radar"
    extra_attrs: dict[str, str] = field(default_factory=dict)


def radar_svg(chart: RadarChart) -> Markup:
    """Render a radar chart: rings at 0.2 steps, one path per series, tooltips on points."""
    n = len(chart.axes)
    w = h = chart.size
    cx, cy, r = w / 2, h / 2 + 8, chart.radius
    out: list[str] = []
    attrs = "".join(f' {escape(k)}="{escape(v)}"' for k, v in chart.extra_attrs.items())
    out.append(
        f'<svg class="{escape(chart.css_class)}" '
        f'viewBox="0 0 {w} {h + 16}" width="{w}" height="{h + 16}" role="img" '
        f'aria-label="{escape(chart.title)}"{attrs}>'
    )
    if chart.title:
        out.append(f"<title>{escape(chart.title)}</title>")
    if n < 3:
        out.append(
            f'<text x="{cx:.0f}" y="{cy:.0f}" text-anchor="middle" class="muted">too few groups for a spider chart</text></svg>'
        )
        return Markup("".join(out))

    def point(i: int, v: float) -> tuple[float, float]:
        a = -math.pi / 2 + 2 * math.pi * i / n
        return cx + r * v * math.cos(a), cy + r * v * math.sin(a)

    out += _radar_grid(point, n, cx, cy)
    # background (e.g. log frequency of the groups)
    if chart.background and any(b is not None for b in chart.background):
        pts = " ".join("{:.1f},{:.1f}".format(*point(i, b or 0.0)) for i, b in enumerate(chart.background))
        out.append(f'<polygon class="bg-area" points="{pts}"><title>{escape(chart.background_label)}</title></polygon>')
    out += [_radar_label(label, point, i, n) for i, label in enumerate(chart.axes)]
    for series in chart.series:
        out += _radar_series(series, point, n)
    out.append("</svg>")
    return Markup("".join(out))


_Point = Callable[[int, float], tuple[float, float]]


def _radar_grid(point: _Point, n: int, cx: float, cy: float) -> list[str]:
    """The rings at 0.2 steps, the axes and the ring values."""
    out = []
    for k in range(1, 6):
        ring = " ".join("{:.1f},{:.1f}".format(*point(i, k / 5)) for i in range(n))
        out.append(f'<polygon class="grid" points="{ring}"/>')
    for i in range(n):
        x, y = point(i, 1.0)
        out.append(f'<line class="axis" x1="{cx:.1f}" y1="{cy:.1f}" x2="{x:.1f}" y2="{y:.1f}"/>')
    for k in range(1, 6):
        x, y = point(0, k / 5)
        out.append(f'<text class="tick" x="{x + 3:.1f}" y="{y + 3:.1f}">{k / 5:.1f}</text>')
    return out


def _radar_label(label: str, point: _Point, i: int, n: int) -> str:
    """Axis ``i``'s label outside the outer ring, anchored and wrapped by its angle."""
    a = -math.pi / 2 + 2 * math.pi * i / n
    x, y = point(i, 1.0)
    x += 12 * math.cos(a)
    y += 12 * math.sin(a)
    c = math.cos(a)
    anchor = "middle" if abs(c) < 0.15 else ("start" if c > 0 else "end")
    lines = _wrap(label, 18)
    sin = math.sin(a)
    y0 = y - (len(lines) - 1) * 12 if sin < -0.3 else (y + 10 if sin > 0.3 else y - (len(lines) - 1) * 6 + 4)
    tspans = "".join(f'<tspan x="{x:.1f}" y="{y0 + j * 12:.1f}">{escape(t)}</tspan>' for j, t in enumerate(lines))
    return f'<text class="axis-label" text-anchor="{anchor}"><title>{escape(label)}</title>{tspans}</text>'


def _radar_series(series: RadarSeries, point: _Point, n: int) -> list[str]:
    """One series: a polygon (a path of the known edges where values are missing) and its points,
    its colour set once on the group and inherited by the shapes."""
    style = "" if series.visible else ' style="display:none"'
    color = escape(series.color)
    out = [f'<g class="series" data-system="{escape(series.name)}" stroke="{color}" fill="{color}"{style}>']
    vals = series.values
    dash = ' stroke-dasharray="5 3"' if series.dashed else ""
    known = {i: float(v) for i, v in enumerate(vals) if v is not None}
    if len(known) == len(vals):
        pts = " ".join("{:.1f},{:.1f}".format(*point(i, v)) for i, v in known.items())
        out.append(f'<polygon class="poly" points="{pts}"{dash}/>')
    else:
        segs = []
        for i in range(n):
            j = (i + 1) % n
            if i in known and j in known:
                (x1, y1), (x2, y2) = point(i, known[i]), point(j, known[j])
                segs.append(f"M{x1:.1f},{y1:.1f}L{x2:.1f},{y2:.1f}")
        if segs:
            out.append(f'<path class="line" d="{"".join(segs)}"{dash}/>')
    name = escape(series.name)
    for i, v in known.items():
        x, y = point(i, v)
        out.append(f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{name}: {fmt_value(v, 3)}</title></circle>')
    out.append("</g>")
    return out


@dataclass
class Heatmap:
    """A labelled matrix drawn as coloured cells with value labels and a colour bar."""

    rows: list[str]
    cols: list[str]
    values: list[list[float | None]]
    color: Callable[[float | None], str]
    labels: list[list[str]] | None = None  # text in each cell (defaults to fmt_value)
    tooltips: list[list[str]] | None = None
    title: str = ""
    scale_low: str = ""
    scale_high: str = ""
    scale_stops: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    scale_color: Callable[[float], str] | None = None  # colour of a scale position in [0, 1]
    cell_w: int = 44
    cell_h: int = 24
    row_label_w: int = 170
    col_label_h: int = 90
    css_class: str = "heatmap"


def heatmap_svg(hm: Heatmap) -> Markup:
    """Render a heatmap with rotated column labels, value labels and a horizontal colour bar."""
    nr, nc = len(hm.rows), len(hm.cols)
    grid_w, grid_h = nc * hm.cell_w, nr * hm.cell_h
    legend_h = 46
    w = hm.row_label_w + grid_w + 12 + (80 if nc else 0)  # room for the last rotated label
    h = hm.col_label_h + grid_h + legend_h
    out = [
        f'<svg class="{escape(hm.css_class)}" '
        f'viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{escape(hm.title)}">'
    ]
    if hm.title:
        out.append(f"<title>{escape(hm.title)}</title>")
    x0, y0 = hm.row_label_w, hm.col_label_h
    for j, c in enumerate(hm.cols):
        x = x0 + j * hm.cell_w + hm.cell_w / 2
        label = c if len(c) <= 22 else c[:21] + "\u2026"
        out.append(
            f'<text class="col-label" transform="translate({x + 4:.1f},{y0 - 6}) rotate(-55)">'
            f"<title>{escape(c)}</title>{escape(label)}</text>"
        )
    for i, rname in enumerate(hm.rows):
        y = y0 + i * hm.cell_h + hm.cell_h / 2 + 4
        label = rname if len(rname) <= 26 else rname[:25] + "\u2026"
        out.append(
            f'<text class="row-label" x="{x0 - 6}" y="{y:.1f}" text-anchor="end">'
            f"<title>{escape(rname)}</title>{escape(label)}</text>"
        )
        for j in range(nc):
            v = hm.values[i][j]
            fill = hm.color(v)
            text = hm.labels[i][j] if hm.labels else fmt_value(v)
            tip = hm.tooltips[i][j] if hm.tooltips else f"{rname} | {hm.cols[j]}: {text}"
            x = x0 + j * hm.cell_w
            yy = y0 + i * hm.cell_h
            out.append(
                f'<g class="cell"><rect x="{x}" y="{yy}" width="{hm.cell_w - 1}" height="{hm.cell_h - 1}" '
                f'fill="{fill}"><title>{escape(tip)}</title></rect>'
                f'<text x="{x + (hm.cell_w - 1) / 2:.1f}" y="{yy + hm.cell_h / 2 + 4:.1f}" '
                f'text-anchor="middle" fill="{text_color(fill)}">{escape(text)}</text></g>'
            )
    # colour bar
    scale = hm.scale_color or (lambda t: hm.color(t))
    bar_w = min(260, max(140, grid_w))
    by = y0 + grid_h + 14
    steps = 26
    for k in range(steps):
        t = k / (steps - 1)
        out.append(
            f'<rect x="{x0 + k * bar_w / steps:.1f}" y="{by}" width="{bar_w / steps + 0.5:.1f}" height="10" fill="{scale(t)}"/>'
        )
    out.append(
        f'<text class="tick" x="{x0}" y="{by + 24}">{escape(hm.scale_low)}</text>'
        f'<text class="tick" x="{x0 + bar_w}" y="{by + 24}" text-anchor="end">{escape(hm.scale_high)}</text>'
    )
    out.append("</svg>")
    return Markup("".join(out))
