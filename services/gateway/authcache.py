"""Authentication without a store round trip per call, and without trusting a
revoked token: identities are cached only while this gateway watches the
store's revocation stream (WatchRevocations), and every revocation (or
rotation) empties the cache; an entry lives no longer than its token. A lookup
that began before a revocation cannot put its now stale answer in afterwards
(the generation check in :meth:`AuthCache.put`)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from prometheus_client import Counter, Gauge

from recallatron import internal_auth
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2, store_pb2_grpc
from services.gateway.ratelimit import token_key

log = logging.getLogger("recallatron.gateway.authcache")

LOOKUPS = Counter(
    "recallatron_gateway_auth_cache_total",
    "Token lookups: answered from the cache (hit) or by the store (miss).",
    ["result"],
)
LIVE = Gauge(
    "recallatron_gateway_auth_cache_live",
    "1 while the revocation stream is live and identities may be cached.",
)
# Whether this gateway caches at all: with the cache off (a setting of 0) the
# stream is never watched, and LIVE's 0 is no loss to alert on.
ENABLED = Gauge(
    "recallatron_gateway_auth_cache_enabled",
    "1 when the gateway caches authenticated tokens (RECALLATRON_AUTH_CACHE_* above 0).",
)
# Reconnecting to the revocation stream: first wait, and the longest.
MIN_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 5.0


@dataclass(frozen=True)
class Identity:
    workspace_id: str
    member_id: str
    role: cpb.Role.ValueType
    # The token's scope (services/gateway/scopes.py): purposes (empty: all)
    # and read-only.
    purposes: frozenset[int] = frozenset()
    read_only: bool = False
    # When the token expires (seconds since the epoch; None: never): a cached
    # identity is not used from then on.
    expires_at: float | None = None
    # Shown back to the caller (WhoAmI); "" from a store that predates them.
    workspace_slug: str = ""
    member_handle: str = ""

    def is_workspace(self, given: str) -> bool:
        """Whether ``given`` names this identity's workspace, in any spelling
        of its UUID (capitals, no hyphens)."""
        return same_id(given, self.workspace_id)

    def is_member(self, given: str) -> bool:
        return same_id(given, self.member_id)


def same_id(given: str, known: str) -> bool:
    try:
        return uuid.UUID(given) == uuid.UUID(known)
    except ValueError:
        return given == known


class AuthCache:
    def __init__(self, max_age_seconds: float, max_entries: int) -> None:
        self.max_age = max_age_seconds
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[float, Identity]] = OrderedDict()
        self._live = False
        self._generation = 0

    @property
    def enabled(self) -> bool:
        return self.max_age > 0 and self.max_entries > 0

    def get(self, token: str) -> Identity | None:
        key = token_key(token)
        with self._lock:
            hit = self._entries.get(key) if self._live else None
            if hit is not None and self._fresh(hit):
                self._entries.move_to_end(key)
                LOOKUPS.labels("hit").inc()
                return hit[1]
            if hit is not None:
                del self._entries[key]
        LOOKUPS.labels("miss").inc()
        return None

    def workspace_of(self, key: bytes) -> str | None:
        """The workspace of a cached, live token given by its key, without
        counting a lookup (the fair scheduler asks before every call)."""
        with self._lock:
            hit = self._entries.get(key) if self._live else None
        if hit is None or not self._fresh(hit):
            return None
        return hit[1].workspace_id

    def _fresh(self, hit: tuple[float, Identity]) -> bool:
        """Young enough, and its token not expired (the wall clock: expiry is
        a time of day, set by the store)."""
        expires_at = hit[1].expires_at
        if expires_at is not None and time.time() >= expires_at:
            return False
        return time.monotonic() - hit[0] < self.max_age

    def generation(self) -> int:
        """Read before asking the store; pass to :meth:`put` with its answer."""
        with self._lock:
            return self._generation

    def put(self, token: str, identity: Identity, generation: int) -> None:
        """Keeps the store's answer, unless the cache was emptied (a revocation,
        or the stream going down) since ``generation`` was read."""
        if not self.enabled:
            return
        key = token_key(token)
        with self._lock:
            if not self._live or generation != self._generation:
                return
            self._entries[key] = (time.monotonic(), identity)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def flush(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def set_live(self, live: bool) -> None:
        """Caching starts (empty) when the stream says it is live and stops
        (emptied) when it ends."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._live = live and self.enabled
        LIVE.set(1 if live and self.enabled else 0)


class RevocationWatcher:
    """Keeps a WatchRevocations stream open to the store, reconnecting with
    backoff, and drives the cache from it."""

    def __init__(
        self, channel: grpc.Channel, cache: AuthCache, assertion: Callable[[], str] | None = None
    ) -> None:
        self.stub = store_pb2_grpc.StoreServiceStub(channel)
        self.cache = cache
        # A fresh caller assertion for each connection (the store's is internal).
        self.assertion = assertion
        self.stop = threading.Event()
        self._call: Any = None
        self._thread = threading.Thread(target=self._run, name="revocations", daemon=True)

    def start(self) -> None:
        ENABLED.set(1 if self.cache.enabled else 0)
        if self.cache.enabled:
            self._thread.start()

    def close(self) -> None:
        self.stop.set()
        call = self._call
        if call is not None:
            call.cancel()

    def _run(self) -> None:
        backoff = MIN_BACKOFF_SECONDS
        while not self.stop.is_set():
            # The one call without a deadline: it is meant to stay open.
            metadata = (
                ((internal_auth.HEADER, self.assertion()),) if self.assertion is not None else None
            )
            self._call = self.stub.WatchRevocations(
                store_pb2.WatchRevocationsRequest(), metadata=metadata
            )
            try:
                for message in self._call:
                    if message.subscribed:
                        self.cache.set_live(True)
                        backoff = MIN_BACKOFF_SECONDS
                        log.info("revocation stream live; caching authentication")
                    else:
                        self.cache.flush()
            except grpc.RpcError as exc:
                if not self.stop.is_set():
                    log.info(
                        "revocation stream down; authenticating every call",
                        extra={"code": str(exc.code())},
                    )
            finally:
                self.cache.set_live(False)
            self.stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
