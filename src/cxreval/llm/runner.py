"""Run many LLM calls: cache first, bounded concurrency, rate limit, retries, one re-ask, budget.

For each task: a cached answer is used as is; otherwise the call is made (transport failures
are retried with exponential backoff, or exactly as long as ``Retry-After`` says), the answer
is validated, and an invalid answer gets one re-ask that shows the model its error (a bounded
excerpt of its answer, never the whole of an oversized one). The outcome is written to the
cache as soon as it is known. Nothing is dropped: every task ends as ``ok`` or as a failure
with its stage, error and raw answers; an answer no parser can read, or any surprise in one
task, ends that task as a listed failure, never the run (Ctrl-C and cancellation pass). The key
is redacted from every answer before it is parsed, stored or shown.

The budget (``--max-cost``) is a hard cap per answer store: a request starts only if what the
store has spent (every run, every process: the ledger), plus the reservations of every request
in flight (every process's: rows in the store), plus this request's worst case (its prompt
estimated at one token per 3 bytes, and ``max_tokens`` of output) stays within the cap; the check
and the reservation are one write transaction, and the reservation is given back in the one that
writes the real cost to the ledger. A request that does not fit only because of reservations
waits for requests in flight to finish (their real cost is usually far below their worst case)
and checks again; the run stops only when nothing is in flight, in any process, and it still
does not fit. Spending therefore never passes the cap, however many processes share the store,
unless a server reports more tokens than that worst case (then by at most that excess). Every
HTTP 200 is charged: where a server reports no usable usage (none, not a non-negative integer,
or zero tokens for a non-empty prompt or answer), and for a 200 whose body is unusable (retried,
but billed by a real provider), the tokens are estimated the same way, output at most
``max_tokens`` (``Usage.estimated`` counts those).

Every HTTP attempt has a deadline, ``timeout`` seconds for the whole request (see
:func:`cxreval.llm.backends.post_within`); a call whose last attempt passed it is listed as a
``deadline`` failure. Leases (see :mod:`cxreval.llm.cache`) last ``timeout + LEASE_MARGIN``
seconds and are renewed at the start of every HTTP attempt, before every wait between attempts
(to cover it) and by a heartbeat while the runner runs, but never for an attempt past its
deadline, so a live owner keeps its leases, a stuck request's lease lapses, and a dead owner's
expire within about ``timeout + 30`` seconds, on any host.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Self

from pydantic import BaseModel, Field

from .backends import (
    Backend,
    ChatResponse,
    DeadlineExceeded,
    FatalError,
    MalformedResponse,
    TransientError,
    make_backend,
)
from .cache import AnswerCache, CachedAnswer
from .config import LLMConfig
from .prompts import load_prompt
from .redact import config_redactor, map_strings
from .schemas import AnswerError, ParsedAnswer

MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 300.0
#: Bytes per token assumed when a server reports no usage (conservative: real text is ~4).
BYTES_PER_TOKEN = 3
#: How much of a raw answer is stored (cache, failures.jsonl) and shown back in a re-ask.
RAW_KEEP_CHARS = 8000
REASK_EXCERPT_CHARS = 2000
#: An answer longer than this many characters per max_tokens is over any schema's bounds.
CHARS_PER_TOKEN_BOUND = 8
LEASE_POLL_SECONDS = 0.2
#: Seconds a lease lasts past one request's timeout (renewed at every attempt and by a heartbeat).
LEASE_MARGIN = 30.0
#: The heartbeat renews a runner's leases at least this often (and at least 3 times per lease life).
HEARTBEAT_SECONDS = 10.0
Stage = Literal["answer", "transport", "deadline", "budget", "stopped"]


#: The re-ask's reminder for tasks that answer with entity ids (extract, pairwise, verify).
ENTITY_REASK = "using only entity ids from the list and only the allowed values"


@dataclass(frozen=True)
class Task:
    """One call to make: the messages, the schema the answer must follow and how to parse it."""

    key: str
    kind: str
    engine: str
    messages: list[dict[str, str]]
    schema: dict[str, Any]
    schema_name: str
    parse: Callable[[str], ParsedAnswer]
    reask_hint: str = ENTITY_REASK
    """What the re-ask reminds the model of: what this task's answer is made of."""


@dataclass
class Outcome:
    """What became of a task: ``value`` (validated items + notes) or a failure."""

    key: str
    ok: bool
    value: dict[str, Any] | None = None
    raw: list[str] = field(default_factory=list)
    error: str = ""
    stage: Stage | None = None
    cached: bool = False


class Usage(BaseModel):
    """Calls, tokens and cost of one run (cache hits cost nothing)."""

    tasks: int = 0
    cache_hits: int = 0
    requests: int = Field(0, description="HTTP requests sent, retries and re-asks included")
    answers: int = Field(0, description="requests that returned an answer")
    retries: int = 0
    reasks: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    failed: int = 0
    not_run: int = 0
    estimated: int = Field(
        0, description="HTTP 200s without usable usage (none, nonsensical, or an unusable body): tokens estimated"
    )
    retry_after_waits: list[float] = Field(default_factory=list, description="Retry-After values honoured")
    response_format: str | None = None
    stopped: str | None = None
    seconds: float = 0.0

    def add(self, other: Usage) -> None:
        for name in (
            "tasks",
            "cache_hits",
            "requests",
            "answers",
            "retries",
            "reasks",
            "input_tokens",
            "output_tokens",
            "failed",
            "not_run",
            "estimated",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost += other.cost
        self.seconds += other.seconds
        self.retry_after_waits.extend(other.retry_after_waits)
        self.response_format = other.response_format or self.response_format
        self.stopped = self.stopped or other.stopped


class RateLimiter:
    """At most ``rate`` request starts per second, spaced evenly."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = 0.0

    async def wait(self) -> None:
        if not self.interval:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = max(now, self._next)
        self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


class LLMRunner:
    """Executes tasks against one backend and one cache; reusable for several batches."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        backend: Backend | None = None,
        cache: AnswerCache | None = None,
        retry_failed: bool = False,
    ) -> None:
        self.config = config
        self._backend = backend
        self.cache = cache if cache is not None else AnswerCache(config.resolved_cache_path())
        self.retry_failed = retry_failed
        self.limiter = RateLimiter(config.rate_limit)
        self.reask = load_prompt("reask")
        self.spent_here = 0.0  # by this runner, across its batches
        self.in_flight = 0  # this runner's requests holding a reservation (rows in the store)
        self._deadlines: dict[str, float] = {}  # key -> loop time its HTTP attempt in flight must end by
        self._released = asyncio.Event()  # set (and replaced) whenever a reservation is given back
        self.stop_reason: str | None = None

    @property
    def lease_ttl(self) -> float:
        """Seconds a lease lasts unless renewed: one request's timeout and a margin."""
        return self.config.timeout + LEASE_MARGIN

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = make_backend(self.config)
        return self._backend

    async def aclose(self) -> None:
        self.cache.release()
        if self._backend is not None:
            await self._backend.aclose()

    @property
    def spent(self) -> float:
        """USD spent from this runner's answer store (this run and earlier ones; the ledger)."""
        return self.cache.spent()

    def redact(self, text: str, limit: int | None = 500) -> str:
        """``text`` through the one key redactor (:mod:`cxreval.llm.redact`), then cut to ``limit``."""
        if self._backend is not None:
            return self._backend.redact(text, limit)
        return config_redactor(self.config)(text, limit)  # no backend yet: the same redactor, on the config's key

    # -- one batch ------------------------------------------------------------------------
    async def run(
        self, tasks: Sequence[Task], *, progress: bool = False, label: str = "LLM calls"
    ) -> tuple[dict[str, Outcome], Usage]:
        """Outcome per task key (tasks with equal keys are run once)."""
        t0 = time.perf_counter()
        usage = Usage()
        unique: dict[str, Task] = {}
        for t in tasks:
            unique.setdefault(t.key, t)
        usage.tasks = len(unique)
        outcomes: dict[str, Outcome] = {}
        todo: list[Task] = []
        for task in unique.values():
            hit = self.cache.get(task.key)
            if hit is not None and (hit.status == "ok" or not self.retry_failed):
                usage.cache_hits += 1
                outcomes[task.key] = self._cached_outcome(hit)  # hit.key is task.key (the store's primary key)
                if hit.status != "ok":
                    usage.failed += 1
            else:
                todo.append(task)
        if todo:
            _ = self.backend  # create the client (imports httpx2) before timing the calls
            if not self.in_flight:  # nobody waits on it: a fresh one, bound to this event loop
                self._released = asyncio.Event()
            t0 = time.perf_counter()
            bar = _Bar(len(unique), len(unique) - len(todo), label, progress)
            queue = iter(todo)

            async def worker() -> None:
                for task in queue:
                    out = await self._one(task, usage)
                    outcomes[task.key] = out
                    bar.advance(out, self.spent_here)

            beat = asyncio.ensure_future(self._heartbeat())
            try:
                with bar:
                    await asyncio.gather(*(worker() for _ in range(min(self.config.concurrency, len(todo)))))
            finally:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat
                usage.response_format = getattr(self._backend, "format", None) or self.config.response_format
        if self.stop_reason:  # said once every call in flight has finished, so the figures are final
            usage.stopped = (
                f"{self.stop_reason}; {self.spent:.4f} USD spent from {self.cache.path} ({self.spent_here:.4f} USD by this run)"
                if self.stop_reason.startswith("--max-cost")
                else self.stop_reason
            )
        usage.seconds = time.perf_counter() - t0
        return outcomes, usage

    def _not_run(self, task: Task, usage: Usage) -> Outcome:
        usage.not_run += 1
        stage: Stage = "budget" if self.stop_reason and self.stop_reason.startswith("--max-cost") else "stopped"
        return Outcome(key=task.key, ok=False, error=f"not run: {self.stop_reason}", stage=stage)

    def _cached_outcome(self, hit: CachedAnswer) -> Outcome:
        return Outcome(
            key=hit.key,
            ok=hit.status == "ok",
            value=hit.value,
            raw=hit.raw,
            error=hit.error,
            stage=None if hit.status == "ok" else "answer",
            cached=True,
        )

    async def _heartbeat(self) -> None:
        """Renew the leases of this runner's store owner while calls run, except those of HTTP
        attempts past their deadline: a request that cannot end must not keep others waiting."""
        every = min(HEARTBEAT_SECONDS, self.lease_ttl / 3)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(every)
            overdue = [k for k, end in self._deadlines.items() if end <= loop.time()]
            with contextlib.suppress(sqlite3.Error):  # a busy store: the next beat or attempt renews
                self.cache.renew(None, self.lease_ttl, skip=overdue)

    async def _wait_for_lease(self, task: Task, usage: Usage) -> Outcome | None:
        """Take the task's lease; while another process holds it, wait and use its answer."""
        ttl = self.lease_ttl
        while not self.cache.claim(task.key, ttl):
            await asyncio.sleep(LEASE_POLL_SECONDS)
            hit = self.cache.get(task.key)
            if hit is not None and (hit.status == "ok" or not self.retry_failed):
                usage.cache_hits += 1
                usage.failed += hit.status != "ok"
                return self._cached_outcome(hit)
        hit = self.cache.get(task.key)  # stored between our first look and the lease
        if hit is not None and (hit.status == "ok" or not self.retry_failed):
            self.cache.release(task.key)
            usage.cache_hits += 1
            usage.failed += hit.status != "ok"
            return self._cached_outcome(hit)
        return None

    async def _one(self, task: Task, usage: Usage) -> Outcome:
        if self.stop_reason:
            return self._not_run(task, usage)
        try:
            shared = await self._wait_for_lease(task, usage)
            if shared is not None:
                return shared
            return await self._ask(task, usage)
        except Exception as exc:  # noqa: BLE001 - one task's surprise never ends the run; Ctrl-C and cancellation pass
            usage.failed += 1
            return Outcome(
                key=task.key, ok=False, error=self.redact(f"unexpected error: {type(exc).__name__}: {exc}"), stage="transport"
            )
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.cache.release(task.key)

    async def _ask(self, task: Task, usage: Usage) -> Outcome:
        cfg = self.config
        raws: list[str] = []
        tokens = [0, 0]
        calls = 0
        messages = list(task.messages)
        error = ""
        max_out = cfg.max_tokens_for(task.schema)
        bound = max_out * CHARS_PER_TOKEN_BOUND
        for attempt in range(2):  # the answer, then at most one re-ask
            try:
                resp = await self._call(messages, task, usage)
            except BudgetReached:
                return self._not_run(task, usage)
            except TransientError as exc:
                usage.failed += 1
                stage: Stage = "deadline" if isinstance(exc, DeadlineExceeded) else "transport"
                return Outcome(key=task.key, ok=False, raw=raws, error=self.redact(str(exc)), stage=stage)
            except FatalError as exc:
                self.stop_reason = self.stop_reason or f"endpoint refused the request: {self.redact(str(exc))}"
                usage.failed += 1
                return Outcome(key=task.key, ok=False, raw=raws, error=self.redact(str(exc)), stage="stopped")
            calls += 1
            text = self.redact(resp.text, limit=None)  # an echoed key never reaches parse, cache or outputs
            raws.append(_excerpt(text, RAW_KEEP_CHARS))
            tokens[0] += resp.input_tokens or 0
            tokens[1] += resp.output_tokens or 0
            try:
                if len(text) > bound:
                    raise AnswerError(
                        f"the answer is {len(text):,} characters, over the bound of {bound:,} "
                        f"({CHARS_PER_TOKEN_BOUND} per token of max_tokens={max_out}); "
                        "answer with the JSON object only"
                    )
                try:
                    parsed = task.parse(text)
                except AnswerError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a parser surprised by the answer: an invalid answer
                    raise AnswerError(
                        self.redact(
                            f"the answer could not be read ({type(exc).__name__}: {exc}); "
                            "answer with one JSON object of the schema",
                            limit=300,
                        )
                    ) from None
            except AnswerError as exc:
                error = str(exc)
                if resp.finish_reason == "length" or resp.finish_reason == "max_tokens":
                    error += cut_off_reason(text, max_out)
                if attempt == 0:
                    usage.reasks += 1
                    messages = [
                        *task.messages,
                        {"role": "assistant", "content": _excerpt(text, REASK_EXCERPT_CHARS) or "(empty answer)"},
                        {"role": "user", "content": self.reask.render("user", error=error, hint=task.reask_hint)},
                    ]
                continue
            value = map_strings({"items": parsed.items, "notes": parsed.notes}, partial(self.redact, limit=None))
            return self._store(task, "ok", value, raws, "", tokens, calls)
        usage.failed += 1
        error = f"invalid answer after one re-ask: {error}"
        return self._store(task, "failed", None, raws, error, tokens, calls)

    def _store(self, task: Task, status: str, value: Any, raws: list[str], error: str, tokens: list[int], calls: int) -> Outcome:
        """Store the outcome; if a valid answer was stored meanwhile (another process), that one wins."""
        stored = self.cache.put(
            CachedAnswer(
                key=task.key,
                kind=task.kind,
                engine=task.engine,
                model=self.config.model,
                status=status,
                value=value,
                raw=raws,
                error=error,
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                calls=calls,
                cost=self.config.cost(*tokens),
                created=time.time(),
            )
        )
        if not stored:
            kept = self.cache.get(task.key)
            if kept is not None:
                return self._cached_outcome(kept)
        if status == "ok":
            return Outcome(key=task.key, ok=True, value=value, raw=raws)
        return Outcome(key=task.key, ok=False, raw=raws, error=error, stage="answer")

    async def _reserve(self, task: Task, messages: list[dict[str, str]]) -> int | None:
        """Reserve this request's worst-case cost in the store, waiting while requests in flight
        (any process's) hold the budget it needs; raise BudgetReached when it cannot fit (see the
        module doc). Returns the reservation's id (None: nothing to reserve, no prices). A run
        without a cap reserves too (always granted), so capped processes on the store count it."""
        cfg = self.config
        if cfg.max_cost is None and not (cfg.price_input or cfg.price_output):
            return None
        cap = cfg.max_cost if cfg.max_cost is not None else math.inf
        worst = cfg.cost(estimate_tokens(messages), cfg.max_tokens_for(task.schema))
        while True:
            budget = self.cache.reserve(task.key, worst, cap, self.lease_ttl)
            if budget.reservation is not None:
                self.in_flight += 1
                return budget.reservation
            if budget.in_flight == 0:  # only what is really spent is in the way: stop
                self.stop_reason = self.stop_reason or (
                    f"--max-cost {cap:g} USD reached (a request may cost up to {worst:.4f} USD, "
                    f"{max(cap - budget.spent, 0):.4f} USD left; `cxreval cache --reset-budget` starts a "
                    "new budget)"
                )
                self._signal()  # the others waiting stop too
                raise BudgetReached(self.stop_reason)
            # a request in flight finishes (here: signalled; another process's: seen at the next look)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), LEASE_POLL_SECONDS)

    def _unreserve(self, reservation: int | None, *, charged: bool = False) -> None:
        """Give back a reservation (``charged``: the ledger write already did, in its transaction)."""
        if reservation is None:
            return
        self.in_flight -= 1
        if not charged:
            self.cache.unreserve(reservation)
        self._signal()

    def _signal(self) -> None:
        released, self._released = self._released, asyncio.Event()
        released.set()

    def _charge(
        self, task: Task, usage: Usage, input_tokens: int, output_tokens: int, estimated: bool, reservation: int | None = None
    ) -> None:
        """Count one HTTP 200's tokens and cost in ``usage`` and the store's ledger (the budget),
        giving back its reservation in the same transaction."""
        cfg = self.config
        usage.estimated += estimated
        usage.input_tokens += input_tokens
        usage.output_tokens += output_tokens
        cost = cfg.cost(input_tokens, output_tokens)
        usage.cost += cost
        self.spent_here += cost
        self.cache.record_spend(task.key, cfg.model, input_tokens, output_tokens, estimated, cost, reservation)

    async def _call(self, messages: list[dict[str, str]], task: Task, usage: Usage) -> ChatResponse:
        """The answer to ``messages``, retrying transient failures (FatalError and BudgetReached pass)."""
        cfg = self.config
        attempts = cfg.retries + 1
        for attempt in range(attempts):
            await self.limiter.wait()
            result = await self._attempt(messages, task, usage)
            if isinstance(result, ChatResponse):
                return result
            if attempt + 1 >= attempts:
                gave_up = DeadlineExceeded if isinstance(result, DeadlineExceeded) else TransientError
                raise gave_up(f"{result} (gave up after {attempts} attempts)") from None
            usage.retries += 1
            if result.retry_after is not None:
                delay = min(result.retry_after, MAX_RETRY_AFTER)
                usage.retry_after_waits.append(delay)
            else:
                delay = min(MAX_BACKOFF, 0.5 * 2**attempt) * random.uniform(0.5, 1.0)
            with contextlib.suppress(sqlite3.Error):  # a busy store: the heartbeat renews
                self.cache.renew(task.key, delay + self.lease_ttl)  # the wait and the next attempt
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _attempt(self, messages: list[dict[str, str]], task: Task, usage: Usage) -> ChatResponse | TransientError:
        """One HTTP attempt inside its reservation: the answer or the transient failure. An HTTP 200
        (a malformed one too: a provider bills it) is charged, which gives the reservation back in
        the same transaction; otherwise it is given back as the attempt ends, however it ends."""
        cfg = self.config
        reservation = await self._reserve(task, messages)
        usage.requests += 1
        charged = False
        try:
            result = await self._request(messages, task)
            if isinstance(result, MalformedResponse):
                out_tokens = min(-(-result.body_bytes // BYTES_PER_TOKEN), cfg.max_tokens_for(task.schema))
                self._charge(task, usage, estimate_tokens(messages), out_tokens, True, reservation)
                charged = True
            elif isinstance(result, ChatResponse):
                usage.answers += 1
                result, estimated = self._believed(result, messages, cfg.max_tokens_for(task.schema))
                assert result.input_tokens is not None and result.output_tokens is not None
                self._charge(task, usage, result.input_tokens, result.output_tokens, estimated, reservation)
                charged = True
            return result
        finally:
            with contextlib.suppress(sqlite3.Error):  # a busy store: the reservation expires by itself
                self._unreserve(reservation, charged=charged)

    async def _request(self, messages: list[dict[str, str]], task: Task) -> ChatResponse | TransientError:
        """The backend's answer or transient failure (FatalError passes). The lease is renewed first;
        the heartbeat renews it until the attempt's deadline, not after."""
        self._deadlines[task.key] = asyncio.get_running_loop().time() + self.config.timeout
        try:
            self.cache.renew(task.key, self.lease_ttl)
            return await self.backend.complete(messages, task.schema, task.schema_name)
        except FatalError:
            raise
        except TransientError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a surprise in the client: a transport error, retried
            return TransientError(self.redact(f"{type(exc).__name__}: {exc}"))
        finally:
            self._deadlines.pop(task.key, None)

    def _believed(self, resp: ChatResponse, messages: list[dict[str, str]], max_out: int) -> tuple[ChatResponse, bool]:
        """``resp`` with the token counts to charge, and whether they are estimated: a count that is
        missing, or zero for a non-empty prompt / answer, is not believed."""
        tokens_in = resp.input_tokens if resp.input_tokens or not any(m.get("content") for m in messages) else None
        tokens_out = resp.output_tokens if resp.output_tokens or not resp.text else None
        estimated = tokens_in is None or tokens_out is None
        return resp.model_copy(
            update={
                "input_tokens": tokens_in if tokens_in is not None else estimate_tokens(messages),
                "output_tokens": tokens_out if tokens_out is not None else min(_estimate(resp.text), max_out),
            }
        ), estimated


class BudgetReached(Exception):
    """A request was not started: it could take the spending past ``--max-cost``."""


def _estimate(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """Tokens a prompt may take, at one token per 3 bytes (real tokenisers average ~4)."""
    return sum(_estimate(m.get("content", "")) + 4 for m in messages)


#: Whitespace at the end of an answer cut off at its token limit that names a whitespace loop.
WHITESPACE_LOOP_CHARS = 64


def cut_off_reason(text: str, max_tokens: int) -> str:
    """Why an answer stopped at ``max_tokens``: plainly cut off, or (a run of at least
    :data:`WHITESPACE_LOOP_CHARS` whitespace characters at its end) caught in the whitespace loop
    of guided JSON decoding, which a grammar that allows whitespace between tokens lets a model
    write until the limit (docs/llm.md, "Guided decoding")."""
    run = len(text) - len(text.rstrip())
    if run >= WHITESPACE_LOOP_CHARS:
        return (
            f" (the answer ended in {run:,} whitespace characters and was cut off at max_tokens={max_tokens}: "
            "a whitespace loop of guided JSON decoding; start the server with whitespace between JSON tokens "
            "disallowed, e.g. vLLM's disable_any_whitespace, docs/llm.md 'Guided decoding')"
        )
    return f" (the answer was cut off at max_tokens={max_tokens})"


def _excerpt(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a note of how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit:,} more characters not kept]"


class _Bar:
    """A rich progress bar on stderr (or nothing)."""

    def __init__(self, total: int, done: int, label: str, show: bool) -> None:
        self.show = show
        self.failed = 0
        if show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                console=Console(file=sys.stderr),
                transient=True,
            )
            self.task = self.progress.add_task(label, total=total, completed=done, info="")

    def __enter__(self) -> Self:
        if self.show:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.show:
            self.progress.stop()

    def advance(self, outcome: Outcome, spent: float) -> None:
        if not self.show:
            return
        self.failed += not outcome.ok
        self.progress.update(self.task, advance=1, info=f"failed {self.failed}  cost {spent:.4f} USD")
