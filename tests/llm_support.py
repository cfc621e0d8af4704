"""Helpers for the LLM tests: report pairs we wrote, and the loopback server's expected answers."""

from __future__ import annotations

from pathlib import Path

from cxreval import Evaluator, ReportPair
from cxreval.llm import LLMConfig
from cxreval.ontology import Ontology

FINDINGS = [
    "Small left pleural effusion.",
    "Moderate right pleural effusion, increased since the prior study.",
    "Mild cardiomegaly.",
    "Right upper lobe consolidation concerning for pneumonia.",
    "Small right apical pneumothorax.",
    "Bibasilar atelectasis.",
    "Mild pulmonary edema, improved.",
    "Left lower lobe opacity, possibly atelectasis or pneumonia.",
    "No focal consolidation, pleural effusion or pneumothorax.",
    "The lungs are clear. Heart size is normal.",
    "Severe cardiomegaly with large bilateral pleural effusions.",
    "Degenerative changes of the thoracic spine.",
]


def written_pairs(n: int, *, prefix: str = "p", marker: str = "") -> list[ReportPair]:
    """``n`` distinct pairs built from the sentences above (texts differ by a study number)."""
    pairs = []
    k = len(FINDINGS)
    for i in range(n):
        ref = f"Study {prefix}{i}. {FINDINGS[i % k]} {FINDINGS[(i * 5 + 3) % k]}"
        cand = f"{FINDINGS[(i * 7 + 1) % k]} {FINDINGS[(i + 2) % k]}" + (f" {marker}" if marker else "")
        pairs.append(ReportPair(pair_id=f"{prefix}{i}", reference=ref, candidate=cand))
    return pairs


def with_fault(pair_id: str, fault: str, *, side: str = "candidate") -> ReportPair:
    i = sum(map(ord, pair_id)) % len(FINDINGS)
    ref = f"Case {pair_id}. {FINDINGS[i]} {FINDINGS[(i + 4) % len(FINDINGS)]}"
    cand = f"{FINDINGS[(i + 1) % len(FINDINGS)]} {FINDINGS[(i + 3) % len(FINDINGS)]}"
    if side == "candidate":
        cand += f" FAULT:{fault}"
    else:
        ref += f" FAULT:{fault}"
    return ReportPair(pair_id=pair_id, reference=ref, candidate=cand)


def rule_rows(
    pairs: list[ReportPair],
    ontology: Ontology | None = None,
    *,
    drop_tn: bool = False,
    spec_compat: bool = False,
    flat: bool = False,
) -> dict[str, set[tuple]]:
    """What the rule engine judges per pair (the loopback server answers with exactly this;
    its pairwise answers hold SPEC-CXR's three comparison values: ``spec_compat=True``, and are
    judged entity by entity: ``flat=True``; llm-extract compares its extractions by the hierarchy)."""
    res = Evaluator(ontology, spec_compat=spec_compat, hierarchy=not flat).evaluate(pairs)
    out: dict[str, set[tuple]] = {p.pair_id: set() for p in pairs}
    for r in res.judgements:
        if drop_tn and r.presence == "TN":
            continue
        out[r.pair_id].add((r.entity, r.presence, r.location, r.severity, r.comparison))
    return out


def llm_rows(judgements) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for r in judgements:
        out.setdefault(r.pair_id, set()).add((r.entity, r.presence, r.location, r.severity, r.comparison))
    return out


def loop_config(base_url: str, cache: Path, **kw) -> LLMConfig:
    defaults = dict(model="loopback", local_only=True, timeout=10.0, retries=3, concurrency=8)
    defaults.update(kw)
    return LLMConfig(base_url=base_url, cache_path=cache, **defaults)
