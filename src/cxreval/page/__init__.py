"""The benchmark report: one self-contained HTML page from a ``BenchmarkResult``.

``write_html(result, "report.html")`` writes it; ``render_html(result)`` returns the text.
The page opens offline (inline CSS, JavaScript and SVG; no fonts, images or CDNs).
"""

from cxreval.page.html import render_html, write_html

__all__ = ["render_html", "write_html"]
