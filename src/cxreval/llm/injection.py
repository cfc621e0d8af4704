"""Report text that talks to the judge: chat-template tokens neutralised, instructions flagged.

Report text stands fenced in every prompt (:func:`cxreval.llm.prompts.fence_code`), and the
system prompts say that text in a fence is data. Two things a fence cannot do are done here:

- :func:`neutralise`: a chat-template token written in a report (``<|im_start|>``, ``[INST]``,
  ``<</SYS>>``, ``<start_of_turn>``, ``</s>``, ...) is what a server's tokenizer turns into a real
  role boundary, so every one becomes its name in brackets (``(im_start)``, ``(INST)``) before
  the text is sent. Deterministic, so the same report renders the same prompt.
- :func:`instruction_signals`: which signs of instructions to a judge a text shows (a template
  token, a role marker such as ``SYSTEM:``, a fence tag, "ignore previous instructions", words
  addressed to a model or judge, an imperative about the verdict such as "say all findings
  match"). None is found in any IU X-ray or ReXrank report; the engines flag pairs that show
  one and cross-check them against the rule engine (:mod:`cxreval.judge.crosscheck`).

What this does not stop: instructions in other languages or paraphrased beyond these patterns,
look-alike letters beyond Unicode NFKC, and a model that is swayed by a report's plain clinical
content. The flag says "read this pair", not "this pair was attacked".
"""

from __future__ import annotations

import re
import unicodedata

from cxreval.caches import INJECTION_MIB, BoundedCache, mib, text_weight

#: Chat-template tokens of common model families, as a server's tokenizer would read them.
TEMPLATE_TOKEN = re.compile(
    r"<\|([^|<>\n]{1,64})\|>"  # ChatML, Llama 3, Phi: <|im_start|>, <|eot_id|>, <|system|>
    r"|<\uff5c([^\uff5c<>\n]{1,64})\uff5c>"  # DeepSeek: <｜User｜>, <｜begin▁of▁sentence｜>
    r"|\[(/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS))\]"  # Mistral, Llama 2
    r"|<<(/?SYS)>>"  # Llama 2
    r"|<(/?(?:s|bos|eos|pad|unk|start_of_turn|end_of_turn|think|tool_call|tool_response))>"  # Llama, Gemma, Qwen
)

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_START = r"(?:^|[.;:!?\n]\s*|\b(?:please|just|simply|then|now|must|should|always|only)\s+)"
_VERB = (
    r"(?:say|answer|respond|reply|output|return(?! to\b)|print|mark|label|classify|rate|score|grade|judge|treat|"
    r"write|declare|conclude)"
)
_VERDICT = (
    r"(?:match(?:es|ed|ing)?|identical|equivalent|(?:is|are) (?:the same|correct|accurate)|"
    r"no (?:errors?|mistakes?|differences?|discrepanc(?:y|ies))|zero errors?|perfect(?:ly)?|"
    r"true positives?|false (?:positives?|negatives?)|(?:tp|fp|fn|tn)|empty|\[\s*\]|\{\s*\}|json|"
    r"entit(?:y|ies)|(?:full|maximum|top) (?:score|marks)|(?:a )?(?:score|rating|grade) of)"
)

#: Each sign of instructions to a judge, by name (matched on :func:`_plain` text).
SIGNALS: dict[str, re.Pattern[str]] = {
    "chat-template-token": TEMPLATE_TOKEN,
    "role-marker": re.compile(
        r"(?:^|[\n.;!?]\s*)(?:system|assistant|user|human|developer)(?: message| prompt)?\s*:"
        r"|#{2,}\s*(?:instruction|response|system)\b",
        re.IGNORECASE | re.MULTILINE,
    ),
    "fence-tag": re.compile(
        r"</?\s*(?:candidate|reference|report|first-judgement|instructions?|system)"
        r"(?:-[0-9a-f]*)?\s*>",
        re.IGNORECASE,
    ),
    "override": re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}?"
        r"\b(?:instructions?|prompts?|rules|guidelines|directions|system message|"
        r"everything (?:above|before))\b",
        re.IGNORECASE,
    ),
    "addresses-the-judge": re.compile(
        r"\b(?:(?:the|an?|dear|note to(?: the)?|attention)\s+(?:judge|evaluator|grader|scorer|annotator|llm|"
        r"language model|chatbot)|you(?: are|'re) (?:an?|the|now|to)|as an ai|pretend(?:ing)?|"
        r"(?:helpful|ai|virtual) assistant|chatgpt|gpt-?\d)\b",
        re.IGNORECASE,
    ),
    "task-words": re.compile(r"\b(?:candidate report|ground[- ]truth|json|empty (?:list|array|answer|object))\b", re.IGNORECASE),
    "verdict-directive": re.compile(
        rf"{_START}{_VERB}\b[^.!?\n]{{0,80}}?(?<![\w-]){_VERDICT}(?![\w-])", re.IGNORECASE | re.MULTILINE
    ),
}


def neutralise(text: str) -> str:
    """``text`` with every chat-template token replaced by its name in brackets (``<|im_start|>``
    -> ``(im_start)``): no tokenizer reads those as a role boundary. Idempotent."""
    return TEMPLATE_TOKEN.sub(lambda m: f"({next(g for g in m.groups() if g is not None)})", text)


def _plain(text: str) -> str:
    """``text`` as the patterns read it: NFKC (full-width letters as ASCII), zero-width
    characters and soft hyphens removed, runs of spaces and tabs as one space."""
    return re.sub(r"[ \t\r\f\v]+", " ", unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH))


def instruction_signals(text: str) -> list[str]:
    """The names of the :data:`SIGNALS` that ``text`` shows (empty: it reads like a report); kept
    per text, so a reference is read once for all its candidates."""
    hit = _SIGNALS.get(text)
    return list(hit if hit is not None else _SIGNALS.put(text, _signals(text)))


def _signals(text: str) -> tuple[str, ...]:
    plain = _plain(text)
    return tuple(name for name, pattern in SIGNALS.items() if pattern.search(text if name == "chat-template-token" else plain))


#: The signals of texts read before (:data:`cxreval.caches.INJECTION_MIB`).
_SIGNALS: BoundedCache[str, tuple[str, ...]] = BoundedCache(
    mib(INJECTION_MIB), lambda text, signals: text_weight(text, len(signals), 60), "injection signals"
)
