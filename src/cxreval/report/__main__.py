"""``python -m cxreval.report result.json [report.html]``: render a benchmark result as HTML."""

from __future__ import annotations

import sys
from pathlib import Path

from cxreval.bench.models import BenchmarkResult
from cxreval.report.html import write_html


def main(argv: list[str] | None = None) -> int:
    """Read a ``result.json`` and write the page next to it (or to the given path)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help") or len(args) > 2:
        print(__doc__.strip())
        return 0 if args and args[0] in ("-h", "--help") else 2
    src = Path(args[0])
    result = BenchmarkResult.model_validate_json(src.read_text(encoding="utf-8"))
    out = write_html(result, Path(args[1]) if len(args) > 1 else src.with_name("report.html"))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
