"""A bounded cache of values that expire: per-workspace records read on every
call and changed rarely (rank's workspace settings, the store's workspace
records). A process may serve any number of workspaces over its life, most
of them briefly (and some deleted since): an entry past its seconds is
dropped, not only ignored, and at most ``max_entries`` are kept, the oldest
dropped first, so what the cache holds follows the workspaces in use now."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ExpiringCache(Generic[K, V]):
    def __init__(
        self,
        seconds: float,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.seconds = seconds
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        # Kept in the order put, so the oldest (the first to expire) is first.
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value put less than ``seconds`` ago; None otherwise."""
        now = self.clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            if now - hit[0] < self.seconds:
                return hit[1]
            del self._entries[key]
            return None

    def put(self, key: K, value: V, read_at: float | None = None) -> None:
        """``read_at``: when the value was read (before a slow load, so that
        its age counts from then); now by default."""
        now = self.clock()
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (now if read_at is None else read_at, value)
            self._drop_expired(now)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _drop_expired(self, now: float) -> None:
        # Amortised: each entry is dropped once; the walk stops at the first
        # entry still fresh (those after it were put later).
        while self._entries:
            stamp, _ = next(iter(self._entries.values()))
            if now - stamp < self.seconds:
                return
            self._entries.popitem(last=False)
