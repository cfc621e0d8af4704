"""ChestX-ray14 projection against the IU X-ray MeSH coders, with a keyword + NegEx baseline beside it.

Data: ../shared/data/iu-xray/indiana_reports.csv (CC BY-NC-ND 4.0, read at run time), Rad-ReStruct's
splits; figures on val + test (never tuned on) unless --split says otherwise.

Gold (a proxy, not the NegBio/OpenI ChestX-ray14 gold, which is kept outside the project): a label
is positive when the report's human MeSH codes hold the heading that names it (Wang et al. 2017
define the labels by their terms): Atelectasis <- "Pulmonary Atelectasis"; Cardiomegaly <-
"Cardiomegaly"; Effusion <- "Pleural Effusion"; Infiltration <- "Infiltrate"; Mass <- "Mass";
Nodule <- "Nodule"; Pneumonia <- "Pneumonia"; Pneumothorax <- "Pneumothorax",
"Hydropneumothorax"; Consolidation <- "Consolidation"; Edema <- "Pulmonary Edema"; Emphysema <-
"Pulmonary Emphysema", "Emphysema", "Bullous Emphysema"; Fibrosis <- "Pulmonary Fibrosis",
"Fibrosis"; Pleural_Thickening <- "Thickening" on the pleura; Hernia <- "Hernia, Hiatal".

Systems, all through :func:`cxreval.scores.project_extractions` / :func:`label_metrics`; hedged
mentions count as negative (``--uncertain``), as ChestX-ray14 defines its labels (Wang et al. rule
out uncertain mentions), except alternatives ("atelectasis or scarring"), which NegBio's uncertainty
patterns do not call uncertain (the label set's ``affirms``, ontology 1.8.0):
- cxreval's rule engine;
- ``keyword+negex``: the label's words (the same ChestX-ray14 term list) found in a sentence,
  negated when a NegEx trigger ("no", "without", "negative for", "free of", "resolved"...) comes
  earlier in that sentence: the trivial baseline every figure needs beside it.

Run: python benchmarks/iu_chestxray14.py [--split val,test]
"""

from __future__ import annotations

import argparse
import re

import pandas as pd
from _data import data_dir

from cxreval.datasets.iu_xray import load_splits, read_iu_reports, report_text
from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import load_ontology
from cxreval.ontology.mesh import parse_mesh_field
from cxreval.scores import label_metrics, project_extractions

LABELSET = "chestxray14"
GOLD_HEADINGS = {
    "pulmonary atelectasis": "Atelectasis",
    "cardiomegaly": "Cardiomegaly",
    "pleural effusion": "Effusion",
    "infiltrate": "Infiltration",
    "mass": "Mass",
    "nodule": "Nodule",
    "pneumonia": "Pneumonia",
    "pneumothorax": "Pneumothorax",
    "hydropneumothorax": "Pneumothorax",
    "consolidation": "Consolidation",
    "pulmonary edema": "Edema",
    "pulmonary emphysema": "Emphysema",
    "emphysema": "Emphysema",
    "bullous emphysema": "Emphysema",
    "pulmonary fibrosis": "Fibrosis",
    "fibrosis": "Fibrosis",
    "hernia, hiatal": "Hernia",
}
KEYWORDS = {
    "Atelectasis": r"atelecta",
    "Cardiomegaly": r"cardiomegaly|enlarged (?:heart|cardiac silhouette)",
    "Effusion": r"effusion",
    "Infiltration": r"infiltrat",
    "Mass": r"\bmass",
    "Nodule": r"nodul",
    "Pneumonia": r"pneumoni",
    "Pneumothorax": r"pneumothora",
    "Consolidation": r"consolidat",
    "Edema": r"edema",
    "Emphysema": r"emphysem",
    "Fibrosis": r"fibros|fibrotic",
    "Pleural_Thickening": r"pleural thicken",
    "Hernia": r"hernia",
}
NEGEX = re.compile(r"\b(?:no|not|without|negative for|free of|resolved|clear of|absence of|rule out)\b", re.I)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def gold_labels(mesh: str) -> set[str]:
    out = set()
    for code in parse_mesh_field(mesh):
        heading = code.heading.strip().lower()
        if heading == "thickening" and any("pleura" in q.lower() for q in code.raw.split("/")[1:]):
            out.add("Pleural_Thickening")
        elif heading in GOLD_HEADINGS:
            out.add(GOLD_HEADINGS[heading])
    return out


def keyword_negex(text: str) -> dict[str, float]:
    """1 / 0 / NaN per label: a keyword in a sentence, negated by an earlier NegEx trigger."""
    out: dict[str, float] = {}
    for sentence in SENTENCE.split(text):
        for label, pattern in KEYWORDS.items():
            m = re.search(pattern, sentence, re.I)
            if m is None:
                continue
            value = 0.0 if NEGEX.search(sentence[: m.start()]) else 1.0
            out[label] = max(out.get(label, value), value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="val,test")
    ap.add_argument(
        "--uncertain",
        default="negative",
        choices=["negative", "positive"],
        help="hedged mentions (label value -1): Wang et al. rule them out (negative)",
    )
    args = ap.parse_args()
    splits = set(args.split.split(","))
    which = load_splits(data_dir())
    rows = [(uid, mesh, report_text(f, i)) for uid, mesh, f, i in read_iu_reports(data_dir()) if which.get(uid) in splits]
    onto = load_ontology()
    labels = onto.labelsets[LABELSET].labels
    gold = pd.DataFrame(
        [{lab: float(lab in gold_labels(m)) for lab in labels} for _, m, _ in rows], index=[u for u, _, _ in rows]
    )
    ext = RuleExtractor(onto)
    rules = project_extractions({u: ext.extract(t) for u, _, t in rows}, onto, LABELSET)
    keyword = pd.DataFrame([keyword_negex(t) for _, _, t in rows], index=gold.index, columns=labels)
    print(f"IU X-ray {args.split}: {len(rows)} reports; gold = human MeSH headings (proxy; see module doc)")
    print(f"{'label':20s} {'n':>4s} {'rules F1':>9s} {'keyword F1':>10s}")
    res = {
        name: label_metrics(gold, pred, labelset=LABELSET, uncertain=args.uncertain)
        for name, pred in (("rules", rules), ("keyword", keyword))
    }
    for j, lab in enumerate(labels):
        r, k = res["rules"].labels[j], res["keyword"].labels[j]
        f = lambda x: "  n/a" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"{lab:20s} {r.tp + r.fn:4d} {f(r.f1):>9s} {f(k.f1):>10s}")
    for name, m in res.items():
        print(
            f"{name:8s} micro P {m.micro.precision:.3f} R {m.micro.recall:.3f} F1 {m.micro.f1:.3f}; "
            f"macro F1 {m.macro_f1:.3f}  ({m.signature.short() if hasattr(m.signature, 'short') else ''})"
        )


if __name__ == "__main__":
    main()
