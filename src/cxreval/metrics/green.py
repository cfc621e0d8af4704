"""A GREEN-style metric through any LLM endpoint (cxreval's prompt ``green@2``, written by us).

After GREEN (Ostmeier et al., 2024, arXiv 2405.03595), as GREEN asks its model: the LLM first
explains the comparison, then lists the candidate's clinically significant and insignificant
errors in GREEN's six categories ((a) false finding, (b) missing finding, (c) anatomic location,
(d) severity, (e) comparison not in the reference, (f) omitted comparison) and the matched
findings, each as a short phrase; every count is the length of its list (a model names what it
counts, so a count can be checked against its phrases). Per pair:

- ``green``: matched / (matched + significant errors); 0 when nothing matched (GREEN's own
  implementation returns 0 there, so a pair with no matched finding and no error scores 0);
- ``green-no-significant-error-rate``: 1 when the pair has no clinically significant error,
  else 0 (ReXrank's "no significant error" rate is its mean over a stratum's studies);

each a pair-mean metric (the system value is the mean over the pairs whose answer was usable).
Not GREEN's fine-tuned model nor its prompt text: numbers are comparable across cxreval runs of
the same signature, not with published GREEN values.
"""

from __future__ import annotations

from typing import Any, ClassVar

from cxreval.metrics.base import register_metric
from cxreval.metrics.llm_judge import LLMPairMetric, PairJudge, fenced

#: GREEN's six error categories, in its order (a)-(f).
CATEGORIES: tuple[str, ...] = (
    "false_finding",
    "missing_finding",
    "location",
    "severity",
    "false_comparison",
    "missing_comparison",
)
#: Phrases per list: GREEN's counts run to a handful per category; a tighter bound keeps a server's
#: grammar for the answer small (llama.cpp expands every bound into rules it checks per token).
MAX_COUNT = 12
#: Characters of one listed error or finding ("left pleural effusion missed"), and of the explanation.
MAX_PHRASE_CHARS = 80
MAX_EXPLANATION_CHARS = 400


def _list_schema() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "maxLength": MAX_PHRASE_CHARS}, "maxItems": MAX_COUNT}


def _lists_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {c: _list_schema() for c in CATEGORIES},
        "required": list(CATEGORIES),
        "additionalProperties": False,
    }


def green_score(matched: int, significant: int) -> float:
    """matched / (matched + significant errors); 0.0 when ``matched`` is 0 (GREEN's convention)."""
    return 0.0 if matched == 0 else matched / (matched + significant)


class GreenJudge(PairJudge):
    """One call per pair: an explanation, the significant / insignificant errors listed per
    category and the matched findings listed; the counts are the lists' lengths."""

    name = "green-judge"
    # 2: chat-template tokens in report text neutralised before sending
    # 3: prompt green@2: an explanation first, errors and matched findings as lists (GREEN's output)
    version = "3"
    prompt_name = "green"
    reask_hint = (
        f"with an explanation, a list of short phrases (at most {MAX_COUNT}) for every category of significant "
        "and insignificant errors, and the list of matched findings"
    )
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "maxLength": MAX_EXPLANATION_CHARS},
            "significant": _lists_schema(),
            "insignificant": _lists_schema(),
            "matched_findings": _list_schema(),
        },
        "required": ["explanation", "significant", "insignificant", "matched_findings"],
        "additionalProperties": False,
    }

    def render(self, reference: str, candidate: str) -> dict[str, str]:
        return {**fenced(reference=reference, candidate=candidate), "max_count": str(MAX_COUNT)}

    def parse_value(self, value: dict[str, Any], reference: str, candidate: str) -> dict[str, Any]:
        """Every list present, of at most MAX_COUNT phrases; unknown fields refused. The item keeps
        the counts (lists' lengths), the lists and the explanation."""
        from cxreval.llm.schemas import raise_problems

        problems: list[str] = []

        def phrases(where: str, v: Any) -> list[str]:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or len(v) > MAX_COUNT:
                problems.append(f"{where}: {_shown(v)} is not a list of at most {MAX_COUNT} phrases")
                return []
            return [x.strip()[:MAX_PHRASE_CHARS] for x in v if x.strip()]  # a blank phrase names no error

        out: dict[str, Any] = {"lists": {}}
        for part in ("significant", "insignificant"):
            block = value.get(part)
            if not isinstance(block, dict):
                problems.append(f"{part}: missing or not an object of the six lists")
                continue
            unknown = sorted(set(block) - set(CATEGORIES))
            if unknown:
                problems.append(f"{part}: unknown categories {unknown}; use only {', '.join(CATEGORIES)}")
            lists = {c: phrases(f"{part}.{c}", block.get(c, "missing")) for c in CATEGORIES}
            out["lists"][part] = lists
            out[part] = {c: len(v) for c, v in lists.items()}
        matched = phrases("matched_findings", value.get("matched_findings", "missing"))
        out["lists"]["matched_findings"] = matched
        out["matched"] = len(matched)
        explanation = value.get("explanation", "")
        out["explanation"] = explanation[:MAX_EXPLANATION_CHARS] if isinstance(explanation, str) else ""
        unknown = sorted(set(value) - {"explanation", "significant", "insignificant", "matched_findings"})
        if unknown:
            problems.append(f"unknown fields {unknown}")
        raise_problems(problems)
        return out


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _significant(item: dict[str, Any]) -> int:
    return sum(item["significant"].values())


class Green(LLMPairMetric):
    """GREEN-style score per pair: matched / (matched + clinically significant errors)."""

    name = "green"
    label = "GREEN"
    higher_is_better = True
    judge_class = GreenJudge
    reader = staticmethod(lambda item: green_score(item["matched"], _significant(item)))


class GreenNoSignificantError(LLMPairMetric):
    """Share of reports with no clinically significant error (GREEN-style counts)."""

    name = "green-no-significant-error-rate"
    label = "No significant error (GREEN)"
    higher_is_better = True
    judge_class = GreenJudge
    reader = staticmethod(lambda item: float(_significant(item) == 0))


for _cls in (Green, GreenNoSignificantError):
    register_metric(_cls.name, higher_is_better=_cls.higher_is_better, parallel_safe=False, needs=("llm",))(_cls)

__all__ = ["CATEGORIES", "Green", "GreenJudge", "GreenNoSignificantError", "green_score"]
