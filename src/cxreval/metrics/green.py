"""A GREEN-style metric through any LLM endpoint (cxreval's prompt ``green@1``, written by us).

After GREEN (Ostmeier et al., 2024, arXiv 2405.03595): the LLM counts the candidate's clinically
significant and insignificant errors in GREEN's six categories ((a) false finding, (b) missing
finding, (c) anatomic location, (d) severity, (e) comparison not in the reference, (f) omitted
comparison) and the matched findings. Per pair:

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
MAX_COUNT = 50


def _counts_schema() -> dict[str, Any]:
    count = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
    return {
        "type": "object",
        "properties": {c: count for c in CATEGORIES},
        "required": list(CATEGORIES),
        "additionalProperties": False,
    }


def green_score(matched: int, significant: int) -> float:
    """matched / (matched + significant errors); 0.0 when ``matched`` is 0 (GREEN's convention)."""
    return 0.0 if matched == 0 else matched / (matched + significant)


class GreenJudge(PairJudge):
    """One call per pair: significant / insignificant error counts per category, matched findings."""

    name = "green-judge"
    version = "2"  # 2: chat-template tokens in report text neutralised before sending
    prompt_name = "green"
    reask_hint = (
        "with a whole-number count (0-50) for every category of significant and insignificant "
        "errors and the number of matched findings"
    )
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "significant": _counts_schema(),
            "insignificant": _counts_schema(),
            "matched_findings": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
        },
        "required": ["significant", "insignificant", "matched_findings"],
        "additionalProperties": False,
    }

    def render(self, reference: str, candidate: str) -> dict[str, str]:
        return {**fenced(reference=reference, candidate=candidate), "max_count": str(MAX_COUNT)}

    def parse_value(self, value: dict[str, Any], reference: str, candidate: str) -> dict[str, Any]:
        """Every count present, a whole number in [0, MAX_COUNT]; unknown fields refused."""
        from cxreval.llm.schemas import raise_problems

        problems: list[str] = []

        def count(where: str, v: Any) -> int:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
                problems.append(f"{where}: {v!r} is not a whole number from 0 to {MAX_COUNT}")
                return 0
            return v

        out: dict[str, Any] = {}
        for part in ("significant", "insignificant"):
            block = value.get(part)
            if not isinstance(block, dict):
                problems.append(f"{part}: missing or not an object of the six counts")
                continue
            unknown = sorted(set(block) - set(CATEGORIES))
            if unknown:
                problems.append(f"{part}: unknown categories {unknown}; use only {', '.join(CATEGORIES)}")
            out[part] = {c: count(f"{part}.{c}", block.get(c, "missing")) for c in CATEGORIES}
        out["matched"] = count("matched_findings", value.get("matched_findings", "missing"))
        unknown = sorted(set(value) - {"significant", "insignificant", "matched_findings"})
        if unknown:
            problems.append(f"unknown fields {unknown}")
        raise_problems(problems)
        return out


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
