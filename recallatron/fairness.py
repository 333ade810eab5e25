"""Fair sharing of a server's worker threads (design §9; issue 22).

Every call is scheduled under a *key* (its workspace, or whatever stands for
the tenant when the workspace is not known yet) and a *sub-key* (the token or
member behind it). :class:`FairExecutor` is the thread pool a gRPC server runs
its handlers on; instead of one first-come queue it keeps a queue per key and
hands free threads to the keys in turn, at most ``concurrency`` calls of one
key at once. A waiting call holds no thread, so a busy workspace waits on
itself: another workspace's call runs as soon as any thread is free.

Admission (:meth:`FairExecutor.admit`) happens before a call is queued: past
``concurrency + queue`` outstanding calls of a key, or ``sub_limit`` of a
sub-key, the call is refused at once with a retry hint instead of queueing
without bound. Refusals and calls under no key (health checks, reflection)
skip the queues.

Plain Python: how a key is found in a call and how a refusal is answered is
:mod:`recallatron.grpcserver`'s business."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("recallatron.fairness")

# Least and most retry hint, in seconds.
MIN_RETRY_SECONDS = 0.05
MAX_RETRY_SECONDS = 5.0


@dataclass(frozen=True)
class Limits:
    # Calls of one key running at once.
    concurrency: int
    # Calls of one key waiting beyond those; more are refused.
    queue: int
    # Calls of one sub-key outstanding (running or waiting); 0: no limit.
    sub_limit: int = 0
    # Calls of one key running at once while no other key has had a call
    # outstanding for ``alone_after`` seconds (work-conserving: a lone tenant
    # may use what its share would leave idle); 0 or below ``concurrency``:
    # ``concurrency``. The wait keeps a neighbour that calls one call after
    # another from meeting the extra calls in every gap between its calls.
    alone: int = 0
    alone_after: float = 2.0


@dataclass
class Ticket:
    """One admitted call: the keys it counts against."""

    key: str
    sub: str = ""
    # Set for a call refused at admission: it runs at once, to be answered.
    refused: bool = False
    retry_after: float = 0.0


# The ticket of the call being scheduled. The gRPC server finds a call's
# handler (our interceptor sets this) and submits it in the same context.
TICKET: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "recallatron_ticket", default=None
)


@dataclass
class _Task:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    ticket: Ticket | None


@dataclass
class _Key:
    queue: deque[_Task] = field(default_factory=deque)
    running: int = 0
    outstanding: int = 0  # admitted, not finished
    # Smoothed seconds per call, for the retry hint.
    seconds: float = 0.05


class FairExecutor(Executor):
    def __init__(self, workers: int, limits: Limits, name: str = "fair") -> None:
        self.workers = max(1, workers)
        concurrency = max(1, limits.concurrency)
        self.limits = Limits(
            concurrency,
            max(0, limits.queue),
            limits.sub_limit,
            max(concurrency, limits.alone),
            limits.alone_after,
        )
        # When each key last had a call outstanding (for ``alone``).
        self._last_seen: dict[str, float] = {}
        self._cond = threading.Condition()
        self._keys: dict[str, _Key] = {}
        self._subs: dict[str, int] = {}
        # Keys with a queued call they may start now, in turn.
        self._ready: deque[str] = deque()
        self._in_ready: set[str] = set()
        # Refusals and calls under no key: before any queue.
        self._express: deque[_Task] = deque()
        self._shutdown = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for t in self._threads:
            t.start()

    # -- admission -------------------------------------------------------------

    def admit(self, key: str, sub: str = "") -> Ticket:
        """A ticket for one call of ``key`` (and ``sub``), counted from now;
        ``refused`` (with a retry hint) when the key or sub-key is full."""
        lim = self.limits
        with self._cond:
            state = self._keys.get(key)
            outstanding = state.outstanding if state else 0
            if outstanding >= lim.concurrency + lim.queue or (
                sub and lim.sub_limit and self._subs.get(sub, 0) >= lim.sub_limit
            ):
                waiting = max(1, outstanding - lim.concurrency + 1)
                per_call = state.seconds if state else MIN_RETRY_SECONDS
                hint = per_call * waiting / lim.concurrency
                return Ticket(
                    key,
                    sub,
                    refused=True,
                    retry_after=min(max(hint, MIN_RETRY_SECONDS), MAX_RETRY_SECONDS),
                )
            if state is None:
                state = self._keys[key] = _Key()
            state.outstanding += 1
            if sub:
                self._subs[sub] = self._subs.get(sub, 0) + 1
        return Ticket(key, sub)

    def outstanding(self, key: str) -> int:
        with self._cond:
            state = self._keys.get(key)
            return state.outstanding if state else 0

    # -- Executor --------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        ticket = _ticket_of(fn)
        future: Future[Any] = Future()
        task = _Task(future, fn, args, kwargs, ticket)
        with self._cond:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if ticket is None or ticket.refused:
                self._express.append(task)
            else:
                state = self._keys.get(ticket.key)
                if state is None:  # admitted elsewhere (a test); count it now
                    state = self._keys[ticket.key] = _Key(outstanding=1)
                state.queue.append(task)
                self._make_ready(ticket.key, state)
            self._cond.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
        if wait:
            for t in self._threads:
                t.join()

    # -- the workers -----------------------------------------------------------

    def _limit(self, key: str) -> int:
        """``key``'s running calls allowed now: ``alone`` while no other key
        has had a call outstanding for ``alone_after`` seconds."""
        lim = self.limits
        if lim.alone == lim.concurrency:
            return lim.concurrency
        if any(k != key for k in self._keys):
            return lim.concurrency
        now = time.monotonic()
        for other, seen in list(self._last_seen.items()):
            if now - seen >= lim.alone_after:
                del self._last_seen[other]  # long gone: forgotten
            elif other != key:
                return lim.concurrency
        return lim.alone

    def _make_ready(self, key: str, state: _Key) -> None:
        if state.queue and state.running < self._limit(key) and key not in self._in_ready:
            self._ready.append(key)
            self._in_ready.add(key)

    def _next(self) -> _Task | None:
        with self._cond:
            while True:
                while not self._express and not self._ready:
                    if self._shutdown:
                        return None
                    self._cond.wait()
                if self._express:
                    return self._express.popleft()
                key = self._ready.popleft()
                self._in_ready.discard(key)
                state = self._keys[key]
                if state.running >= self._limit(key):
                    # Made ready while it was alone; another key came since.
                    # It is made ready again once within its share (_done).
                    continue
                task = state.queue.popleft()
                state.running += 1
                # Back of the line: every other ready key goes first.
                self._make_ready(key, state)
                return task

    def _done(self, task: _Task, seconds: float) -> None:
        ticket = task.ticket
        if ticket is None or ticket.refused:
            return
        with self._cond:
            state = self._keys[ticket.key]
            state.running -= 1
            state.outstanding -= 1
            state.seconds = 0.8 * state.seconds + 0.2 * seconds
            if ticket.sub:
                left = self._subs.get(ticket.sub, 1) - 1
                if left > 0:
                    self._subs[ticket.sub] = left
                else:
                    self._subs.pop(ticket.sub, None)
            if self.limits.alone > self.limits.concurrency:
                self._last_seen[ticket.key] = time.monotonic()
            if state.outstanding <= 0 and not state.queue:
                del self._keys[ticket.key]
            else:
                self._make_ready(ticket.key, state)
                self._cond.notify()

    def _work(self) -> None:
        while True:
            task = self._next()
            if task is None:
                return
            started = time.perf_counter()
            try:
                if task.future.set_running_or_notify_cancel():
                    try:
                        task.future.set_result(task.fn(*task.args, **task.kwargs))
                    except BaseException as exc:  # handed to the future, as any executor does
                        task.future.set_exception(exc)
            finally:
                self._done(task, time.perf_counter() - started)


def _ticket_of(fn: Callable[..., Any]) -> Ticket | None:
    """The ticket a call was admitted with: gRPC submits ``context.run`` of
    the context its handler was found in, where the interceptor set it."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, contextvars.Context):
        return owner.get(TICKET)
    return TICKET.get()
