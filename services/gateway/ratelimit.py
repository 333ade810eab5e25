"""Per-token rate limit of the gateway: a token bucket per bearer token (keyed
by its sha256, so no token is kept in memory in the clear). Over the limit a
call gets RESOURCE_EXHAUSTED before anything else runs. The same buckets,
charged only for failed authentications and keyed by the peer's address,
limit floods of bad tokens (:class:`FailureLimiter`). And the key the fair
scheduler serves a call under (:func:`fair_key_of`, recallatron/fairness.py):
its workspace when the token is known, else the token."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from recallatron import errors
from recallatron.grpcserver import KeyOf

log = logging.getLogger("recallatron.gateway.ratelimit")
# At most one warning per address this often: an operator learns that an
# address is being refused without a log line per refused call.
WARN_EVERY_SECONDS = 30.0

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
        wait = self._take(token_key(token), charge=True)
        if wait:
            raise errors.ResourceExhausted(
                f"authorization: rate limit of {self.per_second:g} calls/s for this token; "
                f"retry in {wait:.2f} s",
                wait,
            )

    def _take(self, key: bytes, charge: bool) -> float:
        """0 when the bucket holds a call (taken when ``charge``); otherwise
        the seconds until it will."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.per_second)
            allowed = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if allowed and charge else tokens, now)
            if now - self._last_sweep > _IDLE_SECONDS:
                self._sweep(now)
        return 0.0 if allowed else (1.0 - tokens) / self.per_second

    def _sweep(self, now: float) -> None:
        self._last_sweep = now
        for key in [k for k, (_, last) in self._buckets.items() if now - last > _IDLE_SECONDS]:
            del self._buckets[key]


def peer_address(peer: str) -> str:
    """The address of a gRPC peer without its port ("ipv4:10.0.0.7:51234"
    -> "ipv4:10.0.0.7"): one bucket per client host, not per connection."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host, _, _port = rest.rpartition(":")
        return f"{kind}:{host}"
    return peer


class FailureLimiter:
    """Failed authentications per peer address: a bucket of ``burst``
    refilled at ``per_second``, spent only by a token the store does not
    know. An empty bucket refuses unknown tokens from that address with
    RESOURCE_EXHAUSTED before the store is asked; tokens already known (the
    auth cache) are not affected. 0 per second is no limit."""

    def __init__(self, per_second: float, burst: int) -> None:
        self.buckets = RateLimiter(per_second, burst)
        self._warned: dict[str, float] = {}
        self._lock = threading.Lock()

    def check(self, peer: str) -> None:
        if self.buckets.per_second <= 0:
            return
        address = peer_address(peer)
        wait = self.buckets._take(token_key(address), charge=False)
        if wait:
            self._warn(address)
            raise errors.ResourceExhausted(
                "authorization: too many failed authentications from this address; "
                f"retry in {wait:.2f} s",
                wait,
            )

    def failed(self, peer: str) -> None:
        if self.buckets.per_second > 0:
            self.buckets._take(token_key(peer_address(peer)), charge=True)

    def _warn(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._warned.get(address, -WARN_EVERY_SECONDS) < WARN_EVERY_SECONDS:
                return
            self._warned[address] = now
            if len(self._warned) > 10_000:  # addresses long quiet are forgotten
                self._warned = {a: t for a, t in self._warned.items() if now - t < 60}
        log.warning(
            "failed-authentication budget spent: refusing this address's unknown tokens",
            extra={"address": address, "burst": self.buckets.burst},
        )


def fair_key_of(workspace_of: Any) -> KeyOf:
    """The gateway's fairness key: ``workspace:<id>`` when the auth cache
    knows the token (``workspace_of`` takes its key), ``token:<hash>``
    otherwise; the sub-key is always the token."""

    def key_of(method: str, metadata: Sequence[tuple[str, Any]]) -> tuple[str, str] | None:
        for k, v in metadata or ():
            if k == "authorization":
                scheme, _, token = str(v).partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    return None
                key = token_key(token.strip())
                sub = "token:" + key[:12].hex()
                workspace = workspace_of(key)
                return (f"workspace:{workspace}" if workspace else sub), sub
        return None

    return key_of
