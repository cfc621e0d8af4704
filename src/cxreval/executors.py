"""One executor protocol for every parallel path: ``fn(state, item)`` over items, in order.

An :class:`Executor` runs a function over a stream of items (chunks of pairs, byte ranges of a
file, batches of completions) on its workers, each of which builds its ``state`` once (a
:class:`~cxreval.engines.RulesEngine`, a reward, bench's metrics) and keeps it for its life, so
caches live across chunks. Results come back in input order, with at most ``window`` items handed
out at a time (the next item is read only when a result has come back: a stream of a million
pairs never sits in memory). Three kinds, chosen by :func:`executor`:

- :class:`InProcess`: this process (one worker), on a state given or built on first use;
- :class:`LocalProcesses`: a pool of processes (:func:`cxreval.parallel.worker_pool`: forked
  where the platform allows, ``start_method="spawn"`` inside a CUDA trainer; Ctrl-C is the
  parent's);
- :class:`~cxreval.ray_executor.RayActors`: Ray actors (``--executor ray``; the optional extra).

``evaluate`` (a whole list, a stream, a file's byte ranges), ``bench`` (judging, metric values)
and the RL reward all run through it; ``fn`` and ``make_state`` must be picklable (module-level
functions, :func:`functools.partial` of them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, Self, TypeVar

from cxreval.literals import EXECUTORS

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Executor", "InProcess", "LocalProcesses", "executor"]


class Executor(Protocol):
    """Runs ``fn(state, item)`` for each item, in order, on workers that each hold a state."""

    workers: int

    def map(self, fn: Callable[[Any, T], R], items: Iterable[T]) -> Iterator[R]:
        """``fn(state, item)`` of each item, in input order, a bounded number in flight."""
        ...

    def close(self) -> None:
        """Stop the workers (a running :meth:`map` ends with them)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class _Closing:
    """``with executor:`` closes it."""

    def close(self) -> None:  # pragma: no cover - every executor has its own
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcess(_Closing):
    """This process: ``state`` as given, or ``make_state()`` on first use."""

    workers = 1

    def __init__(self, make_state: Callable[[], Any] | None = None, state: Any = None) -> None:
        if make_state is None and state is None:
            raise ValueError("InProcess needs a state or a way to make one")
        self._make = make_state
        self._state = state

    @property
    def state(self) -> Any:
        if self._state is None:
            assert self._make is not None
            self._state = self._make()
        return self._state

    def map(self, fn: Callable[[Any, T], R], items: Iterable[T]) -> Iterator[R]:
        return (fn(self.state, item) for item in items)

    def close(self) -> None:
        pass


_STATE: dict[str, Any] = {}


def _init_worker(make_state: Callable[[], Any]) -> None:
    """A pool worker: the signals of :func:`cxreval.parallel.worker_signals`, then its state."""
    from cxreval.parallel import worker_signals

    worker_signals()
    _STATE["state"] = make_state()


def _call(fn: Callable[[Any, T], R], item: T) -> R:
    return fn(_STATE["state"], item)


class LocalProcesses(_Closing):
    """``workers`` processes of :func:`cxreval.parallel.worker_pool`, each with ``make_state()``.

    ``window``: items handed out at a time (default two per worker, so none waits for work).
    The pool starts on the first :meth:`map` and lives until :meth:`close`, so a caller that maps
    again and again (the reward, batch after batch) starts its workers once.
    """

    def __init__(
        self, workers: int, make_state: Callable[[], Any], *, start_method: str | None = None, window: int | None = None
    ) -> None:
        self.workers = workers
        self.window = window or 2 * workers
        self._make = make_state
        self._start_method = start_method
        self._pool: Any = None

    def map(self, fn: Callable[[Any, T], R], items: Iterable[T]) -> Iterator[R]:
        if self._pool is None:
            from cxreval.parallel import worker_pool

            self._pool = worker_pool(self.workers, _init_worker, (self._make,), start_method=self._start_method)
        return self._ordered(fn, items)

    def _ordered(self, fn: Callable[[Any, T], R], items: Iterable[T]) -> Iterator[R]:
        pending: deque[Any] = deque()
        for item in items:
            pending.append(self._pool.apply_async(_call, (fn, item)))
            if len(pending) >= self.window:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def executor(
    workers: int,
    make_state: Callable[[], Any],
    *,
    kind: str = "local",
    address: str | None = None,
    state: Any = None,
    start_method: str | None = None,
) -> Executor:
    """The executor for ``workers`` workers of ``kind`` (:data:`~cxreval.literals.EXECUTORS`).

    ``local`` with one worker runs in this process, on ``state`` when given (the caller's own
    engine, whose caches it then shares) or ``make_state()``; more workers are processes.
    ``ray``: that many Ray actors (``address``: an existing cluster; None starts a local one).
    """
    if kind not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if address is not None and kind != "ray":
        raise ValueError("an address applies to executor 'ray'")
    if kind == "ray":
        from cxreval.ray_executor import RayActors

        return RayActors(workers, make_state, address=address)
    if workers <= 1:
        return InProcess(make_state, state)
    return LocalProcesses(workers, make_state, start_method=start_method)
