"""The one redactor of the API key: every answer, error and message of the LLM path goes through
it before it is parsed, stored (answer store, ``failures.jsonl``, ``judgements.jsonl``) or printed.

The key is looked for in decoded text, not in fixed encodings: JSON and Python escapes
(``\\u0073``, ``\\x73``, ``\\U00000073``, ``\\/``, ``\\"``, behind any number of backslashes, so
escaped twice or more), URL escapes (``%2F``) and HTML character references (``&#115;``) are
decoded into a view of the text, and every run of at least :data:`MIN_RUN` consecutive characters
of the key in that view (the whole key, its body without the ``sk-`` prefix, any long piece of
it) is replaced in the original text, escapes and all, by :data:`MARK`. Text is redacted whole
before it is cut to a limit, so no part of a key survives at the cut. A key of fewer than
:data:`MIN_RUN` characters is matched whole; one of fewer than :data:`MIN_KEY` is not matched.

Not matched (documented in ``docs/llm.md``): a piece shorter than :data:`MIN_RUN` characters (a
key shown as ``sk-...abcd``), a key encoded otherwise (base64, reversed, spelled out, split by
other characters, in other letters that look alike).
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from .config import LLMConfig

#: Consecutive characters of the key that are redacted wherever they stand.
MIN_RUN = 8
#: A key shorter than this is not redacted (it would match ordinary text).
MIN_KEY = 4
MARK = "[redacted]"

_ESCAPE = re.compile(
    r"\\+u[dD][89abAB][0-9a-fA-F]{2}\\+u[dD][c-fC-F][0-9a-fA-F]{2}"  # a surrogate pair
    r"|\\+(?:u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[/\\\"'])"
    r"|(?:%[0-9a-fA-F]{2})+"
    r"|&#(?:[0-9]{1,7}|[xX][0-9a-fA-F]{1,6});"
)
_CODE = re.compile(r"[uUx]([0-9a-fA-F]+)")


def _decode(unit: str) -> str:
    """The text one escape stands for (itself when it stands for nothing sensible)."""
    if unit.startswith("%"):
        return unquote(unit, errors="replace")
    if unit.startswith("&#"):
        return html.unescape(unit)
    rest = unit.lstrip("\\")
    if not rest:  # backslashes only: an escaped backslash
        return "\\"
    codes = [int(h, 16) for h in _CODE.findall(rest)]
    if not codes:  # \/ \" \'
        return rest
    if len(codes) == 2:  # a surrogate pair
        return chr(0x10000 + ((codes[0] - 0xD800) << 10) + (codes[1] - 0xDC00))
    return chr(codes[0]) if codes[0] <= 0x10FFFF else unit


class DecodedView:
    """``text`` with its escapes decoded (:attr:`text`), and the way back to the original's offsets.

    ``units`` holds (decoded start, decoded end, raw start, raw end) of each escape, in order;
    between escapes a decoded character is the raw character at the same distance.
    """

    def __init__(self, raw: str) -> None:
        self.units: list[tuple[int, int, int, int]] = []
        if "\\" not in raw and "%" not in raw and "&#" not in raw:
            self.text = raw
            return
        parts: list[str] = []
        dec = pos = 0
        for m in _ESCAPE.finditer(raw):
            literal, decoded = raw[pos : m.start()], _decode(m.group())
            parts += [literal, decoded]
            dec += len(literal)
            self.units.append((dec, dec + len(decoded), m.start(), m.end()))
            dec += len(decoded)
            pos = m.end()
        parts.append(raw[pos:])
        self.text = "".join(parts)
        self._starts = [u[0] for u in self.units]

    def _raw(self, d: int) -> tuple[int, int]:
        """The raw span of decoded character ``d``: its escape, or the one raw character."""
        if not self.units:
            return d, d + 1
        i = bisect.bisect_right(self._starts, d) - 1
        if i < 0:
            return d, d + 1
        _, dec_end, raw_start, raw_end = self.units[i]
        if d < dec_end:
            return raw_start, raw_end
        at = raw_end + d - dec_end
        return at, at + 1

    def raw_span(self, start: int, end: int) -> tuple[int, int]:
        """The raw span that decoded ``[start, end)`` comes from, whole escapes included."""
        return self._raw(start)[0], self._raw(end - 1)[1]


class Redactor:
    """Replaces every run of :data:`MIN_RUN` or more characters of ``secret`` (see the module doc)."""

    def __init__(self, secret: str, min_run: int = MIN_RUN) -> None:
        self.secret = secret if len(secret) >= MIN_KEY else ""
        self.min_run = min(min_run, len(self.secret))
        # Any run of min_run characters holds one of these blocks whole (blocks at multiples of
        # their size, at most half a run): finding the blocks finds every run.
        self._size = max(1, (self.min_run + 1) // 2)
        self._blocks: dict[str, list[int]] = {}
        for j in range(0, len(self.secret) - self._size + 1, self._size):
            self._blocks.setdefault(self.secret[j : j + self._size], []).append(j)

    def __call__(self, text: str, limit: int | None = None) -> str:
        """``text`` with the key replaced, then cut to ``limit`` characters (None: kept whole)."""
        text = str(text)
        if self._blocks:
            text = self._replace(text)
        return text if limit is None else text[:limit]

    def _replace(self, raw: str) -> str:
        view = DecodedView(raw)
        spans = _union(view.raw_span(a, b) for a, b in self.runs(view.text))
        if not spans:
            return raw
        out, pos = [], 0
        for a, b in spans:
            out += [raw[pos:a], MARK]
            pos = b
        out.append(raw[pos:])
        return "".join(out)

    def runs(self, text: str) -> list[tuple[int, int]]:
        """Spans of ``text`` that are runs of at least ``min_run`` characters of the key."""
        hits = sorted((pos, j) for block, offsets in self._blocks.items() for pos in _find_all(text, block) for j in offsets)
        found: list[tuple[int, int]] = []
        last = (-1, -1)  # (end, alignment) of the last run: its other blocks need no second look
        for pos, j in hits:
            if pos < last[0] and pos - j == last[1]:
                continue
            a, b = self._extend(text, pos, j)
            if b - a >= self.min_run:
                found.append((a, b))
                last = (b, pos - j)
        return found

    def _extend(self, text: str, pos: int, j: int) -> tuple[int, int]:
        """The run of key characters around a block found at ``pos`` (key offset ``j``)."""
        key = self.secret
        left = 0
        while pos - left > 0 and j - left > 0 and text[pos - left - 1] == key[j - left - 1]:
            left += 1
        right = pos + self._size
        k = j + self._size
        while right < len(text) and k < len(key) and text[right] == key[k]:
            right += 1
            k += 1
        return pos - left, right


def map_strings(obj: Any, fn: Callable[[str], str]) -> Any:
    """``obj`` (dicts, lists, tuples, strings, other values) with ``fn`` applied to every string in
    it, dict keys included: a parsed answer is redacted whole before it is stored."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {map_strings(k, fn): map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(map_strings(v, fn) for v in obj)
    return obj


def config_redactor(config: LLMConfig) -> Redactor:
    """The redactor of ``config``'s key (one that changes nothing when no key is set)."""
    try:
        return Redactor(config.api_key())
    except ValueError:  # no key, and none needed to say so: nothing to redact
        return Redactor("")


def _find_all(text: str, block: str) -> list[int]:
    out = []
    at = text.find(block)
    while at != -1:
        out.append(at)
        at = text.find(block, at + 1)
    return out


def _union(spans: Any) -> list[tuple[int, int]]:
    """Overlapping or touching spans joined, in order."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged
