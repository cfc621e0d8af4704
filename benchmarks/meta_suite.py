"""Perturbation suite from IU X-ray val + test references: discrimination and robustness of metrics.

    python benchmarks/meta_suite.py --html meta.html [--seed 0] [--per-type 2] [--split val,test]
        [--targets mesh,engine] [--sample N] [--metrics spec-errors,bleu2]

Builds the suite at run time (IU text is CC BY-NC-ND: never written into the repository unless
``--suite-out`` asks for it), scores it with the rule engine (spec-errors, entity-level), BLEU-2,
ROUGE-L and BERTScore when it is installed, prints the table per perturbation type and overall,
and writes the HTML page. Perturbation generators were tuned on the train split only.
The significant types come in two target variants, side by side in every table: ``mesh`` (the
findings the human coders coded, their sentences found by a plain word search) and ``engine``
(the rule engine's own mentions); the insignificant pairs are shared by both.
"""

from __future__ import annotations

import argparse
import collections
import random
import time
from pathlib import Path

from _data import data_dir

from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.meta.page_section import write_page
from cxreval.meta.perturb import PerturbationSuite, gold_references, suite_summary_by_targets, write_suite
from cxreval.meta.robustness import EvaluatorMetric, failures, format_table, score_suite
from cxreval.metrics import MetricUnavailable, available_metrics, get_metric


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--html", type=Path, default=Path("meta-suite.html"))
    ap.add_argument("--split", default="val,test")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-type", type=int, default=2)
    ap.add_argument("--metrics", default="spec-errors,bleu2,rouge-l,bertscore")
    ap.add_argument("--suite-out", type=Path, default=None, help="also write the suite (contains IU text)")
    ap.add_argument("--examples", type=int, default=3, help="rule-engine failures to print per type")
    ap.add_argument("--targets", default="mesh,engine", help="target variants: mesh and/or engine")
    ap.add_argument("--sample", type=int, default=None, metavar="N", help="only N references, drawn with --seed (default: all)")
    args = ap.parse_args()

    gold = load_iu_gold(data_dir(), splits=[s.strip() for s in args.split.split(",")])  # type: ignore[misc]
    if args.sample is not None and args.sample < len(gold):
        keep = set(random.Random(args.seed).sample(range(len(gold)), args.sample))
        gold = [g for i, g in enumerate(gold) if i in keep]
    suite = PerturbationSuite(
        seed=args.seed, per_type=args.per_type, targets=[t.strip() for t in args.targets.split(",") if t.strip()]
    )  # type: ignore[misc]
    t0 = time.perf_counter()
    pairs = suite.build(gold_references(gold))
    print(
        f"{len(pairs)} pairs from {len(gold)} IU X-ray references ({args.split}) in "
        f"{time.perf_counter() - t0:.1f} s; {suite.signature}"
    )
    if args.suite_out:
        write_suite(pairs, args.suite_out)

    metrics = []
    for name in [m.strip() for m in args.metrics.split(",") if m.strip()]:
        if name == "spec-errors":
            metrics.append(EvaluatorMetric())
            continue
        if name not in available_metrics():
            print(f"skipping {name}: not registered")
            continue
        try:
            metrics.append(get_metric(name))
        except (MetricUnavailable, ImportError) as exc:
            print(f"skipping {name}: {exc}")
    t0 = time.perf_counter()
    report, runs = score_suite(pairs, metrics, suite=f"IU X-ray {args.split}; {suite.signature}")
    print(f"scored with {', '.join(report.metrics)} in {time.perf_counter() - t0:.1f} s\n")
    counts = suite_summary_by_targets(pairs)
    print("pairs per type:", ", ".join(f"{k} " + "/".join(f"{v} {lab}" for lab, v in c.items()) for k, c in counts.items()))
    print(format_table(report))
    print(
        "cells: discrimination (right entity) for significant types; robustness for insignificant types;"
        " [mesh] / [engine]: target variants (insignificant pairs are shared)\n"
    )
    # how far the two variants' targets differ: mesh targets the engine variant never picked, and back
    made = collections.defaultdict(set)
    for p in pairs:
        if p.significant and p.perturbation != "add_finding":
            made[p.targets].add((p.source_uid, p.perturbation, p.target_entity))
    if len(made) == 2:
        for a, b in (("mesh", "engine"), ("engine", "mesh")):
            only = collections.Counter(t for _, t, _ in made[a] - made[b])
            total = collections.Counter(t for _, t, _ in made[a])
            print(f"{a} (report, type, target) not made by {b}: " + ", ".join(f"{t} {only[t]}/{total[t]}" for t in total))
        print()

    rule = next((r for r in runs if r.metric == "spec-errors"), None)
    if rule is not None:
        bad = failures(rule, pairs)
        by_type = collections.defaultdict(list)
        for p in bad:
            by_type[f"{p.perturbation} [{p.targets}]"].append(p)
        print(f"rule engine: {len(bad)} variants judged wrong")
        idx = {p.pair_id: i for i, p in enumerate(pairs)}
        for t, items in by_type.items():
            print(f"== {t}: {len(items)}")
            for p in items[: args.examples]:
                i = idx[p.pair_id]
                print(f"  {p.pair_id}  {p.description}")
                print(f"    before: {p.before[:160]!r}\n    after:  {p.after[:160]!r}")
                print(f"    score {rule.scores[i]:g} vs identity {rule.identity[i]:g}; penalised {rule.penalised[i]}")
    write_page(report, args.html, title="cxreval: discrimination and robustness on IU X-ray val + test")
    print(f"HTML -> {args.html}")


if __name__ == "__main__":
    main()
