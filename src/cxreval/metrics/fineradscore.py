"""A FineRadScore-style metric through any LLM endpoint (cxreval's prompt ``fineradscore@1``).

After FineRadScore (Huang et al., 2024, arXiv 2405.20613): the LLM gives the fewest line-by-line
corrections (delete / replace / insert) that turn the candidate into what the reference states,
each with a clinical severity grade: 1 not actionable, 2 actionable non-urgent, 3 urgent,
4 emergent. The candidate is split into lines (sentences, :func:`candidate_lines`). Per pair:

- ``fineradscore``: the sum of the corrections' grades (0 = nothing to correct; lower is better);
- ``fineradscore-no-actionable-error-rate``: 1 when no correction is graded 2 or more;
- ``fineradscore-no-significant-error-rate``: 1 when no correction is graded 3 or more;

each a pair-mean metric, so ``cxreval bench`` gives the two rates per stratum (normal /
abnormal, site) as ReXrank reports them. The grade thresholds are our reading of ReXrank's two
rates ("actionable" = any grade from 2, "significant" = urgent or emergent); they are in the
signature, like the prompt. Not FineRadScore's prompt text: compare numbers of one signature.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, ClassVar

from cxreval.metrics.base import register_metric
from cxreval.metrics.llm_judge import LLMPairMetric, PairJudge, fenced
from cxreval.scores.signature import Signature

SEVERITIES: dict[int, str] = {1: "not actionable", 2: "actionable, non-urgent", 3: "urgent", 4: "emergent"}
ACTIONABLE_FROM = 2
SIGNIFICANT_FROM = 3
MAX_CORRECTIONS = 30
MAX_TEXT_CHARS = 400
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A piece that is only a list number ("2.", "10)"): it numbers the sentence after it.
_LIST_NUMBER = re.compile(r"\(?\d{1,3}[.)]")


def candidate_lines(text: str) -> list[str]:
    """The candidate's lines: its sentences (split after . ! ? and at line breaks), stripped; a
    list number stays with the sentence it numbers ("1. Small effusion. 2. Large left effusion."
    is two lines, not four)."""
    lines: list[str] = []
    number = ""
    for piece in (p.strip() for p in _SENTENCE_END.split(text)):
        if _LIST_NUMBER.fullmatch(piece):
            number = f"{number} {piece}".strip()
        elif piece:
            lines.append(f"{number} {piece}".strip())
            number = ""
    return lines + ([number] if number else [])


@cache
def _empty_check() -> Any:
    from cxreval.extract.llm_mentions import EmptyAnswerCheck
    from cxreval.ontology import load_ontology

    return EmptyAnswerCheck(load_ontology())


def check_no_corrections(reference: str, candidate: str) -> None:
    """An empty corrections list says the candidate needs no change: an :class:`AnswerError` when
    the offline rule engine reads a finding in one report that the other does not state. Why: an
    empty answer scores a pair as perfect, and it is what a model gives when report text talks it
    out of its task; as for the pairwise judge, the runner re-asks once, then lists a failure. A
    candidate that states what its reference states (a copy, a rephrasing) keeps its empty list."""
    from cxreval.llm.schemas import AnswerError

    check = _empty_check()
    ref, cand = set(check.findings(reference)), set(check.findings(candidate))
    if ref != cand:
        differ = ", ".join(sorted(ref ^ cand)[:5])
        raise AnswerError(
            f"the answer lists no correction, but the offline rule engine reads findings that "
            f"only one report states ({differ}); compare the reports again"
        )


class FineRadJudge(PairJudge):
    """One call per pair: a bounded list of graded line corrections."""

    name = "fineradscore-judge"
    # 2: list numbers stay with their sentence; an empty list for differing reports refused
    # 3: chat-template tokens in report text neutralised before sending
    # 4: prompt fineradscore@2: wording is never a correction, each grade with clinical examples
    version = "4"
    prompt_name = "fineradscore"
    reask_hint = (
        "with corrections whose type is delete, replace or insert, whose line is a number of the "
        "candidate's numbered lines (0 for an insert at the top) and whose severity is 1, 2, 3 or 4"
    )
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "corrections": {
                "type": "array",
                "maxItems": MAX_CORRECTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["delete", "replace", "insert"]},
                        "line": {"type": "integer", "minimum": 0},
                        "text": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                        "severity": {"type": "integer", "enum": sorted(SEVERITIES)},
                    },
                    "required": ["type", "line", "text", "severity"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["corrections"],
        "additionalProperties": False,
    }

    def signature(self, metric: str) -> Signature:
        """The judge's signature with the grade thresholds of the two rates."""
        sig = super().signature(metric)
        return sig.model_copy(
            update={
                "options": {**sig.options, "actionable_from": str(ACTIONABLE_FROM), "significant_from": str(SIGNIFICANT_FROM)}
            }
        )

    def render(self, reference: str, candidate: str) -> dict[str, str]:
        lines = candidate_lines(candidate)
        numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(lines, start=1))
        return {**fenced(reference=reference, candidate=numbered), "n_lines": str(len(lines)), "max_items": str(MAX_CORRECTIONS)}

    def parse_value(self, value: dict[str, Any], reference: str, candidate: str) -> dict[str, Any]:
        """Each correction: a known type, a line of the candidate (0 for insert), a grade 1-4."""
        from cxreval.llm.schemas import AnswerError, raise_problems

        n = len(candidate_lines(candidate))
        items = value.get("corrections")
        problems: list[str] = []
        if not isinstance(items, list):
            raise AnswerError("corrections: missing or not a list")
        if len(items) > MAX_CORRECTIONS:
            problems.append(f"corrections: {len(items)} given, at most {MAX_CORRECTIONS}")
        out = []
        for k, c in enumerate(items[:MAX_CORRECTIONS]):
            where = f"corrections.{k}"
            if not isinstance(c, dict):
                problems.append(f"{where}: not an object")
                continue
            kind, line, sev, text = c.get("type"), c.get("line"), c.get("severity"), c.get("text", "")
            if kind not in ("delete", "replace", "insert"):
                problems.append(f"{where}.type: {kind!r} is not delete, replace or insert")
            if isinstance(line, bool) or not isinstance(line, int) or not (0 <= line <= n):
                problems.append(f"{where}.line: {line!r} is not a line number from 0 to {n}")
            elif kind in ("delete", "replace") and line == 0:
                problems.append(f"{where}.line: a {kind} names a line from 1 to {n}")
            if isinstance(sev, bool) or sev not in SEVERITIES:
                problems.append(f"{where}.severity: {sev!r} is not one of 1, 2, 3, 4")
            if not isinstance(text, str):
                problems.append(f"{where}.text: not a string")
                text = ""
            out.append({"type": kind, "line": line, "text": text[:MAX_TEXT_CHARS], "severity": sev})
        raise_problems(problems)
        if not out:
            check_no_corrections(reference, candidate)
        return {"corrections": out}


def _grades(item: dict[str, Any]) -> list[int]:
    return [int(c["severity"]) for c in item["corrections"]]


class FineRadScore(LLMPairMetric):
    """FineRadScore-style total severity of the corrections a report needs (lower is better)."""

    name = "fineradscore"
    label = "FineRadScore"
    higher_is_better = False
    judge_class = FineRadJudge
    reader = staticmethod(lambda item: float(sum(_grades(item))))


class FineRadNoActionableError(LLMPairMetric):
    """Share of reports whose corrections are all graded 1 (not actionable)."""

    name = "fineradscore-no-actionable-error-rate"
    label = "No actionable error"
    higher_is_better = True
    judge_class = FineRadJudge
    reader = staticmethod(lambda item: float(all(g < ACTIONABLE_FROM for g in _grades(item))))


class FineRadNoSignificantError(LLMPairMetric):
    """Share of reports with no correction graded urgent or emergent (3 or 4)."""

    name = "fineradscore-no-significant-error-rate"
    label = "No significant error"
    higher_is_better = True
    judge_class = FineRadJudge
    reader = staticmethod(lambda item: float(all(g < SIGNIFICANT_FROM for g in _grades(item))))


for _cls in (FineRadScore, FineRadNoActionableError, FineRadNoSignificantError):
    register_metric(_cls.name, higher_is_better=_cls.higher_is_better, parallel_safe=False, needs=("llm",))(_cls)

__all__ = [
    "ACTIONABLE_FROM",
    "SEVERITIES",
    "SIGNIFICANT_FROM",
    "FineRadJudge",
    "FineRadNoActionableError",
    "FineRadNoSignificantError",
    "FineRadScore",
    "candidate_lines",
    "check_no_corrections",
]
