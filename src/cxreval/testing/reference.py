"""Reference implementations that the fast metric code is checked against (tests only).

Each one is the plain textbook form, kept independent of the code it checks: no shared helper
but the tokeniser, which is part of the metric's definition rather than of its arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np


def lcs_length_dp(a: Sequence[str], b: Sequence[str]) -> int:
    """Longest common subsequence of two token lists by the O(len(a) * len(b)) dynamic programme."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l_f(reference: Sequence[str], candidate: Sequence[str], beta: float = 1.2) -> float:
    """ROUGE-L F-measure of token lists as pycocoevalcap's ``Rouge.calc_score`` computes it (one reference).

    ``P = LCS / |candidate|``, ``R = LCS / |reference|``, ``F = (1 + b^2) P R / (R + b^2 P)``,
    0 when P or R is 0.
    """
    lcs = lcs_length_dp(reference, candidate)
    prec = lcs / float(len(candidate)) if candidate else 0.0
    rec = lcs / float(len(reference)) if reference else 0.0
    if prec == 0 or rec == 0:
        return 0.0
    return ((1 + beta**2) * prec * rec) / float(rec + beta**2 * prec)


@lru_cache(maxsize=2)
def _encoder(model_path: str) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    return tokenizer, AutoModel.from_pretrained(model_path, local_files_only=True).eval()


def bertscore_f1_unbatched(
    model_path: str, references: Sequence[str], candidates: Sequence[str], max_length: int = 256
) -> list[float]:
    """BERTScore F1 without idf or rescaling, one text at a time (no batch, no padding).

    Each text is encoded alone; its [CLS]/[SEP] rows are dropped; P is the mean over candidate
    tokens of the best cosine with a reference token, R the other way round, F1 = 2PR / (P + R),
    0 when either side has no token. Needs torch and transformers (the ``bertscore`` extra).
    """
    import torch

    tokenizer, model = _encoder(model_path)
    drop = {tokenizer.cls_token_id, tokenizer.sep_token_id}  # [UNK] stays: it is a token of the text
    memo: dict[str, np.ndarray] = {}

    def rows(text: str) -> np.ndarray:
        if text not in memo:
            enc = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            ids = enc["input_ids"][0].tolist()
            with torch.no_grad():
                hidden = model(**enc).last_hidden_state[0]
            keep = [i for i, t in enumerate(ids) if t not in drop]
            memo[text] = torch.nn.functional.normalize(hidden[keep], dim=-1).numpy().astype(float)
        return memo[text]

    out = []
    for ref, cand in zip(references, candidates):
        r, c = rows(str(ref)), rows(str(cand))
        if not len(r) or not len(c):
            out.append(0.0)
            continue
        sim = c @ r.T
        p, rec = float(sim.max(axis=1).mean()), float(sim.max(axis=0).mean())
        out.append(0.0 if p + rec <= 0 else min(1.0, 2 * p * rec / (p + rec)))
    return out
