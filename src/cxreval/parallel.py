"""Process pools and how many workers: what :class:`cxreval.executors.LocalProcesses` runs on.

Workers are forked where the platform allows (spawned elsewhere, or when asked: a CUDA trainer)
with SIGINT ignored, so Ctrl-C stops the parent cleanly and prints no worker tracebacks; work is
cut into chunks so that every worker stays busy and a worker's memory stays flat however many
pairs it judges. The default number of workers respects a memory budget (:func:`default_workers`).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

#: Most items in one chunk (one task of a worker).
CHUNK_ITEMS = 500


#: A rule-engine worker's memory (MiB) at most: its caches' budgets (:mod:`cxreval.caches`) and the
#: engine, with room to spare (``benchmarks/memory.py`` measures a worker on all-new text).
WORKER_MIB = 250
#: The share of the memory available when a run starts that the default worker count may take.
MEMORY_SHARE = 0.5


def cores() -> int:
    """Every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def available_mib() -> float | None:
    """The memory available for new processes (``MemAvailable`` of /proc/meminfo), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def default_workers(memory_mib: float | None = None) -> int:
    """Every core, but no more workers than :data:`MEMORY_SHARE` of the available memory holds
    at :data:`WORKER_MIB` each (``memory_mib``: the available memory, default read now)."""
    memory = available_mib() if memory_mib is None else memory_mib
    if memory is None:
        return cores()
    return max(1, min(cores(), int(memory * MEMORY_SHARE // WORKER_MIB)))


def worker_pool(
    workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...], *, start_method: str | None = None
) -> Any:
    """A pool of ``workers`` processes, started with the signals of :func:`worker_signals` (set
    around the fork too, before their initializer runs). ``start_method``: "spawn" where the
    parent may hold what a fork must not copy (a CUDA context in a trainer); default: fork where
    the platform has it."""
    method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    main = threading.current_thread() is threading.main_thread()
    previous = (signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_DFL)) if main else None
    try:
        return mp.get_context(method).Pool(workers, initializer=initializer, initargs=initargs)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])


def chunked(items: Sequence[Any], workers: int, most: int = CHUNK_ITEMS) -> list[Sequence[Any]]:
    """At least four chunks per worker, at most ``most`` items each."""
    size = max(1, min(most, math.ceil(len(items) / (4 * max(1, workers)))))
    return [items[i : i + size] for i in range(0, len(items), size)]


def worker_signals() -> None:
    """For a worker's initializer: the parent handles Ctrl-C, and SIGTERM kills the worker at once
    (``Pool.terminate`` sends it; a handler the parent set, such as a stream's SIGTERM cleanup
    (:mod:`cxreval.streaming`), must not be inherited, or a terminated worker waits forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
