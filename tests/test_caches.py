"""The one bounded cache (cxreval.caches): least recently used out, under its byte budget."""

from __future__ import annotations

import pytest

from cxreval.caches import CHAR_BYTES, ENTRY_BYTES, BoundedCache, mib, text_weight


def _weigh(key: str, value: str) -> int:
    return len(value)


def test_the_least_recently_used_go_first_once_the_budget_is_passed() -> None:
    cache: BoundedCache[str, str] = BoundedCache(10, _weigh, "t")
    cache.put("a", "xxx")
    cache.put("b", "yyy")
    cache.put("c", "zzz")
    assert cache.get("a") == "xxx"  # now the most recent: "b" is the oldest
    cache.put("d", "ww")  # 3 + 3 + 3 + 2 = 11 > 10
    assert list(cache) == ["c", "a", "d"] and "b" not in cache
    assert cache.nbytes == 8 and len(cache) == 3


def test_a_key_put_again_is_replaced_and_reweighed() -> None:
    cache: BoundedCache[str, str] = BoundedCache(10, _weigh)
    cache.put("a", "xxxxxx")
    cache.put("a", "x")
    assert cache.get("a") == "x" and cache.nbytes == 1 and len(cache) == 1


def test_an_entry_heavier_than_the_budget_and_a_zero_budget_keep_nothing() -> None:
    cache: BoundedCache[str, str] = BoundedCache(4, _weigh)
    cache.put("small", "xx")
    assert cache.put("big", "xxxxx") == "xxxxx"  # returned, not kept, and nothing evicted for it
    assert list(cache) == ["small"] and cache.get("big") is None
    off: BoundedCache[str, str] = BoundedCache(0, _weigh)
    assert off.put("a", "x") == "x" and not off and off.get("a") is None
    cache.clear()
    assert not cache and cache.nbytes == 0


def test_budgets_and_weights() -> None:
    assert mib(1.5) == 3 << 19 and mib(0) == 0
    with pytest.raises(ValueError, match="must be >= 0 MiB"):
        mib(-1)
    assert text_weight("abc", 2, 100) == ENTRY_BYTES + 3 * CHAR_BYTES + 200


def test_the_extractors_caches_stay_within_their_budget() -> None:
    from cxreval.extract.rules import RuleExtractor

    ex = RuleExtractor(cache_mib=0.05)
    for i in range(400):
        ex.extract(f"Finding {i}: small left pleural effusion. No pneumothorax. Case {i}.")
    for cache in (ex._sentences, ex._sections, ex._pieces, ex._reports):
        assert 0 < cache.nbytes <= cache.budget, cache


def test_the_default_worker_count_respects_the_memory_budget() -> None:
    from cxreval.parallel import MEMORY_SHARE, WORKER_MIB, cores, default_workers

    assert default_workers(memory_mib=1e9) == cores()  # memory to spare: every core
    assert default_workers(memory_mib=3 * WORKER_MIB / MEMORY_SHARE) == min(3, cores())
    assert default_workers(memory_mib=10) == 1  # never fewer than one
