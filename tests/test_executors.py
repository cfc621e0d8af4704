"""One executor protocol (issue 33): ``fn(state, item)`` over items, in order, each worker building
its state once, in this process, in local processes or on Ray actors; evaluate, bench and the
reward all run through it."""

from __future__ import annotations

import os
from functools import partial

import pytest

from cxreval.executors import InProcess, LocalProcesses, executor


class _Counter:
    """A worker's state: its process, and how many items it has seen (built once per worker)."""

    def __init__(self, start: int = 0) -> None:
        self.pid = os.getpid()
        self.seen = start


def _tally(state: _Counter, item: int) -> tuple[int, int, int]:
    state.seen += 1
    return item * item, state.pid, state.seen


def test_every_kind_gives_the_results_in_input_order() -> None:
    items = list(range(60))
    here = list(InProcess(_Counter).map(_tally, items))
    with LocalProcesses(2, _Counter) as pool:
        there = list(pool.map(_tally, items))
    assert [v for v, _, _ in here] == [v for v, _, _ in there] == [i * i for i in items]
    assert {pid for _, pid, _ in here} == {os.getpid()}
    assert os.getpid() not in {pid for _, pid, _ in there}


def test_a_worker_builds_its_state_once_and_keeps_it() -> None:
    with LocalProcesses(2, partial(_Counter, 100)) as pool:
        got = list(pool.map(_tally, range(40)))
        again = list(pool.map(_tally, range(10)))  # the same workers serve a second map
    by_worker: dict[int, list[int]] = {}
    for _, pid, seen in got + again:
        by_worker.setdefault(pid, []).append(seen)
    assert 1 <= len(by_worker) <= 2
    for counts in by_worker.values():  # each worker counts on from its one state
        assert counts == list(range(101, 101 + len(counts)))


def test_the_input_is_read_a_bounded_way_ahead() -> None:
    handed_out: list[int] = []
    seen_at_result = []

    def items():
        for i in range(40):
            handed_out.append(i)
            yield i

    with LocalProcesses(2, _Counter, window=4) as pool:
        for value, _, _ in pool.map(_tally, items()):
            seen_at_result.append((value, len(handed_out)))
    assert [v for v, _ in seen_at_result] == [i * i for i in range(40)]
    # when result k comes back, no more than k + window items have been read
    assert all(read <= k + 4 for k, (_, read) in enumerate(seen_at_result))


def test_the_executor_for_a_run() -> None:
    mine = _Counter(7)
    one = executor(1, _Counter, state=mine)
    assert isinstance(one, InProcess) and one.state is mine  # the caller's own state, caches and all
    assert isinstance(executor(3, _Counter), LocalProcesses)
    with pytest.raises(ValueError, match="executor must be one of"):
        executor(2, _Counter, kind="threads")
    with pytest.raises(ValueError, match="address applies to executor 'ray'"):
        executor(2, _Counter, address="auto")


def test_a_closed_pool_stops_its_workers() -> None:
    pool = LocalProcesses(2, _Counter)
    list(pool.map(_tally, range(4)))
    workers = list(pool._pool._pool)  # noqa: SLF001 - the processes behind it
    pool.close()
    for w in workers:
        w.join(timeout=30)
    assert not any(w.is_alive() for w in workers)
