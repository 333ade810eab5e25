"""Per-token rate limit of the gateway: a token bucket per bearer token (keyed
by its sha256, so no token is kept in memory in the clear). Over the limit a
call gets RESOURCE_EXHAUSTED before anything else runs."""

from __future__ import annotations

import hashlib
import threading
import time

from recallatron import errors

# Buckets idle this long are dropped, so random tokens cannot grow the table.
_IDLE_SECONDS = 300.0


def token_key(token: str) -> bytes:
    """What the gateway keeps of a token: its sha256."""
    return hashlib.sha256(token.encode()).digest()


class RateLimiter:
    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second = per_second
        self.burst = max(burst, 1)
        self._buckets: dict[bytes, tuple[float, float]] = {}  # key -> (tokens, last)
        self._lock = threading.Lock()
        self._last_sweep = time.monotonic()

    def check(self, token: str) -> None:
        """Takes one call from the token's bucket; 0 per second is no limit."""
        if self.per_second <= 0:
            return
        key = token_key(token)
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.per_second)
            allowed = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            if now - self._last_sweep > _IDLE_SECONDS:
                self._sweep(now)
        if not allowed:
            raise errors.ResourceExhausted(
                f"authorization: rate limit of {self.per_second:g} calls/s for this token; "
                "retry shortly"
            )

    def _sweep(self, now: float) -> None:
        self._last_sweep = now
        for key in [k for k, (_, last) in self._buckets.items() if now - last > _IDLE_SECONDS]:
            del self._buckets[key]
