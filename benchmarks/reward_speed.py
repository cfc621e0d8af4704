"""Rewards per second of cxreval.reward on IU X-ray text, single process.

Rollouts: for batch sizes 64, 256 and 1024, a GRPO-like batch (8 completions per prompt) whose
references are IU X-ray reports (val + test findings, read at run time, CC BY-NC-ND) and whose
completions are other IU reports (realistic generated text). Each batch is scored twice: a cold
pass (references read for the first time) and a warm pass (references cached, as in later steps
of training; the completions are the cold pass's again, so the reward's completion cache holds
their entity states: a warm step is one whose completions repeat, as a GRPO group's short
outputs often do). A third pass scores the same references against completions never read before (train
reports): the warm figure for a step whose every completion is new. Baseline in the same process: the keyword + sentence-NegEx labeler
(benchmarks/keyword_negex.py) reading the same completions (the cheapest reading of a report
that a reward could be built on); printed as a ratio (>= 1.0 means cxreval is as fast).

Run: python benchmarks/reward_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time

from _data import data_dir, iu_reports, iu_text
from keyword_negex import KeywordNegex

from cxreval.datasets.iu_xray import load_splits
from cxreval.ontology import load_ontology
from cxreval.reward import ClinicalReward

GROUP = 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    which = load_splits(data_dir())
    reports = iu_reports()
    texts = [iu_text(r) for r in reports if which.get(r["uid"]) in ("val", "test")]
    seen = set(texts)  # train reports whose text no val / test report has, each once
    unseen = list(dict.fromkeys(t for t in (iu_text(r) for r in reports if which.get(r["uid"]) == "train")
                                if t and t not in seen))
    rng = random.Random(0)
    onto = load_ontology()
    keyword = KeywordNegex(onto)
    print(f"IU X-ray val+test texts: {len(texts)}; groups of {GROUP} completions per reference; "
          f"{len(unseen)} train texts for new completions")
    print(f"{'batch':>6s} {'cold /s':>9s} {'warm /s':>9s} {'new cands /s':>13s} {'keyword /s':>11s} "
          f"{'warm/keyword':>13s}")
    for batch in (64, 256, 1024):
        refs = [t for t in rng.sample(texts, batch // GROUP) for _ in range(GROUP)]
        cands = [rng.choice(texts) for _ in range(batch)]
        best = {"cold": 0.0, "warm": 0.0, "new": 0.0, "keyword": 0.0}
        for _ in range(args.repeat):
            reward = ClinicalReward("neg-errors")
            fresh = rng.sample(unseen, batch)  # not read by this reward yet
            t0 = time.perf_counter()
            reward.score(refs, cands)
            t1 = time.perf_counter()
            reward.score(refs, cands)
            t2 = time.perf_counter()
            for c in cands:
                keyword.extract(c)
            t3 = time.perf_counter()
            reward.score(refs, fresh)
            t4 = time.perf_counter()
            best["cold"] = max(best["cold"], batch / (t1 - t0))
            best["warm"] = max(best["warm"], batch / (t2 - t1))
            best["keyword"] = max(best["keyword"], batch / (t3 - t2))
            best["new"] = max(best["new"], batch / (t4 - t3))
        print(f"{batch:6d} {best['cold']:9,.0f} {best['warm']:9,.0f} {best['new']:13,.0f} {best['keyword']:11,.0f} "
              f"{best['warm'] / best['keyword']:12.2f}x")
    print("target: >= 5,000 rewards/s (warm)")


if __name__ == "__main__":
    main()
