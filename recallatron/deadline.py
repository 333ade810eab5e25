"""The deadline of the call being served, and what to stop when its client
gives up (design §9; issue 22). The server sets a :class:`Scope` around each
handler (:mod:`recallatron.grpcserver`); code below it reads what time is
left (to cap its own waits and the calls and statements it makes) and
registers what to cancel if the call ends first (a deadline passed, the
client cancelled). Plain Python: no gRPC here."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from recallatron import errors

# gRPC reports a call without a deadline as ~292 years left.
NO_DEADLINE_SECONDS = 1e9


class Scope:
    def __init__(self, remaining: float | None) -> None:
        if remaining is not None and remaining >= NO_DEADLINE_SECONDS:
            remaining = None
        self.deadline = None if remaining is None else time.monotonic() + remaining
        self._lock = threading.Lock()
        self._next = 0
        # What to stop; any value it returns (a future's cancel() says whether
        # it did) is ignored.
        self._on_abandon: dict[int, Callable[[], object]] = {}
        self._abandoned = False
        self._finished = False

    def remaining(self) -> float | None:
        """Seconds left (negative once past); None: no deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def on_abandon(self, fn: Callable[[], object]) -> Callable[[], None]:
        """Runs ``fn`` when the call is abandoned (at once if it already is);
        returns the function that takes it back."""
        with self._lock:
            if not self._abandoned:
                key = self._next
                self._next += 1
                self._on_abandon[key] = fn
                return lambda: self._forget(key)
        fn()
        return lambda: None

    def _forget(self, key: int) -> None:
        with self._lock:
            self._on_abandon.pop(key, None)

    def abandon(self) -> None:
        """The call ended (its client is gone) while the handler may still
        run: what it registered is stopped. A no-op once it has returned."""
        with self._lock:
            if self._finished or self._abandoned:
                return
            self._abandoned = True
            pending = list(self._on_abandon.values())
            self._on_abandon.clear()
        for fn in pending:
            fn()

    def finish(self) -> None:
        with self._lock:
            self._finished = True
            self._on_abandon.clear()


_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "recallatron_deadline", default=None
)


def current() -> Scope | None:
    return _SCOPE.get()


def enter(scope: Scope) -> Callable[[], None]:
    token = _SCOPE.set(scope)
    return lambda: _SCOPE.reset(token)


@contextmanager
def detached() -> Iterator[None]:
    """A block that runs to its end whatever becomes of the current call: what
    a committed write still owes (waking the embedding job) must not be
    skipped because the call's deadline passed or its client left."""
    token = _SCOPE.set(None)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def remaining() -> float | None:
    """Seconds left of the current call (None outside a call or without a
    deadline); DeadlineExceeded once none is left or the call was abandoned."""
    scope = _SCOPE.get()
    if scope is None:
        return None
    left = scope.remaining()
    if scope.abandoned or (left is not None and left <= 0):
        raise errors.DeadlineExceeded("the call's deadline passed before this step")
    return left


def capped(seconds: float) -> float:
    """``seconds``, or what is left of the current call when less."""
    left = remaining()
    return seconds if left is None else min(seconds, left)
