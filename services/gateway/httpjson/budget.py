"""The bytes of HTTP/JSON request bodies one process holds at once.

Each call's body is read whole before it is decoded, up to the message
limit; the connections bound how many calls arrive at once, not what their
bodies add up to (1,000 of 8 MiB against a pod's few hundred MiB). A call
reserves its body's size from the budget before reading it (its declared
length, or chunk by chunk when it declares none) and gives it back when it
ends, however it ends; one that would pass the budget is refused unread. A
gzip body reserves what it inflates to as well, as it inflates, and is
refused the same way past the budget."""

from __future__ import annotations

import threading


class BodyBudget:
    """``limit`` bytes shared by every call of one app (thread-safe: the
    event loop reserves, a call may end on another thread)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Reserves ``size`` bytes; False (nothing reserved) when they do not fit."""
        with self._lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.held -= size


class Reservation:
    """One call's share of the budget: grows to cover what it reads, and
    goes back whole with :meth:`release`."""

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self.size = 0

    def cover(self, size: int) -> bool:
        """Holds at least ``size`` bytes; False (holding what it held) when
        the rest does not fit."""
        more = size - self.size
        if more <= 0:
            return True
        if not self.budget.take(more):
            return False
        self.size = size
        return True

    def hold(self, size: int) -> None:
        """Holds ``size`` bytes at most, giving back the rest (a gzip body's
        bytes as sent, dropped once it is inflated)."""
        if size < self.size:
            self.budget.give(self.size - size)
            self.size = size

    def release(self) -> None:
        self.budget.give(self.size)
        self.size = 0
