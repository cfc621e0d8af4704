"""Bootstrap CIs of every entity-level score from cached per-pair counts vs recomputing.

Synthetic judgement table: 10,000 pairs x every entity of the packaged ontology (each entity
mentioned in a pair with a probability drawn log-uniformly from 0.1 % to 20 %; a mention is
TP / FP / FN / TN with probability .50 / .15 / .20 / .15; attributes random on TP rows).

Fast path: build the per-pair cache once (pairs x entities x TP/FP/FN, plus attribute counts),
then 1,000 resamples = multinomial pair weights @ cache, chunk by chunk, and BCa intervals
(jackknife included) of every entity's precision / recall / F1, macro and micro P / R / F1 and
the three attribute accuracies.
Baseline: for each resample, build the resampled judgement table (pandas) and call
``entity_scores`` + ``averages``. It is timed on the first 20 resamples (the very same draws as
the fast path, whose F1s it must reproduce) and extrapolated to 1,000.

Run: python benchmarks/bootstrap_speed.py [--pairs 10000] [--resamples 1000] [--baseline 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from cxreval.judge.table import JudgementTable
from cxreval.metrics.intervals import table_cache
from cxreval.ontology import load_ontology
from cxreval.scores import averages, entity_scores
from cxreval.scores.resampling import DEFAULT_CHUNK, bootstrap, weights_from_indices
from cxreval.scores.signature import Signature

PRESENCE = np.array(["TP", "FP", "FN", "TN"])
ATTR = np.array(["aligned", "not-aligned", "not-available"])
COMP = np.array(["other", "adding-unmentioned-comparison", "missing-mentioned-comparison"])


def synthetic_table(n_pairs: int, entity_ids: list[str], seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """A judgement table (the columns of ``judgement_frame``) for ``n_pairs`` synthetic pairs."""
    rng = np.random.default_rng(seed)
    prevalence = np.exp(rng.uniform(np.log(0.001), np.log(0.2), len(entity_ids)))
    mentioned = rng.random((n_pairs, len(entity_ids))) < prevalence
    pair, ent = np.nonzero(mentioned)
    presence = PRESENCE[rng.choice(4, size=len(pair), p=[0.5, 0.15, 0.2, 0.15])]
    tp = presence == "TP"
    pair_ids = [f"pair{i:05d}" for i in range(n_pairs)]
    frame = pd.DataFrame(
        {
            "pair_id": np.array(pair_ids)[pair],
            "entity": np.array(entity_ids)[ent],
            "presence": presence,
            "location": np.where(tp, ATTR[rng.integers(0, 3, len(pair))], "not-available"),
            "severity": np.where(tp, ATTR[rng.integers(0, 3, len(pair))], "not-available"),
            "comparison": np.where(tp, COMP[rng.choice(3, size=len(pair), p=[0.8, 0.1, 0.1])], "other"),
        }
    )
    return frame, pair_ids


def recompute(frame: pd.DataFrame, pair_ids: list[str], onto, idx: np.ndarray) -> list[np.ndarray]:
    """Baseline: per resample, rebuild the resampled judgement table and score it from scratch."""
    codes = pd.Index(pair_ids).get_indexer(frame["pair_id"])
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(len(pair_ids)))
    ends = np.searchsorted(codes[order], np.arange(len(pair_ids)), side="right")
    out = []
    for row in idx:
        lens = ends[row] - starts[row]
        pos = np.repeat(starts[row] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        resampled = frame.iloc[order[pos]]
        scores = entity_scores(resampled, onto, len(pair_ids))
        avg = averages(scores)
        f1 = [np.nan if s.presence.f1 is None else s.presence.f1 for s in scores]
        out.append(np.array([*f1, np.nan if avg.macro_f1 is None else avg.macro_f1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--baseline", type=int, default=20, help="resamples timed for the recompute baseline")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    onto = load_ontology()
    frame, pair_ids = synthetic_table(args.pairs, onto.entity_ids, args.seed)
    print(
        f"synthetic judgement table: {args.pairs:,} pairs x {len(onto.entities)} entities "
        f"({onto.signature}), {len(frame):,} explicit rows"
    )

    t0 = time.perf_counter()
    cache = table_cache(JudgementTable(pair_ids, frame), onto)
    t1 = time.perf_counter()
    sig = Signature(metric="spec-cxr-bootstrap", ontology=onto.signature, engine="synthetic")
    res = {m: None for m in ("bca", "percentile")}
    times = {}
    for method in res:
        s = time.perf_counter()
        res[method] = bootstrap(cache, resamples=args.resamples, seed=args.seed, method=method, signature=sig)
        times[method] = time.perf_counter() - s
    build = t1 - t0
    n_scores = len(cache.names)
    print(f"cache: {cache.values.shape[0]:,} pairs x {cache.values.shape[1]} counts, built in {build:.2f} s")
    for method, t in times.items():
        print(
            f"fast  {method:<10}: {args.resamples:,} resamples, {n_scores} scores "
            f"(entity P/R/F1, macro, micro, attributes): {t:.2f} s (+ {build:.2f} s cache build = {t + build:.2f} s)"
        )

    # the baseline uses the very same first draws as the fast path
    rng = np.random.default_rng(args.seed)
    idx = rng.integers(0, args.pairs, size=(min(DEFAULT_CHUNK, args.resamples), args.pairs))[: args.baseline]
    s = time.perf_counter()
    slow = recompute(frame, pair_ids, onto, idx)
    t_slow = time.perf_counter() - s
    per = t_slow / len(idx)
    est = per * args.resamples
    fast = cache.weighted(weights_from_indices(idx, args.pairs))
    f1_cols = [cache.names.index(f"{e}/f1") for e in onto.entity_ids] + [cache.names.index("presence_macro_f1")]
    np.testing.assert_allclose(np.array(slow), fast[:, f1_cols], rtol=1e-12, equal_nan=True)
    print(
        f"recompute (resampled table -> entity_scores + averages): {len(idx)} resamples took {t_slow:.2f} s "
        f"= {per:.3f} s each; extrapolated to {args.resamples:,}: {est:.1f} s (F1s identical to the fast path)"
    )
    total = times["bca"] + build
    verdict = "met" if total < 5 and est / total >= 20 else "NOT met"
    print(f"speed-up (BCa incl. cache build): {est / total:.0f}x; target < 5 s and >= 20x: {verdict}")
    macro = res["bca"].get("presence_macro_f1")
    print(f"e.g. macro F1 {macro.estimate:.4f} [{macro.low:.4f}, {macro.high:.4f}] (BCa, n_defined {macro.n_defined})")
    partial = [e for e in res["bca"].estimates if e.name.endswith("/f1") and e.n_defined < args.resamples]
    print(
        f"F1s undefined in some resamples (interval over the defined ones): {len(partial)}"
        + (f", fewest defined {min(e.n_defined for e in partial)}" if partial else "")
    )
    print(f"signature: {res['bca'].signature}")


if __name__ == "__main__":
    main()
