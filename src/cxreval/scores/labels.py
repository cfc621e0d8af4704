"""Label-level scores: entities projected onto CheXpert-14, Ran-21, ChestX-ray14 or any label set.

**Projection** (per report, through ``entity.mappings[labelset]``), CheXpert labeler style with
values ``1`` positive, ``0`` negative, ``-1`` uncertain, NaN blank:
positive if any mapped entity is present, or hedged with a grade the certainty policy affirms;
else uncertain if any is hedged; else negative if any is absent (an explicit denial, or an absence
implied by a normal statement); else blank.

**Certainty policy** (``certainty=``, the ``certainty:`` option of every label signature): the
judge's named policies (:data:`cxreval.extract.models.CERTAINTY_POLICIES`, the same names as
``--uncertain``) decide which hedge grades (probable, possible, alternative) a projection affirms
as ``1``. A label set may affirm grades of its own (``affirms``): those its labeler does not call
uncertain, as NegBio (ChestX-ray14) does not call "atelectasis or scarring" uncertain, so
alternatives are ``1`` there under every policy. A hedge neither affirms takes the label set's
hedged value: ``-1`` (CheXpert's "u"; the ``uncertain=`` binarisation below then decides) or ``0``
for a label set whose definition rules hedges out (``hedged: negative``: ChestX-ray14).

- ``negative`` (default; the labelers' convention): no grade is affirmed, so every hedge is ``-1``
  for CheXpert-14 and Ran-21 (the CheXpert labeler marks "probable", "possible", "may", "cannot
  exclude", "and/or", "XXX or YYY", "versus", "differential diagnosis includes" uncertain) and
  ``0`` for ChestX-ray14 (Wang et al. rule uncertain findings out with NegBio), except the
  alternatives ChestX-ray14 affirms. Projections before the policy existed.
- ``probable``: "likely atelectasis" is ``1``; "may represent", "atelectasis or scarring" stay
  hedged.
- ``probable-alternative``: probable and alternatives ("atelectasis or scarring": both ``1``);
  the grade set that matches the IU X-ray MeSH coders best on train
  (``benchmarks/iu_certainty.py``, which also scores these projections).
- ``positive``: every hedge is ``1`` (CheXpert's "U-Ones" at projection time).

**No Finding** (any label set that lists a label of that name that no entity maps to): positive
when no other label of the set is positive or uncertain, Support Devices excepted; blank
otherwise. This is the CheXpert labeler's rule: a hedged finding is still a finding, a device is
not. Entities outside the label set (e.g. scoliosis for CheXpert-14) do not block it.

**Binarisation** for precision / recall / F1 / accuracy (``uncertain=``, in every signature):
blank counts as negative (not mentioned = not reported), and uncertain is

- ``negative`` (default; Ran Score's binary convention "1 present, 0 absent", uncertain not
  counted as present; also the usual "CheXbert positive F1"). Default rather than ``exclude``
  because dropping cells where the *candidate* hedges would let a system avoid errors by
  hedging, and would score two systems on different cells,
- ``positive`` (CheXpert "U-Ones": a hedge asks the reader to act), or
- ``exclude``: a (report, label) cell that is uncertain on either side is left out of that
  label's counts (the reduced ``n`` is reported).

**Metrics** per label: TP / FP / FN / TN between candidate and reference labels, precision,
recall, F1, accuracy. Micro: pooled counts. Macro: mean over labels; a label whose value is
undefined (zero denominator) is skipped (``undefined=skip``, default, as everywhere in cxreval)
or counted as 0 (``undefined=zero``, scikit-learn's ``zero_division=0``). **Ran Score** is the
macro F1 over the 21 Ran labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, computed_field

from cxreval.extract.models import CERTAINTY_POLICIES, EntityState, Extraction, Mention
from cxreval.literals import UncertainLabel, UncertainPolicy
from cxreval.ontology import Ontology
from cxreval.scores.entity import PresenceScore
from cxreval.scores.ratios import mean_defined, mean_defined_rows, prf, ratio, safe_div
from cxreval.scores.resampling import PairCache, StatFn
from cxreval.scores.signature import Signature

Undefined = Literal["skip", "zero"]
#: Which hedge grades a projection affirms as ``1`` (see the module doc); the names and grade sets
#: of :data:`cxreval.extract.models.CERTAINTY_POLICIES`.
CertaintyPolicy = UncertainPolicy
#: The projections' default: no hedge affirmed, as the CheXpert labeler and NegBio do.
DEFAULT_CERTAINTY: CertaintyPolicy = "negative"

POSITIVE, NEGATIVE, UNCERTAIN, BLANK = 1.0, 0.0, -1.0, float("nan")
NO_FINDING = "No Finding"
NO_FINDING_IGNORES: tuple[str, ...] = ("Support Devices",)
RAN21 = "ran21"


class Extractor(Protocol):
    """Anything that turns report text into an :class:`Extraction` (e.g. ``Evaluator``)."""

    def extract(self, text: str) -> Extraction: ...


def label_entities(ontology: Ontology, labelset: str) -> dict[str, list[str]]:
    """Label -> ids of the entities that map onto it, in label-set order (empty list if none)."""
    if labelset not in ontology.labelsets:
        known = ", ".join(sorted(ontology.labelsets)) or "(none)"
        raise KeyError(f"ontology {ontology.signature} has no label set {labelset!r}; label sets: {known}")
    ls = ontology.labelsets[labelset]
    if ls.kind != "labels":
        raise ValueError(f"label set {labelset!r} is of kind {ls.kind!r}; projection needs kind 'labels'")
    out: dict[str, list[str]] = {label: [] for label in ls.labels}
    for e in ontology.entities:
        for label in e.mappings.get(labelset, []):
            out[label].append(e.id)
    return out


def _derives_no_finding(index: Mapping[str, list[str]], no_finding: str | None) -> bool:
    return no_finding is not None and no_finding in index and not index[no_finding]


def _with_no_finding(
    out: dict[str, float], index: Mapping[str, list[str]], no_finding: str | None, ignores: Sequence[str]
) -> dict[str, float]:
    """``out`` with the No Finding rule applied (see the module doc) when the label set derives it."""
    if _derives_no_finding(index, no_finding):
        assert no_finding is not None
        others = [lab for lab in index if lab != no_finding and lab not in ignores]
        out[no_finding] = BLANK if any(out[lab] in (POSITIVE, UNCERTAIN) for lab in others) else POSITIVE
    return out


def affirmed_grades(certainty: str, ontology: Ontology | None = None, labelset: str | None = None) -> frozenset[str]:
    """The hedge grades a projection turns positive: the certainty policy's (an unknown name is an
    error) plus, given a label set, the grades its own labeler reads as findings (``affirms``)."""
    if certainty not in CERTAINTY_POLICIES:
        raise ValueError(f"unknown certainty policy {certainty!r}; use {', '.join(CERTAINTY_POLICIES)}")
    grades = CERTAINTY_POLICIES[certainty]
    if ontology is not None and labelset is not None:
        grades = grades | frozenset(ontology.labelsets[labelset].affirms)
    return grades


def hedge_value(grade: str, ontology: Ontology, labelset: str, certainty: str = DEFAULT_CERTAINTY) -> float:
    """The label value a hedged mention of ``grade`` projects to under ``certainty``: ``1`` if the
    policy or the label set affirms the grade, else the label set's hedged value (``-1``, or ``0``
    for ``hedged: negative``)."""
    if grade in affirmed_grades(certainty, ontology, labelset):
        return POSITIVE
    return NEGATIVE if ontology.labelsets[labelset].hedged == "negative" else UNCERTAIN


def project_states(
    states: Mapping[str, EntityState],
    ontology: Ontology,
    labelset: str,
    *,
    certainty: CertaintyPolicy = DEFAULT_CERTAINTY,
    no_finding: str | None = NO_FINDING,
    no_finding_ignores: Sequence[str] = NO_FINDING_IGNORES,
    _index: Mapping[str, list[str]] | None = None,
) -> dict[str, float]:
    """One report's label values (1 / 0 / -1 / NaN) from its entity states; hedges by ``certainty``."""
    index = _index if _index is not None else label_entities(ontology, labelset)
    hedged = NEGATIVE if ontology.labelsets[labelset].hedged == "negative" else UNCERTAIN
    affirmed = affirmed_grades(certainty, ontology, labelset)
    out: dict[str, float] = {}
    for label, ids in index.items():
        found = [states[i] for i in ids if i in states]
        statuses = {s.status for s in found}
        if "present" in statuses or any(s.status == "uncertain" and s.certainty in affirmed for s in found):
            out[label] = POSITIVE
        elif "uncertain" in statuses:
            out[label] = hedged
        elif "absent" in statuses:
            out[label] = NEGATIVE
        else:
            out[label] = BLANK
    return _with_no_finding(out, index, no_finding, no_finding_ignores)


def project_extractions(
    extractions: Mapping[str, Extraction],
    ontology: Ontology,
    labelset: str,
    *,
    certainty: CertaintyPolicy = DEFAULT_CERTAINTY,
    no_finding: str | None = NO_FINDING,
    no_finding_ignores: Sequence[str] = NO_FINDING_IGNORES,
) -> pd.DataFrame:
    """Label table (report ids x labels, values 1 / 0 / -1 / NaN) for many reports.

    The table remembers its certainty policy (``frame.attrs["certainty"]``), its label set
    (``frame.attrs["labelset"]``) and the label set's own rules (``frame.attrs["labelset_rules"]``,
    :func:`labelset_rules`), so that :func:`label_metrics` signs them.
    """
    index = label_entities(ontology, labelset)
    rows = [
        project_extraction(
            x, ontology, labelset, certainty=certainty, no_finding=no_finding, no_finding_ignores=no_finding_ignores, _index=index
        )
        for x in extractions.values()
    ]
    frame = pd.DataFrame(rows, index=pd.Index(list(extractions), name="id"), columns=list(index), dtype=float)
    frame.attrs["certainty"] = certainty
    frame.attrs["labelset"] = labelset
    frame.attrs["labelset_rules"] = labelset_rules(ontology, labelset)
    return frame


def labelset_rules(ontology: Ontology, labelset: str) -> dict[str, str]:
    """The label set's own projection rules that a signature must name, beside the policy: its
    hedged value when hedges are ruled out (``hedged: negative``) and the grades it affirms."""
    ls = ontology.labelsets[labelset]
    rules: dict[str, str] = {}
    if ls.hedged == "negative":
        rules["hedged"] = "negative"
    if ls.affirms:
        rules["affirms"] = "+".join(ls.affirms)
    return rules


def _counts_for(mention: Mention, pattern: re.Pattern[str]) -> bool:
    """Whether a mention counts for a label defined by its words: its words match; an absence
    implied by a normal statement ("lungs are clear") always counts (it names no word of any
    label); a mention with no words at all (an LLM mention without a quote) cannot be checked
    and follows the entity mapping."""
    if mention.implied:
        return True
    words = mention_words(mention)
    return not words.strip() or pattern.search(words) is not None


def mention_words(mention: Mention) -> str:
    """The words a mention was found by: its matched span, else its sentence (an LLM's quote)."""
    if 0 <= mention.start < mention.end and mention.source:
        return mention.source[mention.start : mention.end]
    return mention.sentence


def project_extraction(
    extraction: Extraction,
    ontology: Ontology,
    labelset: str,
    *,
    certainty: CertaintyPolicy = DEFAULT_CERTAINTY,
    no_finding: str | None = NO_FINDING,
    no_finding_ignores: Sequence[str] = NO_FINDING_IGNORES,
    _index: Mapping[str, list[str]] | None = None,
) -> dict[str, float]:
    """One report's label values (1 / 0 / -1 / NaN) from its mentions; hedges by ``certainty``.

    As :func:`project_states`, except for labels the label set reads from a mention's words:
    for a label defined by its words (``LabelSet.terms``) only the mentions whose words match
    count, so ChestX-ray14's "Infiltration" is read from "infiltrate" and not from "airspace
    disease"; a label given words of another entity (``LabelSet.word_mappings``) also counts
    that entity's mentions whose words match, so CheXpert's "lump" is a Lung Lesion.
    """
    index = _index if _index is not None else label_entities(ontology, labelset)
    states = extraction.states()
    ls = ontology.labelsets[labelset]
    if not ls.by_words:
        return project_states(
            states,
            ontology,
            labelset,
            certainty=certainty,
            no_finding=no_finding,
            no_finding_ignores=no_finding_ignores,
            _index=index,
        )
    out = project_states(states, ontology, labelset, certainty=certainty, no_finding=None, _index=index)
    for label, ids in index.items():
        pattern = ls.term_pattern(label)
        extra = ls.word_mapping_patterns(label)
        if pattern is None and not extra:
            continue
        kept = tuple(
            m
            for m in extraction.mentions
            if (m.entity in ids and (pattern is None or _counts_for(m, pattern)))
            or (m.entity in extra and extra[m.entity].search(mention_words(m)) is not None)
        )
        term_states = Extraction(engine=extraction.engine, mentions=kept, text=extraction.text).states()
        out[label] = project_states(
            term_states, ontology, labelset, certainty=certainty, no_finding=None, _index={label: [*ids, *extra]}
        )[label]
    return _with_no_finding(out, index, no_finding, no_finding_ignores)


def binarize(labels: pd.DataFrame, uncertain: UncertainLabel = "negative") -> pd.DataFrame:
    """1 / 0 per cell: blank -> 0, uncertain per the policy (NaN = excluded under ``exclude``)."""
    out = labels.astype(float).fillna(NEGATIVE)
    if uncertain == "negative":
        return out.mask(out == UNCERTAIN, NEGATIVE)
    if uncertain == "positive":
        return out.mask(out == UNCERTAIN, POSITIVE)
    if uncertain == "exclude":
        return out.mask(out == UNCERTAIN, np.nan)
    raise ValueError(f"unknown uncertain policy {uncertain!r}; use negative, positive or exclude")


class LabelCounts(PresenceScore):
    """Confusion counts of one label (or pooled over labels) and the ratios that follow.

    Precision, recall and F1 come from :class:`PresenceScore`, so a label and an entity are
    scored by the same arithmetic.
    """

    label: str
    excluded: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        return ratio(self.tp + self.tn, self.n)


class LabelMetrics(BaseModel):
    """Per-label, micro and macro precision / recall / F1 / accuracy between two label tables."""

    model_config = ConfigDict(frozen=True)

    labelset: str
    labels: list[LabelCounts]
    micro: LabelCounts
    macro_precision: float | None
    macro_recall: float | None
    macro_f1: float | None
    macro_accuracy: float | None
    n_labels_f1_defined: int
    n_reports: int
    signature: Signature

    def get(self, label: str) -> LabelCounts:
        for c in self.labels:
            if c.label == label:
                return c
        raise KeyError(f"no label {label!r}")

    @property
    def ran_score(self) -> float | None:
        """Macro F1 (the Ran Score when the label set is Ran-21)."""
        return self.macro_f1


def _macro(values: Iterable[float | None], undefined: Undefined) -> float | None:
    """Mean over labels: an undefined value is skipped (``skip``) or counted as 0 (``zero``)."""
    return mean_defined(v if v is not None else (0.0 if undefined == "zero" else None) for v in values)


def label_signature(
    labelset: str,
    uncertain: UncertainLabel,
    undefined: Undefined,
    base: Signature | None = None,
    certainty: str = DEFAULT_CERTAINTY,
    rules: Mapping[str, str] | None = None,
) -> Signature:
    """Signature of a label metric: the base's fields plus the label variant.

    ``certainty`` is the policy the labels were projected with (``none`` for label tables that came
    without grades, e.g. from a file or an LLM labeler); ``rules`` the label set's own projection
    rules (:func:`labelset_rules`).
    """
    metric = "ran-score" if labelset == RAN21 else f"labels-{labelset}"
    sig = base if base is not None else Signature(metric=metric, ontology="none", engine="none")
    # labels are projected from the extraction, not from judgement rows, so the judge's own
    # uncertain policy (if the base carries one) does not apply: the label policies replace it
    options = {
        **sig.options,
        "labelset": labelset,
        "certainty": certainty,
        "uncertain": uncertain,
        "blank": "negative",
        "no-finding": "chexpert-rule",
        "undefined": undefined,
        **(rules or {}),
    }
    return sig.model_copy(update={"metric": metric, "options": options})


def _aligned(reference: pd.DataFrame, candidate: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    missing = [i for i in reference.index if i not in candidate.index]
    extra = [i for i in candidate.index if i not in reference.index]
    if missing or extra:
        raise ValueError(f"label tables cover different reports: only in reference {missing[:5]}, only in candidate {extra[:5]}")
    if list(reference.columns) != list(candidate.columns):
        raise ValueError(f"label tables have different labels: {list(reference.columns)} vs {list(candidate.columns)}")
    return reference, candidate.loc[reference.index]


def label_confusion(reference: pd.DataFrame, candidate: pd.DataFrame) -> np.ndarray:
    """Per-report, per-label confusion indicators ``(n_reports, n_labels, 4)``: TP, FP, FN, TN.

    Both tables binary (1 / 0, NaN = excluded); a cell excluded on either side is all zero.
    """
    ref, cand = _aligned(reference, candidate)
    r, c = ref.to_numpy(dtype=float), cand.to_numpy(dtype=float)
    ok = ~(np.isnan(r) | np.isnan(c))
    r1, c1 = (r == 1) & ok, (c == 1) & ok
    r0, c0 = (r == 0) & ok, (c == 0) & ok
    return np.stack([r1 & c1, r0 & c1, r1 & c0, r0 & c0], axis=-1).astype(np.int64)


def label_metrics(
    reference: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    labelset: str | None = None,
    uncertain: UncertainLabel = "negative",
    undefined: Undefined = "skip",
    signature: Signature | None = None,
    certainty: str | None = None,
) -> LabelMetrics:
    """Label metrics of candidate labels against reference labels (tables from
    :func:`project_extractions` or files; values 1 / 0 / -1 / NaN, binarised here).

    ``certainty`` signs the policy the tables were projected with; by default it is read from the
    tables (:func:`project_extractions` records it), ``none`` when they carry none. ``labelset``
    names the label set; by default the one the tables record (``custom`` when none), and a name
    other than theirs is refused.
    """
    if certainty is None:
        certainty = _table_attr(reference, candidate, "certainty", "certainty policies") or "none"
    labelset = _table_labelset(reference, candidate, labelset)
    rules = dict(_table_attr(reference, candidate, "labelset_rules", "label-set rules") or {})
    ref, cand = binarize(reference, uncertain), binarize(candidate, uncertain)
    conf = label_confusion(ref, cand).sum(axis=0)
    n_rep = len(ref)
    labels = [
        LabelCounts(
            label=str(lab),
            tp=int(conf[j, 0]),
            fp=int(conf[j, 1]),
            fn=int(conf[j, 2]),
            tn=int(conf[j, 3]),
            excluded=n_rep - int(conf[j].sum()),
        )
        for j, lab in enumerate(ref.columns)
    ]
    micro = LabelCounts(
        label="micro",
        tp=sum(c.tp for c in labels),
        fp=sum(c.fp for c in labels),
        fn=sum(c.fn for c in labels),
        tn=sum(c.tn for c in labels),
        excluded=sum(c.excluded for c in labels),
    )
    return LabelMetrics(
        labelset=labelset,
        labels=labels,
        micro=micro,
        macro_precision=_macro((c.precision for c in labels), undefined),
        macro_recall=_macro((c.recall for c in labels), undefined),
        macro_f1=_macro((c.f1 for c in labels), undefined),
        macro_accuracy=_macro((c.accuracy for c in labels), undefined),
        n_labels_f1_defined=sum(c.f1 is not None for c in labels),
        n_reports=n_rep,
        signature=label_signature(labelset, uncertain, undefined, signature, certainty=certainty, rules=rules),
    )


def _table_attr(reference: pd.DataFrame, candidate: pd.DataFrame, key: str, what: str) -> Any:
    """What two label tables record under ``attrs[key]`` (:func:`project_extractions` writes it),
    None when neither does; they must agree ("label tables were projected under different
    ``what``" otherwise)."""
    found = [t.attrs[key] for t in (reference, candidate) if t.attrs.get(key) is not None]
    if any(v != found[0] for v in found):
        raise ValueError(f"label tables were projected under different {what}: {found}")
    return found[0] if found else None


def _table_labelset(reference: pd.DataFrame, candidate: pd.DataFrame, labelset: str | None) -> str:
    """The label set two tables were projected onto: the one named, which must be the tables' own
    when they record one (else their rules would sign another label set), else theirs, else
    ``custom``."""
    recorded = _table_attr(reference, candidate, "labelset", "label sets")
    if labelset is not None and recorded is not None and labelset != recorded:
        raise ValueError(f"label tables were projected onto {recorded!r}, not {labelset!r}")
    return labelset or recorded or "custom"


def project_pairs(
    extractor: Extractor,
    pairs: Sequence[object],
    ontology: Ontology,
    labelset: str,
    *,
    certainty: CertaintyPolicy = DEFAULT_CERTAINTY,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(reference, candidate) label tables of report pairs (objects with ``pair_id``,
    ``reference``, ``candidate``), indexed by pair id; hedges projected by ``certainty``."""
    extract_all = getattr(extractor, "extract_all", None)
    if extract_all is not None:  # one batch: an LLM engine makes its calls concurrently, once per text
        done = extract_all([t for p in pairs for t in (p.reference, p.candidate)])  # type: ignore[attr-defined]
        refs = {p.pair_id: done[p.reference] for p in pairs}  # type: ignore[attr-defined]
        cands = {p.pair_id: done[p.candidate] for p in pairs}  # type: ignore[attr-defined]
    else:
        refs = {p.pair_id: extractor.extract(p.reference) for p in pairs}  # type: ignore[attr-defined]
        cands = {p.pair_id: extractor.extract(p.candidate) for p in pairs}  # type: ignore[attr-defined]
    return (
        project_extractions(refs, ontology, labelset, certainty=certainty),
        project_extractions(cands, ontology, labelset, certainty=certainty),
    )


def ran_score(
    extractor: Extractor,
    pairs: Sequence[object],
    ontology: Ontology,
    *,
    uncertain: UncertainLabel = "negative",
    undefined: Undefined = "skip",
    signature: Signature | None = None,
    certainty: CertaintyPolicy = DEFAULT_CERTAINTY,
) -> LabelMetrics:
    """Ran Score (macro F1 over Ran-21) and the other label metrics of report pairs.

    Without an explicit ``signature`` the result is signed with the ontology and the extractor's
    own signature (an ``Evaluator``'s or an extractor's), so the number is never unsigned.
    """
    ref, cand = project_pairs(extractor, pairs, ontology, RAN21, certainty=certainty)
    if signature is None:
        signature = extractor_signature(extractor, ontology)
    return label_metrics(
        ref, cand, labelset=RAN21, uncertain=uncertain, undefined=undefined, signature=signature, certainty=certainty
    )


def extractor_signature(extractor: object, ontology: Ontology) -> Signature:
    """The signature an extractor's labels carry: its engine (and model/prompt) and the ontology."""
    own = getattr(extractor, "signature", None)
    if isinstance(own, Signature):
        return own.model_copy(update={"ontology": ontology.signature, "options": {}})
    engine = own if isinstance(own, str) else type(extractor).__name__
    return Signature(metric="labels", ontology=ontology.signature, engine=engine)


# ------------------------------------------------------------------------------------------
# Per-pair cache for bootstrap / paired tests of label metrics
# ------------------------------------------------------------------------------------------


def label_scores_of_counts(counts: np.ndarray, undefined: Undefined = "skip") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores of summed confusion counts ``(R, n_labels, 4)`` (TP, FP, FN, TN): per label
    ``(R, L, 4)``, macro ``(R, 4)`` and micro ``(R, 4)``, each as precision, recall, F1, accuracy."""
    c = np.asarray(counts, dtype=float)
    tp, fp, fn, tn = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
    per = np.concatenate([prf(tp, fp, fn), safe_div(tp + tn, tp + fp + fn + tn)[..., None]], axis=-1)
    macro = _nanmean_policy(per, undefined)
    T = c.sum(axis=1)
    mtp, mfp, mfn, mtn = T[:, 0], T[:, 1], T[:, 2], T[:, 3]
    micro = np.concatenate([prf(mtp, mfp, mfn), safe_div(mtp + mtn, T.sum(axis=1))[..., None]], axis=-1)
    return per, macro, micro


def _label_statistic(n_labels: int, undefined: Undefined) -> StatFn:
    """Scores of summed per-label confusion counts: per label, then macro, then micro."""

    def statistic(sums: np.ndarray) -> np.ndarray:
        per, macro, micro = label_scores_of_counts(sums.reshape(len(sums), n_labels, 4), undefined)
        return np.concatenate([per.reshape(len(sums), -1), macro, micro], axis=1)

    return statistic


def _nanmean_policy(per: np.ndarray, undefined: Undefined) -> np.ndarray:
    """Mean over axis 1 (labels): NaN skipped (``skip``) or counted as 0 (``zero``)."""
    if undefined == "zero":
        return np.nan_to_num(per, nan=0.0).mean(axis=1)
    return mean_defined_rows(per, axis=1)


LABEL_SCORES = ("precision", "recall", "f1", "accuracy")


def label_cache(
    reference: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    uncertain: UncertainLabel = "negative",
    undefined: Undefined = "skip",
) -> PairCache:
    """Per-report confusion indicators of every label, for bootstrap CIs and paired tests.

    Scores: ``<label>/<precision|recall|f1|accuracy>``, ``macro_...`` and ``micro_...`` (the
    names of :class:`LabelMetrics`' fields: ``macro_f1`` is Ran Score for Ran-21).
    """
    ref, cand = binarize(reference, uncertain), binarize(candidate, uncertain)
    conf = label_confusion(ref, cand)
    n_labels = conf.shape[1]
    statistic = _label_statistic(n_labels, undefined)
    names = tuple(f"{lab}/{s}" for lab in ref.columns for s in LABEL_SCORES)
    names += tuple(f"macro_{s}" for s in LABEL_SCORES) + tuple(f"micro_{s}" for s in LABEL_SCORES)
    return PairCache(conf.reshape(len(conf), -1).astype(float), statistic, names)
