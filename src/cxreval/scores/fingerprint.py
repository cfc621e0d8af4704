"""Fingerprints of the texts a result was scored on (``references_sha256``, ``candidates_sha256``
in ``scores.json``), kept beside the signature: two results are comparable when their signatures
match and their fingerprints say the same references were scored.

A fingerprint is the sum, modulo 2**256, of each pair's SHA-256: it does not depend on pair order,
and the chunks of a stream add up to the whole (:func:`reference_digest`, :func:`fingerprint_hex`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Protocol


class Texts(Protocol):
    """A pair as fingerprints read it (:class:`cxreval.io.ReportPair` is one)."""

    @property
    def pair_id(self) -> str: ...

    @property
    def reference(self) -> str: ...

    @property
    def candidate(self) -> str: ...


def references_fingerprint(pairs: Iterable[Texts]) -> str:
    """The fingerprint of the (pair id, reference text) pairs a result was scored against.

    The sum, modulo 2**256, of each pair's SHA-256 (:func:`reference_digest`): it does not
    depend on pair order, and chunks of a stream add up to the whole.
    """
    return fingerprint_hex(sum(reference_digest(p.pair_id, p.reference) for p in pairs))


def candidates_fingerprint(pairs: Iterable[Texts]) -> str:
    """:func:`references_fingerprint` of the (pair id, candidate text) pairs: with it, a results
    folder knows the texts its evidence offsets point into (``candidates_sha256``)."""
    return fingerprint_hex(sum(reference_digest(p.pair_id, p.candidate) for p in pairs))


def reference_digest(pair_id: str, reference: str) -> int:
    """SHA-256 of one pair's length-prefixed id and reference, as an integer."""
    h = hashlib.sha256()
    for part in (pair_id, reference):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    return int.from_bytes(h.digest(), "big")


#: The prefix of a fingerprint made by :func:`references_fingerprint` (releases before it wrote the
#: SHA-256 of the sorted list, 64 bare hex digits: :func:`fingerprints_comparable` tells them apart).
FINGERPRINT_PREFIX = "sum256:"


def fingerprint_hex(digest_sum: int) -> str:
    """A sum of :func:`reference_digest` values as ``references_sha256`` writes it."""
    return FINGERPRINT_PREFIX + format(digest_sum % 2**256, "064x")


def fingerprints_comparable(a: str | None, b: str | None) -> bool:
    """Whether two ``references_sha256`` values were made the same way (so unequal means
    different references); a folder written by an older release has the other kind."""
    return a is not None and b is not None and a.startswith(FINGERPRINT_PREFIX) == b.startswith(FINGERPRINT_PREFIX)
