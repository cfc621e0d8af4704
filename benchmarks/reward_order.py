"""Does any reward shape prefer a worse report? Inversions and ties of the reward order for one finding.

For one finding of a reference report, issue 31's order: the reference's own reading > a
specificity error (the finding named by its parent: generalised) or an added specificity (over-
specified) > leaving the finding out > denying it > a critical finding added in its place. For
every IU X-ray report of the val + test splits (the split rule of ../shared/data/README.md: the
wordings below were written on train, the figures are reported on val + test) and every sentence
that affirms a finding named by a wording of :data:`WORDINGS`, the script writes the five
candidates, scores them with each shape of :class:`cxreval.reward.ClinicalReward`, and counts, per
shape, the adjacent pairs of the order where the worse candidate scores higher (an inversion) or
the same (a tie; between omission and denial a tie is allowed: ">=").

The wordings are parent/child phrase pairs written from the field's sources (CheXpert's label
hierarchy and labeler phrases, the Fleischner glossary), not read off cxreval's ontology, so the
benchmark checks the judge against wordings it was not built from.

Run: python benchmarks/reward_order.py [--split train]
"""

from __future__ import annotations

import re
from collections import Counter

from _data import data_dir, iu_reports, iu_text

from cxreval.datasets.iu_xray import load_splits
from cxreval.reward import SHAPES, ClinicalReward

#: (child wording, parent wording, source): a radiologist reads the child as an instance of the parent.
WORDINGS: tuple[tuple[str, str, str], ...] = (
    ("cardiomegaly", "enlarged cardiomediastinal silhouette", "CheXpert: Enlarged Cardiomediastinum above Cardiomegaly"),
    ("pneumonia", "consolidation", "CheXpert: Consolidation above Pneumonia"),
    ("consolidation", "airspace opacity", "CheXpert: Lung Opacity above Consolidation"),
    ("atelectasis", "opacity", "CheXpert: Lung Opacity above Atelectasis"),
    ("edema", "opacity", "CheXpert: Lung Opacity above Edema"),
    ("tension pneumothorax", "pneumothorax", "Fleischner glossary: tension pneumothorax"),
    ("calcified granuloma", "granuloma", "Fleischner glossary: granuloma, calcified or not"),
    ("rib fracture", "fracture", "CheXpert labeler: Fracture phrases"),
)
#: Other words for each child's finding or its parents (CheXpert labeler phrases; Fleischner): a report
#: that keeps one of them outside the changed sentences may still state the finding, so its omission
#: would be no omission: the chain is left out.
STILL_STATED: dict[str, tuple[str, ...]] = {
    "cardiomegaly": ("heart size is enlarged", "heart is enlarged", "enlarged heart", "cardiac enlargement",
                     "cardiac silhouette is enlarged", "cardiomediastinal silhouette is enlarged", "heart size is mildly"),
    "pneumonia": ("consolidat", "opacit", "densit", "infiltrat", "airspace"),
    "consolidation": ("pneumonia", "opacit", "densit", "infiltrat", "airspace"),
    "atelectasis": ("atelecta", "opacit", "densit", "infiltrat", "airspace", "scar"),
    "edema": ("opacit", "densit", "infiltrat", "airspace", "congestion"),
    "tension pneumothorax": ("pneumothora",),
    "calcified granuloma": ("granulom", "nodul"),
    "rib fracture": ("fractur",),
}
CRITICAL = "Large right pneumothorax."
NEGATION = re.compile(r"\b(no|not|without|negative|clear|free|resolved|removed|unchanged|stable|normal)\b", re.I)
SENTENCE = re.compile(r"[^.]+\.")
ORDER = ("reading", "specificity", "omission", "denial", "added critical")


def chains(text: str) -> list[tuple[str, dict[str, str]]]:
    """The five candidates for each finding of ``text`` that a wording names and that the report
    affirms: (wording, candidates). Every affirming sentence is changed, so that no other mention
    of the finding keeps it in the candidate."""
    sentences = [m.group(0) for m in SENTENCE.finditer(text)]
    out = []
    for child, parent, _ in WORDINGS:
        word = re.compile(rf"\b{re.escape(child)}\b", re.I)
        hits = [i for i, sent in enumerate(sentences) if word.search(sent) and not NEGATION.search(sent)]
        if not hits or any(word.search(sent) and NEGATION.search(sent) for sent in sentences):
            continue  # no affirmed mention, or the report also denies it somewhere: no clean finding
        others = re.compile("|".join(re.escape(w) for w in STILL_STATED.get(child, ())) or r"(?!)", re.I)
        if any(others.search(sent) for i, sent in enumerate(sentences) if i not in hits):
            continue  # the finding (or a parent) stays stated in other words: no clean omission

        def rewrite(change: dict[int, str], extra: str = "", sentences: list[str] = sentences) -> str:
            return "".join(change.get(i, sent) for i, sent in enumerate(sentences)) + extra

        out.append((child, {
            "reading": text,
            "specificity": rewrite({i: word.sub(parent, sentences[i]) for i in hits}),
            "omission": rewrite(dict.fromkeys(hits, "")),
            "denial": rewrite({**dict.fromkeys(hits, ""), hits[0]: f" No {child}."}),
            "added critical": rewrite(dict.fromkeys(hits, ""), " " + CRITICAL),
        }))
    return out


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("val+test", "train"), default="val+test",
                    help="train to develop on; val + test to report (../shared/data/README.md)")
    splits = ("val", "test") if ap.parse_args().split == "val+test" else ("train",)
    which = load_splits(data_dir())
    reports = [iu_text(r) for r in iu_reports() if which.get(r["uid"]) in splits]
    cases = [(ref, child, cands) for ref in reports if ref for child, cands in chains(ref)]
    print(f"IU X-ray {' + '.join(splits)}: {len(reports)} reports, {len(cases)} findings named by a wording "
          f"({', '.join(f'{c} {n}' for c, n in Counter(c for _, c, _ in cases).most_common())})")
    print(f"{'shape':18s} {'inversions':>10s} {'ties':>6s}  (adjacent pairs of the order, {len(cases) * 4} in all; "
          "omission-denial ties allowed and not counted)")
    for shape in SHAPES:
        reward = ClinicalReward(shape)
        inversions, ties = Counter(), Counter()
        for ref, _, cands in cases:
            values = reward.score([ref] * len(ORDER), [cands[k] for k in ORDER])
            for (a, va), (b, vb) in zip(zip(ORDER, values), zip(ORDER[1:], values[1:])):
                if vb > va:
                    inversions[f"{a} < {b}"] += 1
                elif vb == va and (a, b) != ("omission", "denial"):
                    ties[f"{a} = {b}"] += 1
        detail = "; ".join(f"{k}: {n}" for k, n in (inversions + ties).most_common(4))
        print(f"{shape:18s} {sum(inversions.values()):10d} {sum(ties.values()):6d}  {detail}")


if __name__ == "__main__":
    main()
