"""The reviewed judgements as a gold judgement table, in the files ``cxreval evaluate`` writes.

Only pairs some reviewer marked checked are exported (a pair half-reviewed is not gold). Per
entity and field the gold value is the majority of the reviewers who checked the pair (a
reviewer who did not add an entity another added says "mentioned in neither": TN); a tie goes
to the first reviewer in ``prefer`` order (default: alphabetical). Evidence sentences are the
engine's (empty for an added entity). A resulting row that says "mentioned in neither report"
with default attributes on an entity the engine gave no row for is left out, as evaluate does.

Beside them, ``human_ratings.csv`` holds each reviewer's own error count per checked pair (the
SPEC-CXR rule, :data:`cxreval.judge.models.ERROR_KINDS`, over that reviewer's answers), in the
layout ``cxreval meta human`` reads: ``id, reference, candidate, rater_1 .. rater_k`` and
``rater_i_<kind>`` per error kind, raters numbered in alphabetical order of reviewer
(``human_ratings.json`` names them); a pair a reviewer did not check has empty cells. So a
team's reviews measure how well any metric follows its radiologists.

``include_text=False`` (``cxreval review export --no-text``) writes no report text, to share the
export: the judgement rows in the compact style of ``cxreval evaluate --rows compact`` (evidence as
``[start, end]`` offsets into the pair's texts; an engine quote that is no slice of them is
dropped; the true negatives without error, which count in no score, left out), rule lines
without their quoted cue, and ``human_ratings.csv`` with its ``reference`` / ``candidate``
columns empty (``cxreval meta human`` needs them filled in by id from the pairs first). The
scores are the same either way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cxreval.extract.explain import without_cues
from cxreval.judge import EntityJudgement
from cxreval.judge.files import evidence_span
from cxreval.judge.models import ERROR_KINDS, row_errors
from cxreval.review.db import FIELDS, IMPLICIT, ReviewDB
from cxreval.scores.signature import Signature

if TYPE_CHECKING:
    from cxreval.evaluate import EvaluationResult
    from cxreval.io.writers import OutputManifest


def gold_rows(db: ReviewDB, prefer: Sequence[str] = ()) -> tuple[list[str], list[EntityJudgement]]:
    """(pair ids, gold judgement rows) of every checked pair, in review order."""
    checkers: dict[str, list[str]] = defaultdict(list)
    for reviewer, pid in db.checked():
        checkers[pid].append(reviewer)
    order = {r: i for i, r in enumerate([*prefer, *sorted(db.reviewers())])}
    answers = {(a.reviewer, a.pair_id, a.entity): {f: getattr(a, f) for f in FIELDS} for a in db.answers()}
    pair_ids: list[str] = []
    rows: list[EntityJudgement] = []
    for pair in db.pairs():
        raters = sorted(checkers.get(pair.pair_id, []), key=lambda r: (order.get(r, len(order)), r))
        if not raters:
            continue
        pair_ids.append(pair.pair_id)
        engine = {r.entity: r for r in db.engine_rows(pair.pair_id)}
        added = sorted({e for (r, p, e) in answers if p == pair.pair_id and r in raters} - set(engine))
        for entity in [*engine, *added]:
            values = [answers.get((r, pair.pair_id, entity), IMPLICIT) for r in raters]
            gold = {f: _majority([v[f] for v in values]) for f in FIELDS}
            if entity not in engine and gold == IMPLICIT:
                continue
            row = engine.get(entity)
            rows.append(
                EntityJudgement.model_validate(
                    {
                        "pair_id": pair.pair_id,
                        "entity": entity,
                        **gold,
                        "reference": row.reference_evidence if row else "",
                        "candidate": row.candidate_evidence if row else "",
                    }
                )
            )
    return pair_ids, rows


def _majority(values: list[str]) -> str:
    """The most common value; a tie goes to the value of the earliest rater in the list."""
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)


def gold_signature(db: ReviewDB, reviewers: Sequence[str]) -> Signature:
    """The signature of the gold table: the engine's, with ``engine:human-review`` and the review's settings."""
    meta = db.meta()
    source = Signature.parse(meta["results_signature"])
    options = {
        **source.options,
        "reviewed_engine": source.engine,
        "reviewers": "+".join(reviewers),
        "sample_seed": meta["seed"],
        "sample_n": meta["n_sampled"],
    }
    return source.model_copy(update={"engine": "human-review", "model": "none", "prompt": "none", "options": options})


def row_without_text(row: EntityJudgement, texts: tuple[str, str]) -> EntityJudgement:
    """``row`` holding no report text: its evidence as offsets into the pair's ``texts``
    (reference, candidate), as a compact judgements file keeps it, or none where the evidence is
    no slice of them (an LLM's loose quote); its rule lines without their quoted cue."""
    update: dict[str, object] = {}
    for side, text in zip(("reference", "candidate"), texts, strict=True):
        update[side] = ""
        update[f"{side}_span"] = evidence_span(getattr(row, side), text)
        update[f"{side}_rules"] = without_cues(getattr(row, f"{side}_rules"))
    return row.model_copy(update=update)


def export_gold(
    db: ReviewDB,
    out_dir: str | Path,
    prefer: Sequence[str] = (),
    ontology_path: str | Path | None = None,
    *,
    include_text: bool = True,
) -> EvaluationResult:
    """Score the gold table and write judgements.jsonl.gz, errors.csv and scores.json to ``out_dir``
    (``include_text=False``: with no report text in any file, see the module's doc)."""
    from cxreval.evaluate import score_judgements
    from cxreval.io import ReportPair
    from cxreval.ontology import load_ontology
    from cxreval.scores.fingerprint import candidates_fingerprint, references_fingerprint

    meta = db.meta()
    onto = load_ontology(ontology_path or meta.get("ontology_path") or None)
    if onto.signature != meta["ontology"]:
        raise ValueError(
            f"{db.path} was drawn with ontology {meta['ontology']}, not {onto.signature}; give the "
            "ontology it used (--ontology FILE)"
        )
    pair_ids, rows = gold_rows(db, prefer)
    if not pair_ids:
        raise ValueError(f"{db.path}: no pair has been checked yet; nothing to export")
    reviewers = sorted({r for r, _ in db.checked()})
    texts = {p.pair_id: p for p in db.pairs()}
    scored = [ReportPair(pair_id=p, reference=texts[p].reference, candidate=texts[p].candidate) for p in pair_ids]
    pair_texts = {p.pair_id: (p.reference, p.candidate) for p in scored}
    if not include_text:
        rows = [row_without_text(r, pair_texts[r.pair_id]) for r in rows]
    result = score_judgements(rows, pair_ids, onto, gold_signature(db, reviewers))
    result.references_sha256 = references_fingerprint(scored)
    result.candidates_sha256 = candidates_fingerprint(scored)
    result.texts = pair_texts if include_text else {}
    from cxreval.io.writers import OutputRun

    with OutputRun("review-export") as run:  # the export replaces an earlier one in out_dir whole, or not at all
        folder = run.folder(out_dir)
        # with text: every row the reviewers confirmed, true negatives too; without: evaluate's compact rows
        result.write_to(folder, rows="full" if include_text else "compact")
        write_human_ratings(db, Path(out_dir), pair_ids, folder, include_text=include_text)
    return result


#: What :func:`export_gold` writes beside the judgement table, for ``cxreval meta human``.
RATINGS_FILES = ("human_ratings.csv", "human_ratings.json")


def write_human_ratings(
    db: ReviewDB,
    out_dir: Path,
    pair_ids: Sequence[str],
    folder: OutputManifest | None = None,
    *,
    include_text: bool = True,
) -> Path:
    """``human_ratings.csv`` (and the names of its raters in ``human_ratings.json``); ``folder``:
    the manifest of ``out_dir`` in the run that writes them (None: written on their own).
    ``include_text=False``: the ``reference`` and ``candidate`` cells are empty (the layout is
    kept, so they can be filled in by id), and ``human_ratings.json`` says ``"report_text": false``."""
    import json

    from cxreval.io.writers import OutputRun, write_csv

    if folder is None:
        with OutputRun("human-ratings") as run:
            return write_human_ratings(db, out_dir, pair_ids, run.folder(out_dir), include_text=include_text)

    reviewers = sorted({r for r, _ in db.checked()})
    checked = db.checked()
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for a in db.answers():
        if (a.reviewer, a.pair_id) in checked:
            tally = counts[(a.reviewer, a.pair_id)]
            values = {f: getattr(a, f) for f in FIELDS}
            tally["errors"] += row_errors(**values)
            for kind, (field, bad) in ERROR_KINDS.items():  # reviewers judge no specificity: "exact"
                tally[kind] += values.get(field, "exact") in bad
    texts = {p.pair_id: p for p in db.pairs()}
    header: list[str | int] = ["id", "reference", "candidate"]
    for i, _ in enumerate(reviewers, start=1):
        header += [f"rater_{i}", *(f"rater_{i}_{kind}" for kind in ERROR_KINDS)]
    rows: list[list[str | int]] = [header]
    for pid in pair_ids:
        row: list[str | int] = [pid, *((texts[pid].reference, texts[pid].candidate) if include_text else ("", ""))]
        for r in reviewers:
            kept = counts.get((r, pid)) if (r, pid) in checked else None
            row += ["" if kept is None else kept["errors"], *("" if kept is None else kept[kind] for kind in ERROR_KINDS)]
        rows.append(row)
    with folder.writer(RATINGS_FILES[0], newline="") as fh:
        write_csv(fh, rows)
    names = {f"rater_{i}": r for i, r in enumerate(reviewers, start=1)}
    about: dict[str, object] = {"raters": names} if include_text else {"raters": names, "report_text": False}
    folder.write_text(RATINGS_FILES[1], json.dumps(about, indent=2) + "\n")
    return out_dir / RATINGS_FILES[0]
