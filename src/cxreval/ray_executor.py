"""Ray actors as an :class:`~cxreval.executors.Executor` (``cxreval evaluate --executor ray``).

The same chunks that the other executors run in this process or in a process pool go to Ray
actors instead, each holding its state (a :class:`~cxreval.engines.RulesEngine`, so its
extraction cache lives across chunks, as a pool worker's does). Every actor runs the same chunk
function as the other paths, and the results come back in input order, so the files are the
same. At most two chunks per actor are in flight: the input is never read far ahead.

``address=None`` starts a local cluster of ``workers`` CPUs when Ray is not running in this
process yet (and shuts it down after); an address (``auto``, ``ray://head:10001``, ``host:6379``)
joins an existing cluster, whose nodes need this version of cxreval installed. Actors are killed
and a cluster this module started is shut down on every exit, Ctrl-C and errors included.

Ray is the optional extra ``ray`` and is imported only when a run asks for it.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

RAY_EXTRA = "pip install 'cxreval[ray]'"

T = TypeVar("T")
R = TypeVar("R")


class RayUnavailable(ValueError):
    """Ray is not installed (the optional extra ``ray``), or the cluster cannot be reached."""


def import_ray() -> Any:
    """The ``ray`` module, or :class:`RayUnavailable` naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"the Ray executor needs Ray, in the optional extra 'ray': {RAY_EXTRA}") from None
    return ray


def ray_imap(
    make_state: Callable[[], Any], fn: Callable[[Any, T], R], items: Iterable[T], *, workers: int, address: str | None = None
) -> Iterator[R]:
    """``fn(state, item)`` for each item, in order, on Ray actors that each build their ``state``
    once with ``make_state()``.

    ``workers`` actors of one CPU each (at most the cluster's CPUs), the least busy one taking the
    next item; at most two items per actor are handed out at a time, the next item being read only
    when a result has come back. ``make_state`` and ``fn`` must be picklable (module-level
    functions, :func:`functools.partial` of them).
    """
    ray = import_ray()
    started = _connect(ray, address, workers)
    actors: list[Any] = []
    try:
        n = max(1, min(workers, int(ray.cluster_resources().get("CPU", workers))))
        actor_class = ray.remote(num_cpus=1)(_Holder)
        actors = [actor_class.remote(make_state, fn) for _ in range(n)]
        busy = [0] * n
        pending: deque[tuple[int, Any]] = deque()
        for item in items:
            i = min(range(n), key=busy.__getitem__)
            busy[i] += 1
            pending.append((i, actors[i].run.remote(item)))
            if len(pending) >= 2 * n:
                i, ref = pending.popleft()
                busy[i] -= 1
                yield ray.get(ref)
        while pending:
            i, ref = pending.popleft()
            busy[i] -= 1
            yield ray.get(ref)
    finally:
        _release(ray, actors, started)


class RayActors:
    """The :class:`~cxreval.executors.Executor` of Ray actors: :func:`ray_imap` per :meth:`map`
    (the actors live for one map, and are stopped when it ends or is closed)."""

    def __init__(self, workers: int, make_state: Callable[[], Any], *, address: str | None = None) -> None:
        import_ray()  # a missing extra is named now, before any work
        self.workers = workers
        self.address = address
        self._make = make_state
        self._running: list[Iterator[Any]] = []

    def map(self, fn: Callable[[Any, T], R], items: Iterable[T]) -> Iterator[R]:
        running = ray_imap(self._make, fn, items, workers=self.workers, address=self.address)
        self._running.append(running)
        return running

    def close(self) -> None:
        """Stop the actors of every map still running (their generators' cleanup releases them)."""
        for running in self._running:
            close = getattr(running, "close", None)
            if close is not None:
                close()
        self._running.clear()

    def __enter__(self) -> RayActors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Holder:
    """A Ray actor's state: built once, then ``fn(state, item)`` per call."""

    def __init__(self, make_state: Callable[[], Any], fn: Callable[[Any, Any], Any]) -> None:
        self.state = make_state()
        self.fn = fn

    def run(self, item: Any) -> Any:
        return self.fn(self.state, item)


def _connect(ray: Any, address: str | None, workers: int) -> bool:
    """Make sure this process is connected to a cluster; True when this call connected it."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # an offline tool does not report usage
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        try:
            ray.shutdown()
        finally:
            where = f"the Ray cluster at {address}" if address is not None else "a local Ray cluster"
            raise RayUnavailable(f"cannot start or join {where}: {exc}") from None
    return True


def _release(ray: Any, actors: list[Any], started: bool) -> None:
    """Kill the actors; shut Ray down in this process when :func:`_connect` started it."""
    try:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # pragma: no cover - an actor already gone
                pass
    finally:
        if started:
            ray.shutdown()


__all__ = ["RAY_EXTRA", "RayActors", "RayUnavailable", "import_ray", "ray_imap"]
