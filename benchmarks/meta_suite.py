"""Perturbation suite from IU X-ray val + test references: discrimination and robustness of metrics.

    python benchmarks/meta_suite.py --html meta.html [--seed 0] [--per-type 2] [--split val,test]

Builds the suite at run time (IU text is CC BY-NC-ND: never written into the repository unless
``--suite-out`` asks for it), scores it with the rule engine (spec-errors, entity-level), BLEU-2,
ROUGE-L and BERTScore when it is installed, prints the table per perturbation type and overall,
and writes the HTML page. Perturbation generators were tuned on the train split only.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

from _data import data_dir

from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.meta.perturb import PerturbationSuite, suite_summary, write_suite
from cxreval.meta.report import write_page
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
    args = ap.parse_args()

    gold = load_iu_gold(data_dir(), splits=[s.strip() for s in args.split.split(",")])  # type: ignore[misc]
    suite = PerturbationSuite(seed=args.seed, per_type=args.per_type)
    t0 = time.perf_counter()
    pairs = suite.build((g.uid, g.text) for g in gold)
    print(f"{len(pairs)} pairs from {len(gold)} IU X-ray references ({args.split}) in "
          f"{time.perf_counter() - t0:.1f} s; {suite.signature}")
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
    counts = suite_summary(pairs)
    print("pairs per type:", ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(format_table(report))
    print("cells: discrimination (right entity) for significant types; robustness for insignificant types\n")

    rule = next((r for r in runs if r.metric == "spec-errors"), None)
    if rule is not None:
        bad = failures(rule, pairs)
        by_type = collections.defaultdict(list)
        for p in bad:
            by_type[p.perturbation].append(p)
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
