"""A seeded, stratified sample of pairs to review, with inclusion weights.

The unit of sampling is the pair (reviewers read both reports and check every entity of it).
Each pair falls in exactly one stratum, named by its *leading* judgement row:

1. a row on an entity the ontology marks critical, other than TN, leads (critical findings are
   what a reader must not miss, and they are rare): stratum ``presence/critical``;
2. otherwise the presence outcome in the order FN, FP, TP, TN (errors are what the engine's
   accuracy hinges on), then the entity group rarest in the folder for that outcome, then the
   entity id: stratum ``presence/group``;
3. a pair with no judgement row (neither report mentions any entity): stratum ``none``.

A stratum too small to get one pair under proportional allocation (size x boost < N / n) is
merged into ``presence/other``, and that into ``other`` if it is still too small, so a small
folder is not cut into strata of one pair each. Allocation: every stratum gets one pair while
the sample allows (critical, then smallest strata first), the rest is shared in proportion to
stratum size times ``critical_boost`` for critical strata (largest remainders, capped at the
size). Within a stratum pairs are drawn uniformly without replacement, so each pair of stratum
*h* is included with probability n_h / N_h and carries the Horvitz-Thompson weight N_h / n_h.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from cxreval._version import __version__
from cxreval.io import ReportPair
from cxreval.judge import EntityJudgement
from cxreval.ontology import Ontology

PRESENCE_ORDER = {"FN": 0, "FP": 1, "TP": 2, "TN": 3}
NO_ROWS = "none"


class Stratum(BaseModel):
    """One stratum of the sample: how many pairs it holds and how many were drawn."""

    key: str
    presence: str
    group: str
    critical: bool
    size: int
    sampled: int

    @property
    def weight(self) -> float:
        """Horvitz-Thompson weight of each drawn pair (stratum size / pairs drawn); 0 if none was."""
        return self.size / self.sampled if self.sampled else 0.0


class SampledPair(BaseModel):
    """One drawn pair: its place in the review order, its stratum and its inclusion weight."""

    pair_id: str
    position: int
    stratum: str
    weight: float


class Sample(BaseModel):
    """The drawn pairs and the strata they came from, with the settings that reproduce them."""

    seed: int
    requested: int
    critical_boost: float
    n_pairs: int
    strata: list[Stratum]
    pairs: list[SampledPair]
    implied_tn: bool = False
    """The results were written with compact rows (``evaluate --rows compact``): true negatives
    without error are implied, not in the file, so the reviewers do not see them."""


def pair_strata(rows: Sequence[EntityJudgement], pair_ids: Sequence[str], ontology: Ontology) -> dict[str, Stratum]:
    """Each pair's fine stratum before merging (``size``/``sampled`` left at 0): the module docstring's rule."""
    by_pair: dict[str, list[EntityJudgement]] = {p: [] for p in pair_ids}
    for r in rows:
        by_pair.setdefault(r.pair_id, []).append(r)
    entity = {e.id: e for e in ontology.entities}

    def group(r: EntityJudgement) -> str:
        e = entity.get(r.entity)
        return e.group if e is not None else "unknown"

    def critical(r: EntityJudgement) -> bool:
        e = entity.get(r.entity)
        return bool(e is not None and e.critical and r.presence != "TN")

    # in how many pairs each (presence, group) cell occurs
    frequency = Counter(c for rs in by_pair.values() for c in {(r.presence, group(r)) for r in rs})
    out: dict[str, Stratum] = {}
    for pid, rs in by_pair.items():
        if not rs:
            out[pid] = Stratum(key=NO_ROWS, presence=NO_ROWS, group=NO_ROWS, critical=False, size=0, sampled=0)
            continue
        lead = min(
            rs, key=lambda r: (not critical(r), PRESENCE_ORDER[r.presence], frequency[(r.presence, group(r))], group(r), r.entity)
        )
        if critical(lead):
            out[pid] = Stratum(
                key=f"{lead.presence}/critical", presence=lead.presence, group="critical", critical=True, size=0, sampled=0
            )
        else:
            out[pid] = Stratum(
                key=f"{lead.presence}/{group(lead)}", presence=lead.presence, group=group(lead), critical=False, size=0, sampled=0
            )
    return out


def merge_small(strata: dict[str, Stratum], n: int, critical_boost: float) -> dict[str, Stratum]:
    """Merge strata that proportional allocation would give less than one pair (module docstring)."""
    threshold = len(strata) / max(n, 1)

    def sizes(of: dict[str, Stratum]) -> Counter[str]:
        return Counter(s.key for s in of.values())

    def small(s: Stratum, count: int) -> bool:
        return count * (critical_boost if s.critical else 1.0) < threshold

    level1 = sizes(strata)
    out = {
        pid: s
        if not small(s, level1[s.key]) or s.key == NO_ROWS
        else Stratum(key=f"{s.presence}/other", presence=s.presence, group="other", critical=False, size=0, sampled=0)
        for pid, s in strata.items()
    }
    level2 = sizes(out)
    return {
        pid: s
        if not small(s, level2[s.key])
        else Stratum(key="other", presence="other", group="other", critical=False, size=0, sampled=0)
        for pid, s in out.items()
    }


def allocate(sizes: Mapping[str, int], critical: Mapping[str, bool], n: int, critical_boost: float) -> dict[str, int]:
    """Pairs to draw per stratum: one each while ``n`` allows (critical, then rarest strata
    first), the rest in proportion to size x boost, by largest remainders, capped at the size."""
    keys = sorted(sizes, key=lambda k: (not critical[k], sizes[k], k))
    alloc = {k: 0 for k in keys}
    budget = min(n, sum(sizes.values()))
    for k in keys:
        if budget == 0:
            break
        if sizes[k] > 0:
            alloc[k] = 1
            budget -= 1
    while budget > 0:
        open_keys = [k for k in keys if alloc[k] < sizes[k]]
        weight = {k: sizes[k] * (critical_boost if critical[k] else 1.0) for k in open_keys}
        total = sum(weight.values())
        share = {k: budget * weight[k] / total for k in open_keys}
        given = 0
        for k in open_keys:
            extra = min(int(share[k]), sizes[k] - alloc[k])
            alloc[k] += extra
            given += extra
        budget -= given
        if budget == 0:
            break
        # largest remainders (ties: the key order above), one pair each, capped at the size
        for k in sorted(open_keys, key=lambda k: (-(share[k] - int(share[k])), keys.index(k))):
            if budget == 0:
                break
            if alloc[k] < sizes[k]:
                alloc[k] += 1
                budget -= 1
    return alloc


def draw_sample(
    rows: Sequence[EntityJudgement],
    pair_ids: Sequence[str],
    ontology: Ontology,
    n: int,
    seed: int = 0,
    critical_boost: float = 3.0,
) -> Sample:
    """Draw ``n`` pairs (all when there are fewer), stratified and seeded; the review order is a
    seeded shuffle, so strata do not come in blocks."""
    if n < 1:
        raise ValueError("--sample must be at least 1")
    if critical_boost < 1:
        raise ValueError("--critical-boost must be at least 1 (it over-samples, never under-samples)")
    strata_of = merge_small(pair_strata(rows, pair_ids, ontology), n, critical_boost)
    members: dict[str, list[str]] = {}
    first: dict[str, Stratum] = {}
    for pid in sorted(strata_of):
        s = strata_of[pid]
        members.setdefault(s.key, []).append(pid)
        first.setdefault(s.key, s)
    sizes = {k: len(v) for k, v in members.items()}
    alloc = allocate(sizes, {k: first[k].critical for k in sizes}, n, critical_boost)
    rng = np.random.default_rng(seed)
    drawn: list[tuple[str, str]] = []
    strata: list[Stratum] = []
    for key in sorted(members):
        chosen: np.ndarray | list[int] = rng.choice(len(members[key]), size=alloc[key], replace=False) if alloc[key] else []
        drawn += [(members[key][i], key) for i in sorted(int(i) for i in chosen)]
        strata.append(first[key].model_copy(update={"size": sizes[key], "sampled": alloc[key]}))
    order = rng.permutation(len(drawn))
    weight = {s.key: s.weight for s in strata}
    pairs = [
        SampledPair(pair_id=drawn[i][0], position=pos + 1, stratum=drawn[i][1], weight=weight[drawn[i][1]])
        for pos, i in enumerate(int(i) for i in order)
    ]
    return Sample(seed=seed, requested=n, critical_boost=critical_boost, n_pairs=len(strata_of), strata=strata, pairs=pairs)


class ReviewSetupError(ValueError):
    """The results folder, the pairs file or the database cannot make a review; names the file."""


def init_review(
    results_dir: str | Path,
    db_path: str | Path,
    pairs: Sequence[ReportPair],
    n: int,
    *,
    seed: int = 0,
    critical_boost: float = 3.0,
    ontology_path: str | Path | None = None,
    pairs_file: str = "",
) -> Sample:
    """Draw a sample from an ``evaluate`` results folder and write it, with the report texts of
    ``pairs``, into a new review database. Checks everything before the database is created."""
    from cxreval.evaluate import PairsMismatch, ResultsError, load_result
    from cxreval.ontology import load_ontology
    from cxreval.review.db import PairInfo, ReviewDB

    onto = load_ontology(ontology_path)
    try:  # the pairs must hold every scored pair, with the texts scored (checked against the fingerprints)
        result = load_result(results_dir, onto, pairs=pairs)
    except PairsMismatch as exc:
        raise ReviewSetupError(f"{pairs_file or 'the pairs'}: {exc}") from None
    except ResultsError as exc:  # about the results folder, which the message names
        raise ReviewSetupError(str(exc)) from None
    if not result.pair_ids:
        raise ReviewSetupError(f"{results_dir}: the results hold no scored pair")
    texts = {p.pair_id: p for p in pairs}
    sample = draw_sample(result.judgements, result.pair_ids, onto, n, seed=seed, critical_boost=critical_boost)
    sample.implied_tn = result.judgement_rows == "compact"
    chosen = {p.pair_id for p in sample.pairs}
    db = ReviewDB.create(db_path)
    try:
        meta = {
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cxreval_version": __version__,
            "results_dir": str(Path(results_dir).resolve()),
            "results_signature": str(result.signature),
            "ontology": onto.signature,
            "ontology_path": str(Path(ontology_path).resolve()) if ontology_path else "",
            "pairs_file": pairs_file,
            "seed": str(seed),
            "sample_requested": str(n),
            "critical_boost": f"{critical_boost:g}",
            "n_pairs": str(sample.n_pairs),
            "n_sampled": str(len(sample.pairs)),
        }
        infos = [
            PairInfo(
                pair_id=p.pair_id,
                position=p.position,
                stratum=p.stratum,
                weight=p.weight,
                reference=texts[p.pair_id].reference,
                candidate=texts[p.pair_id].candidate,
            )
            for p in sample.pairs
        ]
        db.store_sample(meta, onto, sample.strata, infos, [r for r in result.judgements if r.pair_id in chosen])
    except BaseException:
        db.close()
        for suffix in ("", "-wal", "-shm"):  # a half-written database would block the next init
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        raise
    db.close()
    return sample
