"""List every disagreement between the rule engine and the IU X-ray MeSH gold standard.

One line per (report, entity) where the engine and the coders disagree: FN (coded, not found)
or FP (found, not coded), with the engine's evidence sentence and the report's codes. Use it to
audit the gold standard. `--sample N --seed S` prints a reproducible random sample.

Run: python benchmarks/iu_disagreements.py --split val,test [--sample 60 --seed 0]
Data: ../shared/data (CC BY-NC-ND 4.0, read at run time; the output quotes report text, so do not commit it).
"""

from __future__ import annotations

import argparse
import random

from _data import data_dir

from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.extract.rules import RuleExtractor
from cxreval.meta.extraction_accuracy import disagreements
from cxreval.ontology import load_ontology


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--split", default="val,test")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    onto = load_ontology()
    gold = load_iu_gold(data_dir(), onto, splits=[s.strip() for s in args.split.split(",")])  # type: ignore[misc]
    extractor = RuleExtractor(onto)
    rows = disagreements(gold, extractor.extract, onto)
    if args.sample:
        rows = random.Random(args.seed).sample(rows, min(args.sample, len(rows)))
    for r in rows:
        print(f"{r.uid}\t{r.kind}\t{r.entity}\t{'; '.join(r.codes) or '-'}\t{r.evidence}")


if __name__ == "__main__":
    main()
