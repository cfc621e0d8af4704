"""Where benchmarks find the shared public data (never copied into the repository)."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path


def data_dir() -> Path:
    """``$CXREVAL_DATA_DIR`` or ``../shared/data`` beside the repository."""
    env = os.environ.get("CXREVAL_DATA_DIR")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not path.is_dir():
        sys.exit(f"shared data not found at {path}; set CXREVAL_DATA_DIR")
    return path


def iu_reports() -> list[dict[str, str]]:
    """The 3,851 IU X-ray reports (CC BY-NC-ND 4.0: read at run time, never committed)."""
    with (data_dir() / "iu-xray" / "indiana_reports.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def iu_text(row: dict[str, str]) -> str:
    """Findings and impression of one IU report, with section titles the engine recognises."""
    parts = []
    if row.get("findings", "").strip():
        parts.append("Findings: " + row["findings"].strip())
    if row.get("impression", "").strip():
        parts.append("Impression: " + row["impression"].strip())
    return " ".join(parts)


def write_random_pairs(path: Path, n: int, seed: int = 0, prefix: str = "p") -> None:
    """A pairs CSV (id, reference, candidate) of ``n`` IU X-ray reports paired at random."""
    import random

    texts = [t for t in (iu_text(r) for r in iu_reports()) if t.strip()]
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "reference", "candidate"])
        for i in range(n):
            w.writerow([f"{prefix}{i}", rng.choice(texts), rng.choice(texts)])
