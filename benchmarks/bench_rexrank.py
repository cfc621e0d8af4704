"""``cxreval bench`` on the ReXrank IU X-ray config, cold and warm, and the retrieval baselines'
search against the per-report search it replaced, in the same process.

1. The whole benchmark (``benchmarks/configs/rexrank_iu_test.yaml``: 590 studies, 8 systems, 4 of
   them IU train-split retrieval baselines) through :func:`cxreval.bench.run_benchmark`, into an
   empty folder (cold: every pair judged, every baseline searched) and again into the same folder
   (warm: judgements, metric values and baseline choices from its cache). Prints each run's
   seconds by stage.
2. The four retrieval baselines built from one :class:`~cxreval.datasets.baselines.RetrievalData`
   (each distinct finding set compared once), against the baseline: the search of cxreval 0.6,
   which parsed the IU gold for each baseline and compared every pool report (a Jaccard similarity
   per report and study). Both must choose the same reports; prints seconds and the ratio.

Data: ../shared/data (CC BY-NC-ND IU X-ray text read at run time; outputs go to a temporary folder).

Run: python benchmarks/bench_rexrank.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

CONFIG = Path(__file__).parent / "configs" / "rexrank_iu_test.yaml"
BASELINES = [("random-train", 0.0), ("retrieval-oracle", 0.0), ("retrieval-oracle", 0.1), ("retrieval-oracle", 0.3)]


def whole_benchmark() -> None:
    from cxreval.bench.config import load_config
    from cxreval.bench.runner import run_benchmark

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("cold", "warm"):
            t0 = time.perf_counter()
            _, stats = run_benchmark(load_config(CONFIG), out=Path(tmp) / "out")
            wall = time.perf_counter() - t0
            stages = ", ".join(f"{k} {v:.2f}" for k, v in stats.timings.items() if k != "total")
            print(f"bench {name}: {wall:.2f} s ({stages})")


def per_report_choice(kind: str, noise: float, ids: list[str], data_dir: Path) -> list[str]:
    """The baseline: cxreval 0.6's search (gold parsed again, every pool report compared)."""
    from cxreval.datasets.baselines import (
        finding_set,
        iu_uid,
        jaccard,
        load_pool,
        noisy_findings,
        study_rng,
    )
    from cxreval.datasets.iu_xray import load_iu_gold

    gold = load_iu_gold(data_dir)
    by_uid = {r.uid: r for r in gold}
    pool = load_pool(data_dir, "findings", [iu_uid(s) for s in ids], gold)
    prevalence = pool.prevalence
    out = []
    for sid in ids:
        rng = study_rng(0, sid, f"{kind}:{noise:g}")
        report = by_uid.get(iu_uid(sid))
        if kind == "random-train" or report is None:
            i = int(rng.integers(len(pool.texts)))
        else:
            wanted = noisy_findings(finding_set(report), prevalence, noise, rng)
            scores = np.fromiter((jaccard(wanted, f) for f in pool.findings), dtype=float, count=len(pool.findings))
            best = np.flatnonzero(scores == scores.max())
            i = int(best[rng.integers(len(best))])
        out.append(pool.uids[i])
    return out


def baselines() -> None:
    from cxreval.bench.config import load_config
    from cxreval.bench.runner import load_dataset
    from cxreval.datasets.baselines import RetrievalData, baseline_reports

    config = load_config(CONFIG)
    assert config.data_dir is not None
    ids = list(load_dataset(config.datasets[0])[0])
    t0 = time.perf_counter()
    old = [per_report_choice(kind, noise, ids, config.data_dir) for kind, noise in BASELINES]
    t_old = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = RetrievalData.load(config.data_dir)
    new = [baseline_reports(kind, ids, seed=0, noise=noise, data=data).source_uids for kind, noise in BASELINES]
    t_new = time.perf_counter() - t0
    print(
        f"4 retrieval baselines x {len(ids)} studies: per-report search, gold parsed each time (baseline, "
        f"cxreval 0.6) {t_old:.2f} s; distinct finding sets, data read once {t_new:.2f} s; "
        f"{t_old / t_new:.1f}x; same reports chosen: {old == new}"
    )


if __name__ == "__main__":
    whole_benchmark()
    baselines()
