"""Store replicas follow a moved workspace at once (docs/servers.md, Moving).

The move's switch commits a NOTIFY on the control database with the
workspace's id; every store process (and embedding job) LISTENs on one
dedicated connection and drops its cached record of that workspace, so the
next call reads the new location instead of meeting the sealed old database
until the cache expires. Without the listener (its connection lost) the
cache's own expiry (WORKSPACE_CACHE_SECONDS) still bounds how long a replica
lags: the notification only shortens it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.store.infrastructure.listen import Listener

# The channel of services.store.sql.move_queries.NOTIFY_MOVED.
CHANNEL = "recallatron_workspace_moved"


class MoveFollower(Listener):
    def __init__(
        self,
        control_url: str,
        stop: threading.Event,
        on_moved: Callable[[str], None],
        retry_seconds: float = 1.0,
    ) -> None:
        super().__init__(
            "move-follower", control_url, CHANNEL, stop, on_moved, retry_seconds=retry_seconds
        )
