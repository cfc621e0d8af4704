"""Rewards per second of cxreval.reward on IU X-ray text, beside the keyword labeler reading the same
completions in the same process.

Each batch (64, 256, 1024 completions) has GRPO-like references: 8 completions per reference, the
references IU X-ray val + test reports (read at run time, CC BY-NC-ND). Three kinds of step, each
scored by a reward that has not read its completions before unless said:

- **new completions**: every completion a train report not read before (realistic generated text
  whose every report is new, as most of a policy's rollouts are);
- **GRPO-like groups**: completions drawn from the 720 val + test reports, so some repeat within
  the batch (a group's short outputs often do);
- **repeats**: the GRPO-like batch scored again (the completions' entity states cached): what a
  step whose completions were all seen before costs.

Baseline, same completions, same process: the keyword + sentence-NegEx labeler
(benchmarks/keyword_negex.py), the cheapest reading of a report a reward could be built on;
printed as a ratio (>= 1.0: cxreval as fast). Then batch 1024 of new completions with
``num_workers`` 1 and 2 (the workers started and warmed on another batch first; each completion a
train report with a last sentence of its own, so no report repeats; the machine has two cores, so
2 workers is the most it can show).

Run: python benchmarks/reward_speed.py [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from _data import data_dir, iu_reports, iu_text
from keyword_negex import KeywordNegex

from cxreval.datasets.iu_xray import load_splits
from cxreval.ontology import load_ontology
from cxreval.reward import ClinicalReward

GROUP = 8


def rate(n: int, fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    which = load_splits(data_dir())
    reports = iu_reports()
    texts = [iu_text(r) for r in reports if which.get(r["uid"]) in ("val", "test")]
    seen = set(texts)
    unseen = list(
        dict.fromkeys(t for t in (iu_text(r) for r in reports if which.get(r["uid"]) == "train") if t and t not in seen)
    )
    rng = random.Random(0)
    keyword = KeywordNegex(load_ontology())
    print(
        f"IU X-ray: {len(texts)} val + test references, groups of {GROUP}; {len(unseen)} train texts as new "
        f"completions; best of {args.repeat}"
    )
    print(
        f"{'batch':>6s} {'new /s':>8s} {'keyword':>8s} {'ratio':>6s} {'groups /s':>10s} {'keyword':>8s} "
        f"{'ratio':>6s} {'repeats /s':>11s} {'keyword':>8s} {'ratio':>6s}"
    )
    for batch in (64, 256, 1024):
        refs = [t for t in rng.sample(texts, batch // GROUP) for _ in range(GROUP)]
        best = dict.fromkeys(("new", "new_kw", "groups", "groups_kw", "repeats", "repeats_kw"), 0.0)
        for _ in range(args.repeat):
            fresh, cands = rng.sample(unseen, batch), [rng.choice(texts) for _ in range(batch)]
            reward = ClinicalReward("neg-errors")
            reward.score(refs, ["No acute cardiopulmonary process."] * batch)  # references read: a later step
            got = {
                "new": rate(batch, lambda: reward.score(refs, fresh)),
                "new_kw": rate(batch, lambda: [keyword.extract(c) for c in fresh]),
                "groups": rate(batch, lambda: reward.score(refs, cands)),
                "groups_kw": rate(batch, lambda: [keyword.extract(c) for c in cands]),
                "repeats": rate(batch, lambda: reward.score(refs, cands)),
                "repeats_kw": rate(batch, lambda: [keyword.extract(c) for c in cands]),
            }
            best = {k: max(v, got[k]) for k, v in best.items()}
        print(
            f"{batch:6d} {best['new']:8,.0f} {best['new_kw']:8,.0f} {best['new'] / best['new_kw']:5.2f}x "
            f"{best['groups']:10,.0f} {best['groups_kw']:8,.0f} {best['groups'] / best['groups_kw']:5.2f}x "
            f"{best['repeats']:11,.0f} {best['repeats_kw']:8,.0f} {best['repeats'] / best['repeats_kw']:5.2f}x"
        )
    workers(args, texts, unseen, keyword)


def workers(args: argparse.Namespace, texts: list[str], unseen: list[str], keyword: KeywordNegex) -> None:
    """Batch 1024 of new completions, 1 and ``--workers`` processes (each reward warmed first)."""
    rng = random.Random(1)
    batch = 1024
    refs = [t for t in rng.sample(texts, batch // GROUP) for _ in range(GROUP)]
    figures = {}
    step = iter(range(10**9))

    def new_batch() -> list[str]:
        """Train reports, each made a text the reward has not read by a last sentence of its own."""
        return [f"{t} Study {next(step)}." for t in rng.sample(unseen, batch)]

    for n in (1, args.workers):
        with ClinicalReward("neg-errors", num_workers=n) as reward:
            reward.score(refs, new_batch())  # workers started, references read
            best = kw = 0.0
            for _ in range(args.repeat):
                fresh = new_batch()
                best = max(best, rate(batch, lambda: reward.score(refs, fresh)))
                kw = max(kw, rate(batch, lambda: [keyword.extract(c) for c in fresh]))
            figures[n] = (best, kw)
    (one, kw1), (many, kw2) = figures[1], figures[args.workers]
    print(
        f"batch {batch}, new completions: 1 worker {one:,.0f}/s ({one / kw1:.2f}x the keyword labeler); "
        f"{args.workers} workers {many:,.0f}/s ({many / kw2:.2f}x); {args.workers} / 1 workers {many / one:.2f}x"
    )


if __name__ == "__main__":
    main()
