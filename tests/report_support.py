"""Synthetic but realistic ``BenchmarkResult`` objects for the report tests and the README image.

Built from the packaged ontology (real entities and plot groups), with deterministic random
numbers: each system has a skill, each entity a difficulty, and counts follow from both.
"""

from __future__ import annotations

import random

from cxreval.bench.models import (
    BenchmarkResult,
    Correlation,
    EntityResult,
    ExamplePair,
    GroupResult,
    Interval,
    Leaderboard,
    LeaderboardRow,
    MetricInfo,
    SiteCell,
)
from cxreval.ontology import load_ontology

SYSTEM_NAMES = [
    "MAIRA-2",
    "MedVersa",
    "Libra",
    "CheXpertPlus-mimic",
    "CXRMate",
    "RaDialog",
    "CheXagent",
    "RGRG",
    "CvT2DistilGPT2",
    "BiomedGPT",
    "RadFM",
    "GPT-4V",
    "Gemini-CXR",
    "LLaVA-Rad",
    "R2GenGPT",
    "PromptMRG",
    "METransformer",
    "Flamingo-CXR",
    "MedGemma",
    "CXR-LLaVA",
    "XrayGPT",
    "R2Gen",
    "KiUT",
    "copy-nearest",
]
DATASETS = ["ReXGradient", "MIMIC-CXR", "IU X-ray", "CheXpert Plus"]

METRICS = [
    ("spec_macro_f1", "SPEC presence macro F1", True, "pair"),
    ("spec_micro_f1", "SPEC presence micro F1", True, "corpus"),
    ("errors_per_report", "Errors per report", False, "pair"),
    ("bleu4", "BLEU-4", True, "pair"),
    ("rouge_l", "ROUGE-L", True, "pair"),
    ("chexbert_f1", "CheXbert F1 (proxy)", True, "corpus"),
]
_SIDES = ["left", "right", "bilateral"]
_SEVERITY = ["small", "moderate", "large", "mild", "severe"]
#: The rule ids shown beside the evidence of an example pair, per error kind (reference, candidate).
_EXAMPLE_RULES = {
    "FN": ("finding.name; finding.stated; attribute.side; attribute.severity", "finding.name; negation.pre 'no'"),
    "FP": (
        "normal.no-acute-cardiopulmonary-process 'no acute cardiopulmonary process'",
        "finding.name; hedge.pre.possible 'suggest'; attribute.side; attribute.zone",
    ),
}


def _sig(name: str) -> str:
    return (
        f"metric:{name}|ontology:cxreval-cxr@1.1.0|engine:rules@1.c1.n1.a1|model:none|prompt:none"
        "|uncertain:positive|version:0.1.0"
    )


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def make_result(
    n_systems: int = 4,
    datasets: list[str] | None = None,
    n_sites: int = 8,
    examples_per_cell: int = 2,
    seed: int = 7,
    name: str = "ReXrank-style benchmark (synthetic)",
) -> BenchmarkResult:
    """A ``BenchmarkResult`` with ``n_systems`` systems over ``datasets`` (the first has sites)."""
    rng = random.Random(seed)
    onto = load_ontology()
    datasets = list(datasets or DATASETS[:2])
    systems = (
        SYSTEM_NAMES[:n_systems]
        if n_systems <= len(SYSTEM_NAMES)
        else [*SYSTEM_NAMES, *(f"system-{i}" for i in range(len(SYSTEM_NAMES), n_systems))]
    )
    skill = {s: 0.75 - 0.4 * i / max(1, n_systems - 1) + rng.uniform(-0.05, 0.05) for i, s in enumerate(systems)}
    metrics = [MetricInfo(name=m, label=lab, higher_is_better=h, signature=_sig(m), level=lev) for m, lab, h, lev in METRICS]
    group_name = {g.id: g.name for g in onto.groups}
    leaderboards: list[Leaderboard] = []
    groups: list[GroupResult] = []
    entities: list[EntityResult] = []
    correlations: list[Correlation] = []
    sites: list[SiteCell] = []

    for di, ds in enumerate(datasets):
        n_pairs = rng.choice([590, 1000, 2300, 10000])
        # entities: a frequency per entity (many rare), systems' skill decides TP/FP/FN
        freq = {e.id: int(rng.paretovariate(1.1) * 3) - 2 for e in onto.entities}
        ds_entities = [e for e in onto.entities if freq[e.id] > 0 or rng.random() < 0.15]
        for s in systems:
            g_acc: dict[str, list[int]] = {}
            g_attr: dict[str, dict[str, list[float]]] = {}
            for e in ds_entities:
                pos = max(0, freq[e.id])
                p_hit = _clip(skill[s] - 0.3 * rng.random() + (0.15 if pos > 50 else -0.1))
                tp = sum(1 for _ in range(min(pos, 400)) if rng.random() < p_hit)
                fn = min(pos, 400) - tp
                fp = int(rng.random() * (1.2 - skill[s]) * (pos / 4 + 2))
                prec = tp / (tp + fp) if tp + fp else None
                rec = tp / (tp + fn) if tp + fn else None
                f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None

                def acc(attr: str) -> float | None:
                    if attr not in e.attributes or tp < 2:
                        return None
                    return round(_clip(skill[s] + 0.2 + rng.uniform(-0.2, 0.15)), 3)

                la, sa, ca = acc("location"), acc("severity"), acc("comparison")
                examples = []
                kinds = (["FN"] * min(fn, 3)) + (["FP"] * min(fp, 3))
                if la is not None and la < 1:
                    kinds.append("location")
                for k in kinds[:examples_per_cell]:
                    pid = f"{ds[:4].lower()}-{rng.randint(1, n_pairs):05d}"
                    side, sev = rng.choice(_SIDES), rng.choice(_SEVERITY)
                    if k == "FN":
                        ref, cand = f"There is a {sev} {side} {e.name.lower()}.", f"No {e.name.lower()}. The lungs are clear."
                    elif k == "FP":
                        ref, cand = (
                            "No acute cardiopulmonary process.",
                            f"Findings suggest {e.name.lower()} in the {side} lower lobe.",
                        )
                    else:
                        other = rng.choice([x for x in _SIDES if x != side])
                        ref, cand = (
                            f"{sev.capitalize()} {side} {e.name.lower()}.",
                            f"{sev.capitalize()} {other} {e.name.lower()}.",
                        )
                    rules = _EXAMPLE_RULES.get(k, ("", ""))
                    examples.append(
                        ExamplePair(
                            pair_id=pid, kind=k, reference=ref, candidate=cand, reference_rules=rules[0], candidate_rules=rules[1]
                        )
                    )
                entities.append(
                    EntityResult(
                        system=s,
                        dataset=ds,
                        entity=e.id,
                        name=e.name,
                        group=e.group,
                        tp=tp,
                        fp=fp,
                        fn=fn,
                        precision=prec,
                        recall=rec,
                        f1=f1,
                        location_acc=la,
                        severity_acc=sa,
                        comparison_acc=ca,
                        examples=examples,
                        critical=e.critical,
                        location_errors=0 if la is None else int((1 - la) * tp),
                    )
                )
                g_acc.setdefault(e.group, [0, 0, 0])
                g_acc[e.group][0] += tp
                g_acc[e.group][1] += fp
                g_acc[e.group][2] += fn
                for key, v in (("location_acc", la), ("severity_acc", sa), ("comparison_acc", ca)):
                    if v is not None:
                        g_attr.setdefault(e.group, {}).setdefault(key, []).append(v)
            for g in onto.groups:
                if g.id not in g_acc:
                    continue
                tp, fp, fn = g_acc[g.id]
                attrs = g_attr.get(g.id, {})
                groups.append(
                    GroupResult(
                        system=s,
                        dataset=ds,
                        group=g.id,
                        name=group_name[g.id],
                        support=tp + fn,
                        precision=tp / (tp + fp) if tp + fp else None,
                        recall=tp / (tp + fn) if tp + fn else None,
                        f1=2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None,
                        **{
                            k: (sum(v) / len(v) if v else None)
                            for k, v in ((k, attrs.get(k, [])) for k in ("location_acc", "severity_acc", "comparison_acc"))
                        },
                    )
                )

        def board(stratum: str, n: int, noise: float) -> Leaderboard:
            vals = {s: _clip(skill[s] * 0.8 + rng.uniform(-noise, noise)) for s in systems}
            order = sorted(systems, key=lambda s: -vals[s])
            rows = []
            for rank, s in enumerate(order, 1):
                v = vals[s]
                w = 0.02 + noise / 2
                ms = {
                    "spec_macro_f1": Interval(value=v, low=v - w, high=v + w),
                    "spec_micro_f1": Interval(value=_clip(v + 0.08)),
                    "errors_per_report": Interval(value=3.5 * (1 - v) + 0.4, low=3.5 * (1 - v) + 0.2, high=3.5 * (1 - v) + 0.6),
                    "bleu4": Interval(value=0.05 + 0.2 * v, low=0.04 + 0.2 * v, high=0.06 + 0.2 * v),
                    "rouge_l": Interval(value=0.15 + 0.25 * v, low=0.14 + 0.25 * v, high=0.16 + 0.25 * v),
                    "chexbert_f1": Interval(value=None)
                    if s == systems[-1] and stratum == "normal"
                    else Interval(value=_clip(v + 0.05)),
                }
                rows.append(
                    LeaderboardRow(
                        system=s,
                        n_pairs=n,
                        n_failed=(3 if s == systems[-1] else 0),
                        metrics=ms,
                        rank=rank,
                        rank_low=max(1, rank - rng.randint(0, 2)),
                        rank_high=min(len(systems), rank + rng.randint(0, 2)),
                        error_free=Interval(value=_clip(v * 0.6), low=_clip(v * 0.6 - 0.03), high=_clip(v * 0.6 + 0.03)),
                        critical_error_free=Interval(value=_clip(v * 0.6 + 0.3)),
                        baseline=s == "copy-nearest",
                    )
                )
            return Leaderboard(dataset=ds, stratum=stratum, rank_by="spec_macro_f1", rows=rows, n_pairs=n)

        leaderboards += [
            board("all", n_pairs, 0.03),
            board("normal", n_pairs // 3, 0.05),
            board("abnormal", n_pairs - n_pairs // 3, 0.05),
        ]
        if di == 0 and n_sites:
            for k in range(n_sites):
                site = f"site-{k}"
                n_site = rng.randint(40, 600)
                lb = board(f"site:{site}", n_site, 0.12)
                leaderboards.append(lb)
                for row in lb.rows:
                    for m in ("spec_macro_f1", "errors_per_report"):
                        val = row.metrics[m].value
                        sites.append(
                            SiteCell(
                                dataset=ds,
                                site=site,
                                system=row.system,
                                metric=m,
                                value=val,
                                rank=row.rank if m == "spec_macro_f1" else len(systems) + 1 - row.rank,
                                n_pairs=n_site,
                            )
                        )
        names = [m[0] for m in METRICS if m[0] != "spec_micro_f1"]
        mat: list[list[float | None]] = [[1.0 if i == j else None for j in range(len(names))] for i in range(len(names))]
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                v = round(rng.uniform(0.1, 0.9), 3) * (
                    -1 if names[j] == "errors_per_report" or names[i] == "errors_per_report" else 1
                )
                mat[i][j] = mat[j][i] = v
        correlations.append(Correlation(dataset=ds, method="pearson", metrics=names, matrix=mat, n=n_pairs * len(systems)))

    return BenchmarkResult(
        name=name,
        created="2025-06-01T12:00:00+00:00",
        cxreval_version="0.1.0",
        engine_signature="engine:rules@1.c1.n1.a1|uncertain:positive",
        ontology="cxreval-cxr@1.1.0",
        metrics=metrics,
        primary_metric="spec_macro_f1",
        datasets=datasets,
        systems=systems,
        leaderboards=leaderboards,
        groups=groups,
        entities=entities,
        correlations=correlations,
        sites=sites,
        notes=["Synthetic numbers for testing the report layout."],
        baselines=[s for s in systems if s == "copy-nearest"],
    )
