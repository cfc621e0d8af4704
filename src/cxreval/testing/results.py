"""Comparing results folders: the files two runs wrote hold the same content (tests, benchmarks).

``judgements.jsonl.gz`` is a series of gzip members, one per chunk of pairs, so two runs that cut
the pairs into chunks differently write different bytes for the same rows: it is compared by
its decompressed text. ``judgements.parquet`` is compared by its table. Every other file by its bytes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

#: The files every evaluate results folder holds.
RESULT_FILES = ("judgements.jsonl.gz", "errors.csv", "scores.json")


def content(path: Path) -> Any:
    """What a results file holds, in a form two runs can be compared by."""
    if path.name.endswith(".gz"):
        return gzip.decompress(path.read_bytes())
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return path.read_bytes()


def differing(a: Path, b: Path, names: tuple[str, ...] = RESULT_FILES) -> list[str]:
    """The files of ``names`` whose content differs between folders ``a`` and ``b``."""
    return [n for n in names if content(a / n) != content(b / n)]


def judgement_lines(folder: Path) -> list[dict[str, Any]]:
    """The rows of a folder's ``judgements.jsonl.gz`` as JSON objects."""
    return [json.loads(line) for line in gzip.decompress((folder / "judgements.jsonl.gz").read_bytes()).splitlines()]
