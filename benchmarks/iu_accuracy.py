"""Rule-engine accuracy against the IU X-ray MeSH gold standard.

Data: ../shared/data/iu-xray/indiana_reports.csv (CC BY-NC-ND 4.0, read at run time) with
Rad-ReStruct's splits. Rules are tuned on `train` only; figures are reported on `val + test`.

Run: python benchmarks/iu_accuracy.py [--split val,test] [--uncertain POLICY] [--json FILE]
(POLICY: which certainty grades count as coded positives, the judge's named policies: positive,
negative, probable, probable-alternative; default probable-alternative, chosen on train.)
Per certainty grade (which hedges the coders code): python benchmarks/iu_certainty.py
"""

from __future__ import annotations

import argparse
import json

from _data import data_dir
from keyword_negex import KeywordNegex

from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.extract.models import CERTAINTY_POLICIES
from cxreval.extract.rules import RuleExtractor
from cxreval.meta.extraction_accuracy import (
    CODERS_POLICY,
    ExtractionAccuracy,
    evaluate_extraction,
)
from cxreval.ontology import load_ontology


def _f(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


def show(acc: ExtractionAccuracy) -> None:
    print(
        f"data: {acc.data}; {acc.n_reports} reports; engine {acc.engine}; ontology {acc.ontology}; "
        f"uncertain counted {acc.uncertain}"
    )
    print(
        f"presence over the {acc.universe} MeSH-mapped entities: micro P {_f(acc.micro.precision)} "
        f"R {_f(acc.micro.recall)} F1 {_f(acc.micro.f1)} (target >= 0.93); macro F1 {_f(acc.macro_f1)} over "
        f"{len(acc.entities)} entities with >= {acc.min_support} gold positives (target >= 0.85)"
    )
    print(
        f"side accuracy on correctly found entities: {_f(acc.side.accuracy)} ({acc.side.correct}/{acc.side.judged}; "
        f"{acc.side.not_available} without a side on one side) (target >= 0.90)"
    )
    print(
        f"severity accuracy on correctly found entities: {_f(acc.severity.accuracy)} "
        f"({acc.severity.correct}/{acc.severity.judged}; {acc.severity.not_available} n/a) (target >= 0.85)"
    )
    print(
        f"normal-study detection: P {_f(acc.normal.precision)} R {_f(acc.normal.recall)} F1 {_f(acc.normal.f1)} (target >= 0.95)"
    )
    for ls in acc.labelsets:
        print(
            f"{ls.labelset} projection: micro F1 {_f(ls.micro.f1)}; macro F1 {_f(ls.macro_f1)} over "
            f"{ls.n_labels_macro} labels with >= {acc.min_support} positives"
        )
        for label, p in ls.labels.items():
            print(f"    {label:28s} support {p.support:4d}  P {_f(p.precision)}  R {_f(p.recall)}  F1 {_f(p.f1)}")
    print("per entity:")
    for e in sorted(acc.entities, key=lambda r: r.presence.f1 or 0):
        p = e.presence
        print(
            f"    {e.entity:32s} support {p.support:4d}  TP {p.tp:4d} FP {p.fp:4d} FN {p.fn:4d}  "
            f"P {_f(p.precision)}  R {_f(p.recall)}  F1 {_f(p.f1)}"
        )
    print("most frequent disagreements (FN = missed, FP = false alarm):")
    for c in acc.confusions:
        print(f"    {c.kind} {c.entity} x{c.count}")
        for ex in c.examples:
            print(f"        [{ex.uid}] {ex.sentence[:200]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--split", default="val,test", help="comma-separated splits (train for tuning only)")
    ap.add_argument(
        "--uncertain",
        default=CODERS_POLICY,
        choices=list(CERTAINTY_POLICIES),
        help="which certainty grades count as coded positives (default: the grade set chosen on train, see iu_certainty.py)",
    )
    ap.add_argument("--json", help="also write the full result as JSON here")
    ap.add_argument("--confusions", type=int, default=15)
    args = ap.parse_args()
    splits = [s.strip() for s in args.split.split(",")]
    onto = load_ontology()
    gold = load_iu_gold(data_dir(), onto, splits=splits)  # type: ignore[arg-type]
    extractor = RuleExtractor(onto)
    acc = evaluate_extraction(
        gold,
        extractor.extract,
        onto,
        data=f"IU X-ray MeSH gold, split {'+'.join(splits)}",
        engine=extractor.signature,
        uncertain=args.uncertain,
        top_confusions=args.confusions,
    )
    show(acc)
    # The trivial baseline on the same gold, through the same scoring and projections.
    keyword = KeywordNegex(onto)
    base = evaluate_extraction(gold, keyword.extract, onto, data=acc.data, engine=keyword.engine, uncertain=args.uncertain)
    print(f"\nsame figures, rule engine vs baseline {keyword.engine} (keyword + sentence NegEx):")
    rows = [
        ("presence micro F1", acc.micro.f1, base.micro.f1),
        ("presence macro F1", acc.macro_f1, base.macro_f1),
        ("side accuracy", acc.side.accuracy, base.side.accuracy),
        ("severity accuracy", acc.severity.accuracy, base.severity.accuracy),
        ("normal-study F1", acc.normal.f1, base.normal.f1),
    ]
    rows += [(f"{a.labelset} micro F1", a.micro.f1, b.micro.f1) for a, b in zip(acc.labelsets, base.labelsets)]
    for name, ours, theirs in rows:
        print(f"    {name:24s} {_f(ours)}   {_f(theirs)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(acc.model_dump(), fh, indent=2)


if __name__ == "__main__":
    main()
