"""Scale benchmark: 24 synthetic systems x 10,000 studies on the rule engine, end to end.

    python benchmarks/bench_scale.py [--studies 10000] [--systems 24] [--out bench-out/scale]

Writes synthetic references (with a site per study), 24 prediction files and a benchmark YAML
into ``OUT/inputs``, runs ``cxreval bench``'s code path (judging, metrics, bootstrap with 1,000
resamples, strata, sites, correlations, entities), writes the tables and the page, and prints the
time and peak memory of the whole run and of building the page. Target: < 2 min, < 4 GB.
The cache is emptied first, so every pair is judged (``--keep-cache`` to time a rerun).

Reports are composed from sentences written here: a pool of normal statements and of finding
sentences (finding x side x severity x change), so references and candidates share the wording
that real IU-style reports share. Each system keeps each reference sentence with its own
probability, drops or replaces the others (hallucinating a finding sometimes), and falls back
to one of its own normal templates for some studies (mode collapse, as the real IU systems do).
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
from pathlib import Path

import numpy as np
import yaml

NORMAL = [
    "The heart is normal in size.",
    "Heart size is within normal limits.",
    "The cardiomediastinal silhouette is normal.",
    "The mediastinum is unremarkable.",
    "The lungs are clear.",
    "Lungs are clear bilaterally.",
    "No pleural effusion or pneumothorax.",
    "There is no pneumothorax.",
    "No focal airspace consolidation.",
    "There is no focal consolidation.",
    "The osseous structures are intact.",
    "No acute bony abnormality.",
    "Pulmonary vascularity is within normal limits.",
    "No acute cardiopulmonary abnormality.",
    "The trachea is midline.",
    "No evidence of pulmonary edema.",
]
FINDINGS = [
    "{sev} {side} pleural effusion.",
    "{sev} cardiomegaly.",
    "{side} lower lobe atelectasis.",
    "{side} upper lobe consolidation.",
    "{sev} {side} pneumothorax.",
    "Calcified granuloma in the {side} upper lobe.",
    "{sev} pulmonary edema.",
    "{side} basilar opacity, {change}.",
    "Degenerative changes of the thoracic spine.",
    "{sev} hyperinflation consistent with emphysema.",
    "A {side} lung nodule is noted.",
    "{side} rib fracture.",
    "Tortuous aorta.",
    "Sternotomy wires are present.",
    "{sev} scoliosis of the thoracic spine.",
    "Hiatal hernia.",
    "{side} hilar lymphadenopathy.",
    "Interstitial markings are increased, {change}.",
    "{sev} {side} pleural effusion, {change}.",
    "{sev} cardiomegaly, {change}.",
    "There is a {sev} {side} pneumothorax.",
    "Patchy {side} lower lobe airspace disease, {change}.",
    "{sev} {side} apical pleural thickening.",
    "Streaky {side} basilar atelectasis, {change}.",
]
SEVERITY = ["Small", "Mild", "Moderate", "Large", ""]
SIDE = ["right", "left", "bilateral"]
CHANGE = ["unchanged from prior", "increased since the prior study", "new since the prior exam", ""]
SITES = {"site-A": 0.35, "site-B": 0.5, "site-C": 0.65, "site-D": 0.8}  # abnormal share per site


def _cap(s: str) -> str:
    s = " ".join(s.replace(" ,", ",").split())
    return s[0].upper() + s[1:]


def finding_pool(rng: np.random.Generator, size: int = 200) -> list[str]:
    """Up to ``size`` distinct finding sentences (every template filled every way, then sampled)."""
    pool = sorted(
        {
            _cap(t.format(sev=a, side=b, change=c).replace(", .", "."))
            for t in FINDINGS
            for a in SEVERITY
            for b in SIDE
            for c in CHANGE
        }
    )
    return sorted(rng.choice(pool, size=min(size, len(pool)), replace=False).tolist())


def make_inputs(out: Path, n_studies: int, n_systems: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pool = finding_pool(rng)
    out.mkdir(parents=True, exist_ok=True)
    ids = [f"S{i:06d}" for i in range(n_studies)]
    sites = rng.choice(list(SITES), size=n_studies)
    refs: list[list[str]] = []
    for i in range(n_studies):
        normal = list(rng.choice(NORMAL, size=rng.integers(3, 6), replace=False))
        if rng.random() < SITES[sites[i]]:
            normal[1:1] = list(rng.choice(pool, size=rng.integers(1, 4), replace=False))
        refs.append(normal)
    with (out / "references.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "report", "site"])
        for i, r, s in zip(ids, refs, sites):
            w.writerow([i, " ".join(r), s])
    systems = []
    for k in range(n_systems):
        keep = 0.45 + 0.5 * k / max(1, n_systems - 1)
        collapse = 0.35 * (1 - k / max(1, n_systems - 1))
        hallucinate = 0.15 * (1 - k / max(1, n_systems - 1))
        templates = [" ".join(rng.choice(NORMAL, size=4, replace=False)) for _ in range(3)]
        path = out / f"system_{k:02d}.csv"
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "report"])
            for i, r in zip(ids, refs):
                if rng.random() < collapse:
                    w.writerow([i, templates[rng.integers(3)]])
                    continue
                cand = []
                for sent in r:
                    u = rng.random()
                    if u < keep:
                        cand.append(sent)
                    elif u < keep + (1 - keep) / 2:
                        cand.append(NORMAL[rng.integers(len(NORMAL))])
                if rng.random() < hallucinate:
                    cand.insert(1, pool[rng.integers(len(pool))])
                w.writerow([i, " ".join(cand) or templates[0]])
        systems.append({"name": f"sys-{k:02d}", "path": path.name})
    config = {
        "name": "synthetic-scale",
        "out": str(out.parent),
        "metrics": ["spec-errors", "bleu2", "rouge-l", "bleu4-corpus"],
        "rank_by": "spec-errors",
        "bootstrap": {"resamples": 1000, "seed": 0},
        "datasets": [
            {
                "name": "synthetic",
                "references": {"path": "references.csv", "text_col": "report"},
                "metadata": {"path": "references.csv", "site_col": "site"},
                "normal_from": "findings",
            }
        ],
        "systems": systems,
    }
    cfg = out / "bench.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    return cfg


def _peak_mb() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, kids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=10_000)
    ap.add_argument("--systems", type=int, default=24)
    ap.add_argument("--out", type=Path, default=Path("bench-out/scale"))
    ap.add_argument("--keep-cache", action="store_true")
    args = ap.parse_args(argv)

    from cxreval.bench.config import load_config
    from cxreval.bench.runner import run_benchmark
    from cxreval.bench.tables import write_tables

    t = time.perf_counter()
    cfg_path = make_inputs(args.out / "inputs", args.studies, args.systems)
    print(f"inputs: {args.studies:,} studies x {args.systems} systems in {time.perf_counter() - t:.1f} s (not timed below)")
    if not args.keep_cache and (args.out / "cache.sqlite").exists():
        for p in args.out.glob("cache.sqlite*"):
            p.unlink()
    t0 = time.perf_counter()
    cfg = load_config(cfg_path)
    result, stats = run_benchmark(cfg, args.out, log=print)
    paths = write_tables(result, args.out)
    t_tables = time.perf_counter()
    page_s: float | None = None
    try:
        from cxreval.page import write_html
    except ImportError:
        print("page: skipped (cxreval.page is not available)")
    else:
        tp = time.perf_counter()
        write_html(result, args.out / "report.html")
        page_s = time.perf_counter() - tp
    total = time.perf_counter() - t0
    own, kids = _peak_mb()
    print(f"pairs: {stats.pairs:,} ({stats.judged:,} judged now, {stats.judgement_hits:,} cached)")
    print("stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items()))
    print(f"tables (JSON/CSV/LaTeX): {t_tables - t0 - result.timings.get('total', 0):.1f} s -> {paths['json'].parent}")
    if page_s is not None:
        print(f"page: {page_s:.1f} s, {(args.out / 'report.html').stat().st_size / 1e6:.1f} MB")
    print(f"TOTAL: {total:.1f} s; peak RSS: main process {own:,.0f} MB, largest worker {kids:,.0f} MB")
    ok = total < 120 and own < 4096 and kids < 4096
    print("target (< 120 s, < 4 GB):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
