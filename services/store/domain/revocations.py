"""Token revocations, pushed to the gateways that cache authentication.

A revocation commits a NOTIFY on the control database in its own transaction
(services/store/domain/control.py). Every store process LISTENs on one dedicated
connection and hands each notification to the gateways subscribed to it
through WatchRevocations. A gateway learns that its stream is live from the
first message; when the listener loses its connection, every stream is ended,
so no gateway keeps a cache that could have missed a revocation."""

from __future__ import annotations

import logging
import queue
import threading

import psycopg

from recallatron import errors
from services.store.infrastructure.listen import Listener

log = logging.getLogger("recallatron.store.revocations")

# The channel of services.store.sql.queries.NOTIFY_REVOKED.
CHANNEL = "recallatron_revocations"

# A subscriber's queue: token ids, then None when the feed can no longer vouch
# for completeness.
Subscription = queue.Queue[str | None]


class RevocationFeed:
    def __init__(self, control_url: str, stop: threading.Event, retry_seconds: float = 1.0) -> None:
        self.control_url = control_url
        self.stop = stop
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._subscribers: set[Subscription] = set()
        self._live = False
        # A connection whose server vanished ends too (listen.py), so the
        # streams end and no gateway keeps caching on a feed gone silent.
        self._listener = Listener(
            "revocations",
            control_url,
            CHANNEL,
            stop,
            self._publish,
            on_connect=self._connected,
            retry_seconds=retry_seconds,
            on_lost=lambda: self._set_live(False),
        )

    def start(self) -> None:
        self._listener.start()

    @property
    def live(self) -> bool:
        """Connected to the control database and listening: the store's
        readiness (services/store/__main__.py), since no call works without it."""
        with self._lock:
            return self._live

    def subscribe(self) -> Subscription:
        """A queue of every revocation from now on. UNAVAILABLE while the
        listener is not connected (nothing could be promised)."""
        subscription: Subscription = queue.Queue()
        with self._lock:
            if not self._live:
                raise errors.Unavailable("revocation feed not connected; retry shortly")
            self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

    def _publish(self, token_id: str) -> None:
        with self._lock:
            for subscription in self._subscribers:
                subscription.put(token_id)

    def _set_live(self, live: bool) -> None:
        with self._lock:
            self._live = live
            ended = list(self._subscribers) if not live else []
            if not live:
                self._subscribers.clear()
        for subscription in ended:
            subscription.put(None)

    def _connected(self, _conn: psycopg.Connection) -> None:
        self._set_live(True)
        log.info("listening for token revocations")
