"""Does any reward shape prefer a worse report? Inversions and ties of the reward order for one finding.

For one finding of a reference report, issue 31's order: the reference's own reading > the
finding named at another level of the hierarchy (``generalise``: by its parent's wording, or
``over_specify``: by a child's) or with one attribute wrong (issue 32: ``move_tip``, a device's
tip moved to another place; ``resize``, a size moved across 3 cm; ``drop_place``, one place of a
list dropped) > leaving it out (``omit_finding``) >= denying it (``negate_finding``) > a critical
finding the reference does not state added in its place. The candidates are the perturbation
suite's (:mod:`cxreval.meta.perturb`, both target variants): its parent/child wordings
(:data:`~cxreval.meta.perturb.SPECIFICITY_WORDINGS`) are written from CheXpert's hierarchy and
labeler phrases and the Fleischner glossary, and its tip moves (:data:`~cxreval.meta.perturb.TIP_MOVES`)
from Godoy 2012 and Goodman 1976, not read off cxreval's ontology, so the judge is checked against
wordings it was not built from.

Every IU X-ray report of the split (the split rule of ../shared/data/README.md: developed on
train, reported on val + test) gives one chain per finding that the suite generalises or
over-specifies, or changes in one attribute, and also omits and denies (an attribute chain of an
opacity-like finding is left out where the omission still names one of CheXpert's Lung Opacity
words). Each shape of :class:`cxreval.reward.ClinicalReward`
scores the chain's five candidates; per shape the script counts the adjacent pairs of the order
where the worse candidate scores higher (an inversion) or the same (a tie; between omission and
denial a tie is allowed: ">=").

Run: python benchmarks/reward_order.py [--split train] [--show SHAPE] [--near-misses generalise,over_specify]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict

from _data import data_dir, iu_reports, iu_text

from cxreval.datasets.iu_xray import load_splits
from cxreval.meta.perturb import SPECIFICITY_WORDINGS, PerturbationSuite
from cxreval.reward import SHAPES, ClinicalReward

#: Critical findings to add (the first the reference does not name): (a word that names it, sentence).
CRITICAL = (
    ("pneumothora", "Large right pneumothorax."),
    ("free air", "There is free air under the right hemidiaphragm."),
    ("dissection", "Findings concerning for aortic dissection."),
)
ORDER = ("reading", "near miss", "omission", "denial", "added critical")
SPECIFICITY = ("generalise", "over_specify")
#: The attribute errors of issue 32: a tip moved, a size across a threshold, a place dropped.
ATTRIBUTE = ("move_tip", "resize", "drop_place")
NEAR_MISSES = (*SPECIFICITY, *ATTRIBUTE)
TYPES = (*NEAR_MISSES, "omit_finding", "negate_finding")


#: Words for any lung opacity: the CheXpert labeler's Lung Opacity mention phrases
#: (phrases/mention/lung_opacity.txt) and "density", which radiologists use for one; for an enlarged
#: heart: its Cardiomegaly phrases (heart size, cardiac silhouette, ... with "enlarged"). A report
#: that keeps one may still state the finding at another level.
OPACITY_WORDS = (
    r"opaci",
    r"decreased translucency",
    r"densit",
    r"air[\s-]?space disease",
    r"infiltrat",
    r"interstitial (marking|pattern|lung)",
    r"reticular (pattern|marking)",
    r"reticulation",
    r"parenchymal scarring",
    r"peribronchial thickening",
)
HEART_WORDS = (
    r"heart[^.;,]*(enlarg|large)",
    r"cardiomediastinal silhouette[^.;,]*enlarg",
    r"cardiac[^.;,]*enlarg",
    r"enlarged (heart|cardiac)",
)
#: What CheXpert's hierarchy puts under Lung Opacity (its labeler's Lung Lesion, Consolidation,
#: Atelectasis, Edema and Pneumonia phrases, with the opacity words above; and granulomas, which the
#: Fleischner glossary names as nodules, often calcified): a report that keeps one
#: may still state an opacity-like finding whose own words an attribute chain left out.
LUNG_OPACITY_FAMILY = (
    *OPACITY_WORDS,
    r"nodul",
    r"mass",
    r"lesion",
    r"consolidat",
    r"atelecta",
    r"edema",
    r"pneumonia",
    r"granulom",
)
NEGATION = re.compile(r"\b(no|not|without|negative|free|clear|resolved|removed)\b", re.I)


def _edges() -> list[tuple[str, str]]:
    """(child, parent) wordings: the list's, and a wording's head noun above it ("airspace opacity" is
    an "opacity")."""
    names = {w.child for w in SPECIFICITY_WORDINGS} | {w.parent for w in SPECIFICITY_WORDINGS}
    heads = [(n, n.split()[-1]) for n in names if " " in n and n.split()[-1] in names]
    return [(w.child, w.parent) for w in SPECIFICITY_WORDINGS] + heads


def kin(name: str) -> list[str]:
    """Patterns naming ``name``'s finding at another level: its ancestors and descendants by the
    wordings (:func:`_edges`), and the plain words for an opacity or an enlarged heart among them."""
    edges, found = _edges(), set()
    for up in (True, False):
        frontier = {name}
        while frontier:
            frontier = {p if up else c for c, p in edges if (c if up else p) in frontier} - found
            found |= frontier
    found.discard(name)
    out = [re.escape(w) for w in found]
    if any("opacity" in w for w in found):
        out += OPACITY_WORDS
    if any(w in ("cardiomegaly", "enlarged cardiomediastinal silhouette") for w in found | {name}):
        out += HEART_WORDS
    return out


def still_stated(text: str, patterns: list[str]) -> bool:
    """``text`` names the finding at another level (one of ``patterns``) with no denial before it in
    its clause: leaving the finding's own words out is then no clean omission."""
    for m in re.finditer(r"\b(" + "|".join(patterns) + ")", text, re.I):
        clause = re.split(r"[.;:,]", text[: m.start()])[-1]
        if not NEGATION.search(clause):
            return True
    return False


def _opacity_like(entity: str) -> bool:
    """Whether an entity id reads as one of CheXpert's Lung Opacity words (lung_nodule, lung_mass,
    airspace_disease, lung_opacity)."""
    return re.search("|".join(LUNG_OPACITY_FAMILY), entity.replace("_", " "), re.I) is not None


def added_critical(reference: str, omission: str) -> str:
    """The omission with a critical finding the reference does not name."""
    sentence = next(s for word, s in CRITICAL if not re.search(word, reference, re.I))
    end = "" if omission.rstrip().endswith((".", "!", "?")) or not omission.strip() else "."
    return f"{omission.rstrip()}{end} {sentence}"


def chains(rows: list[dict[str, str]], near_misses: tuple[str, ...] = NEAR_MISSES) -> list[tuple[str, str, str, dict[str, str]]]:
    """(variant, how, target entity, the five candidates) for every finding the suite changes in
    specificity or in one attribute and also omits and denies."""
    suite = PerturbationSuite(types=TYPES, per_type=99)
    out = []
    for row in rows:
        text = iu_text(row)
        if not text:
            continue
        found: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        named: dict[tuple[str, str, str], str] = {}
        for p in suite.perturb(row["uid"], text, row.get("MeSH") or None):
            found[p.targets, p.target_entity or ""].setdefault(p.perturbation, p.candidate)
            named.setdefault((p.targets, p.target_entity or "", p.perturbation), p.before)
        for (variant, entity), c in found.items():
            if "omit_finding" not in c or "negate_finding" not in c:
                continue
            for how in near_misses:
                if how not in c:
                    continue
                if how in SPECIFICITY and still_stated(c["omit_finding"], kin(named[variant, entity, how])):
                    continue
                if how in ATTRIBUTE and _opacity_like(entity) and still_stated(c["omit_finding"], list(LUNG_OPACITY_FAMILY)):
                    continue
                out.append(
                    (
                        variant,
                        how,
                        entity,
                        {
                            "reading": text,
                            "near miss": c[how],
                            "omission": c["omit_finding"],
                            "denial": c["negate_finding"],
                            "added critical": added_critical(text, c["omit_finding"]),
                        },
                    )
                )
    return out


def judge(reward: ClinicalReward, cands: dict[str, str]) -> tuple[list[float], list[str], list[str]]:
    """The chain's rewards, its inversions and its ties (named ``worse < better`` / ``a = b``)."""
    values = [float(v) for v in reward.score([cands["reading"]] * len(ORDER), [cands[k] for k in ORDER])]
    inversions, ties = [], []
    for (a, va), (b, vb) in zip(zip(ORDER, values), zip(ORDER[1:], values[1:])):
        if vb > va:
            inversions.append(f"{a} < {b}")
        elif vb == va and (a, b) != ("omission", "denial"):
            ties.append(f"{a} = {b}")
    return values, inversions, ties


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--split",
        choices=("val+test", "train"),
        default="val+test",
        help="train to develop on; val + test to report (../shared/data/README.md)",
    )
    ap.add_argument("--show", choices=SHAPES, help="print the chains that invert or tie under this shape")
    ap.add_argument(
        "--near-misses",
        default=",".join(NEAR_MISSES),
        help=f"the near misses to chain, comma-separated (default all: {','.join(NEAR_MISSES)}); "
        "issue 31's are generalise,over_specify",
    )
    args = ap.parse_args()
    splits = ("val", "test") if args.split == "val+test" else ("train",)
    which = load_splits(data_dir())
    rows = [r for r in iu_reports() if which.get(r["uid"]) in splits]
    chosen = tuple(h.strip() for h in args.near_misses.split(",") if h.strip())
    unknown = set(chosen) - set(NEAR_MISSES)
    if unknown:
        ap.error(f"unknown near misses {sorted(unknown)}; known: {', '.join(NEAR_MISSES)}")
    found = chains(rows, chosen)
    kinds = Counter(f"{v}/{h}" for v, h, _, _ in found)
    print(
        f"IU X-ray {' + '.join(splits)}: {len(rows)} reports, {len(found)} chains "
        f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
        f"entities: {', '.join(f'{e} {n}' for e, n in Counter(e for _, _, e, _ in found).most_common(8))}"
    )
    print(
        f"{'shape':18s} {'inversions':>10s} {'ties':>6s}  (adjacent pairs of the order, {len(found) * 4} in all; "
        "omission-denial ties allowed and not counted)"
    )
    for shape in SHAPES:
        reward = ClinicalReward(shape)
        inversions, ties = Counter(), Counter()
        for variant, how, entity, cands in found:
            values, inv, tie = judge(reward, cands)
            inversions.update(inv)
            ties.update(tie)
            if args.show == shape and (inv or (tie and shape == "graded")):
                print(f"== {variant}/{how} {entity}: {inv + tie} {[round(v, 3) for v in values]}")
                for k in ORDER:
                    print(f"   {k}: {cands[k]}")
        detail = "; ".join(f"{k}: {n}" for k, n in (inversions + ties).most_common(4))
        print(f"{shape:18s} {sum(inversions.values()):10d} {sum(ties.values()):6d}  {detail}")


if __name__ == "__main__":
    main()
