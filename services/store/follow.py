"""Store replicas follow a moved workspace at once (docs/servers.md, Moving).

The move's switch commits a NOTIFY on the control database with the
workspace's id; every store process (and embedding job) LISTENs on one
dedicated connection and drops its cached record of that workspace, so the
next call reads the new location instead of meeting the sealed old database
until the cache expires. Without the listener (its connection lost) the
cache's own expiry (WORKSPACE_CACHE_SECONDS) still bounds how long a replica
lags: the notification only shortens it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

log = logging.getLogger("recallatron.store.follow")

# The channel of services.store.move_queries.NOTIFY_MOVED.
LISTEN = "LISTEN recallatron_workspace_moved"
POLL_SECONDS = 0.5


class MoveFollower:
    def __init__(
        self,
        control_url: str,
        stop: threading.Event,
        on_moved: Callable[[str], None],
        retry_seconds: float = 1.0,
    ) -> None:
        self.control_url = control_url
        self.stop = stop
        self.on_moved = on_moved
        self.retry_seconds = retry_seconds
        self._thread = threading.Thread(target=self._run, name="move-follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.control_url, autocommit=True) as conn:
                    conn.execute(LISTEN)
                    while not self.stop.is_set():
                        for notify in conn.notifies(timeout=POLL_SECONDS):
                            self.on_moved(notify.payload)
            except psycopg.Error as exc:
                log.warning(
                    "move listener lost its connection; retrying",
                    extra={"error": type(exc).__name__},
                )
            self.stop.wait(self.retry_seconds)
