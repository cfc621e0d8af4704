"""Which certainty policy matches the IU X-ray MeSH coders best, per hedge grade.

For each grade (probable, possible, alternative) it counts the scored entities whose report-level
state is hedged with that grade and how many of them the coders coded (directly, or as the
family member a generic code accepts): that share is the precision of counting the grade
positive. Then it scores every set of grades counted positive (the named policies positive,
negative, probable, probable-alternative among them) by micro / macro presence F1, chosen on
`train` and reported on `val + test` too. Last, the label projections
(`cxreval.scores.labels.project_extractions(..., certainty=POLICY)`) under each named policy
against the coders' labels (their entities projected the same way), CheXpert-14, ChestX-ray14 and
Ran-21, binarised with hedges that stay hedged counted negative; per grade, the label cells the
grade turns positive (going negative -> probable -> probable-alternative -> positive) and how many
of them the coders hold.

Data: ../shared/data/iu-xray/indiana_reports.csv (CC BY-NC-ND 4.0, read at run time) with
Rad-ReStruct's splits.

Run: python benchmarks/iu_certainty.py [--choose train] [--report val,test] [--cues 25] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from itertools import combinations

import pandas as pd
from _data import data_dir

from cxreval.datasets.iu_xray import GoldReport, load_iu_gold
from cxreval.extract.models import (
    CERTAINTY_POLICIES,
    HEDGE_GRADES,
    EntityState,
    Extraction,
)
from cxreval.extract.rules import RuleExtractor
from cxreval.meta.extraction_accuracy import (
    CODERS_POLICY,
    evaluate_extraction,
    match_report,
    mesh_universe,
)
from cxreval.ontology import Ontology, load_ontology
from cxreval.scores.labels import label_metrics, project_extractions, project_states

LABELSETS = ("chexpert14", "chestxray14", "ran21")
#: The named policies in the order each adds one grade: the grade a step adds is the one it affirms.
CHAIN = (("negative", None), ("probable", "probable"), ("probable-alternative", "alternative"), ("positive", "possible"))


def _f(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


def per_grade(gold: list[GoldReport], extract, universe: set[str]):
    """Per grade and per (grade, cue): [scored hedged entities, of them coded]."""
    grades: dict[str, list[int]] = {g: [0, 0] for g in HEDGE_GRADES}
    cues: Counter[tuple[str, str, bool]] = Counter()
    for report in gold:
        states = extract(report.text).states()
        # Count every hedge: which entity each one is scored as (itself or the coded generic it stands for).
        _, pred, substitutes = match_report(report, states, universe, "positive")
        credited = {found: coded for coded, found in substitutes.items()}
        for e, s in states.items():
            if s.status != "uncertain":
                continue
            scored = credited.get(e, e)
            if scored not in pred:
                continue  # outside the MeSH universe: the coders had no code for it
            hit = scored in report.entities
            grades[s.certainty][0] += 1
            grades[s.certainty][1] += int(hit)
            cues[(s.certainty, s.cue or "", hit)] += 1
    return grades, cues


def label_policies(gold: list[GoldReport], extract, onto: Ontology, labelset: str) -> list[dict]:
    """Each named policy's projection against the coders' labels, and the cells each grade turns positive."""
    coded = {
        r.uid: project_states({e: EntityState(entity=e, status="present") for e in r.entities}, onto, labelset) for r in gold
    }
    truth = pd.DataFrame.from_dict(coded, orient="index")
    extractions = {r.uid: extract(r.text) for r in gold}
    rows, before = [], None
    for policy, grade in CHAIN:
        pred = project_extractions(extractions, onto, labelset, certainty=policy)
        m = label_metrics(truth, pred[truth.columns], labelset=labelset, uncertain="negative")
        row = {
            "policy": policy,
            "precision": m.micro.precision,
            "recall": m.micro.recall,
            "micro_f1": m.micro.f1,
            "macro_f1": m.macro_f1,
            "signature": str(m.signature),
        }
        if before is not None:
            turned = (pred == 1) & (before != 1)
            row.update(grade=grade, cells=int(turned.to_numpy().sum()), coded=int((turned & (truth == 1)).to_numpy().sum()))
        rows.append(row)
        before = pred
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--choose", default="train", help="split(s) the policy is chosen on")
    ap.add_argument("--report", default="val,test", help="split(s) the chosen policy is reported on")
    ap.add_argument("--cues", type=int, default=25, help="how many of the most frequent hedge cues to list")
    ap.add_argument("--json", help="also write the figures as JSON here")
    args = ap.parse_args()
    onto = load_ontology()
    extractor = RuleExtractor(onto)
    universe = set(mesh_universe(onto))
    cache: dict[str, Extraction] = {}

    def extract(text: str) -> Extraction:
        if text not in cache:
            cache[text] = extractor.extract(text)
        return cache[text]

    named = {frozenset(v): k for k, v in CERTAINTY_POLICIES.items()}
    subsets = [frozenset(c) for r in range(len(HEDGE_GRADES) + 1) for c in combinations(HEDGE_GRADES, r)]
    out: dict = {"engine": extractor.signature, "ontology": onto.signature, "splits": {}}
    print(f"engine {extractor.signature}; ontology {onto.signature}")
    for role, split in (("choose", args.choose), ("report", args.report)):
        splits = [s.strip() for s in split.split(",")]
        gold = load_iu_gold(data_dir(), onto, splits=splits)  # type: ignore[arg-type]
        label = "+".join(splits)
        grades, cues = per_grade(gold, extract, universe)
        print(f"\n== {label} ({role}): {len(gold)} reports")
        print("hedged entities (scored, report-level grade) the coders coded = precision of counting the grade positive:")
        for g in HEDGE_GRADES:
            n, hit = grades[g]
            print(f"    {g:12s} {hit:4d} / {n:4d} coded  P {_f(hit / n if n else None)}")
        rows = []
        for policy in subsets:
            acc = evaluate_extraction(gold, extract, onto, data=label, engine=extractor.signature, uncertain=policy)
            name = named.get(policy, "-")
            grades_on = "definite" + "".join(f"+{g}" for g in HEDGE_GRADES if g in policy)
            rows.append(
                {
                    "policy": name,
                    "positive": grades_on,
                    "precision": acc.micro.precision,
                    "recall": acc.micro.recall,
                    "micro_f1": acc.micro.f1,
                    "macro_f1": acc.macro_f1,
                }
            )
        print("policies (grades counted positive): micro P / R / F1 over the MeSH universe, macro F1")
        best = max(rows, key=lambda r: r["micro_f1"] or 0)
        for r in rows:
            mark = "  <- best on this split" if r is best else ""
            mark += "  (benchmark default)" if r["policy"] == CODERS_POLICY else ""
            print(
                f"    {r['policy']:20s} {r['positive']:38s} P {_f(r['precision'])} R {_f(r['recall'])} "
                f"F1 {_f(r['micro_f1'])}  macro {_f(r['macro_f1'])}{mark}"
            )
        print("most frequent hedge cues (grade, cue: coded / scored):")
        totals: Counter[tuple[str, str]] = Counter()
        for (g, c, _hit), k in cues.items():
            totals[(g, c)] += k
        for (g, c), k in totals.most_common(args.cues):
            print(f"    {g:12s} {c!r:26s} {cues[(g, c, True)]:4d} / {k:4d}")
        print(
            "label projections (certainty=POLICY) vs the coders' labels: micro P / R / F1, macro F1; "
            "cells the policy's added grade turns positive, of them coded"
        )
        projections = {}
        for ls in LABELSETS:
            projections[ls] = label_policies(gold, extract, onto, ls)
            lbest = max(projections[ls], key=lambda r: r["micro_f1"] or 0)
            for r in projections[ls]:
                added = (
                    ""
                    if "grade" not in r
                    else (
                        f"  +{r['grade']:11s} {r['coded']:4d} / {r['cells']:4d} coded  P {_f(r['coded'] / r['cells'] if r['cells'] else None)}"
                    )
                )
                mark = "  <- best" if r is lbest else ""
                print(
                    f"    {ls:12s} {r['policy']:20s} P {_f(r['precision'])} R {_f(r['recall'])} "
                    f"F1 {_f(r['micro_f1'])}  macro {_f(r['macro_f1'])}{added}{mark}"
                )
        out["splits"][label] = {
            "role": role,
            "reports": len(gold),
            "projections": projections,
            "grades": {g: {"scored": n, "coded": hit} for g, (n, hit) in grades.items()},
            "policies": rows,
            "cues": [{"grade": g, "cue": c, "scored": k, "coded": cues[(g, c, True)]} for (g, c), k in totals.most_common()],
        }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
