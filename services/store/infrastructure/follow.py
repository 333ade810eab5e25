"""Store replicas follow a moved workspace at once (docs/servers.md, Moving).

The move's switch commits a NOTIFY on the control database with the
workspace's id; every store process (and embedding job) LISTENs on one
dedicated connection and drops its cached record of that workspace, so the
next call reads the new location instead of meeting the sealed old database
until the cache expires. Without the listener (its connection lost) the
cache's own expiry (settings_cache_seconds) still bounds how long a replica
lags: the notification only shortens it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.store.infrastructure.db import Databases
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


# The channel of services.store.sql.queries.NOTIFY_DELETED.
DELETED_CHANNEL = "recallatron_workspace_deleted"


class DeletionFollower(Listener):
    """Every process closes its pools of a deleted workspace's database at
    once (services/store/domain/deletion.py) and drops its record: the
    payload is "<workspace id> <server> <database>"."""

    def __init__(
        self,
        control_url: str,
        stop: threading.Event,
        dbs: Databases,
        forget_workspace: Callable[[str], None],
        retry_seconds: float = 1.0,
    ) -> None:
        def deleted(payload: str) -> None:
            parts = payload.split(" ")
            if len(parts) != 3:
                return
            workspace_id, server, database = parts
            forget_workspace(workspace_id)
            if server in dbs.servers.names:
                dbs.forget_pools(server, database)

        super().__init__(
            "deletion-follower",
            control_url,
            DELETED_CHANNEL,
            stop,
            deleted,
            retry_seconds=retry_seconds,
        )
