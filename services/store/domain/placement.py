"""Placing a new workspace on a server (docs/servers.md, "Placing new
workspaces"). Making the workspace's database takes a while, between reading
the servers and recording the workspace; so a placement reads the servers
and reserves its choice under one lock, and the workspace is recorded under
the same lock only while its server is not draining. Creations at once then
spread as if made one after another, and none is recorded on a server once
its drain has been acknowledged (the drain mark is changed under the lock
too). A move's switch takes the same lock (services/store/domain/moving.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from recallatron import errors
from services.store.infrastructure.db import Databases
from services.store.infrastructure.servers import place, unknown_server
from services.store.sql import placement_queries as pq
from services.store.sql import queries as q

# A placement not recorded within this long is a killed creation's: no
# longer counted (making a database takes well under a second; a server
# slow to answer gives up in seconds).
PLACEMENT_HOLD_SECONDS = 600.0


class DrainedMeanwhile(Exception):
    """The server placed on was marked draining before the workspace was recorded."""


def draining_refusal(server: str) -> errors.FailedPrecondition:
    return errors.FailedPrecondition(
        f"server: {server!r} is draining; mark it open again first (recallatron servers undrain)",
        "server",
    )


def choose(
    requested: str, configured: list[str], counts: Mapping[str, int], draining: set[str]
) -> str:
    """The named server, checked; or the placement policy's choice."""
    if requested:
        if requested not in configured:
            raise errors.InvalidArgument("server", unknown_server(requested, configured))
        if requested in draining:
            raise draining_refusal(requested)
        return requested
    chosen = place(configured, counts, draining)
    if chosen is None:
        raise errors.FailedPrecondition(
            "server: every configured server is draining; name one or open one", "server"
        )
    return chosen


@dataclass
class Placement:
    dbs: Databases

    def _read(self, conn: psycopg.Connection) -> tuple[dict[str, int], set[str]]:
        counts = {str(r[0]): int(r[1]) for r in conn.execute(pq.PLACED_PER_SERVER)}
        return counts, {str(r[0]) for r in conn.execute(q.DRAINING_SERVERS)}

    def check(self, requested: str) -> str:
        """The server a creation would be placed on now (nothing reserved)."""
        with self.dbs.control_conn() as conn:
            counts, draining = self._read(conn)
        return choose(requested, self.dbs.servers.names, counts, draining)

    def reserve(self, requested: str, database: str) -> str:
        """The server ``database`` is placed on, counted by every placement
        after this one until the workspace is recorded or ``release``."""
        with self.dbs.control_conn() as conn:
            conn.execute(pq.PLACEMENT_LOCK)
            conn.execute(pq.FORGET_OLD_PLACEMENTS, (PLACEMENT_HOLD_SECONDS,))
            counts, draining = self._read(conn)
            chosen = choose(requested, self.dbs.servers.names, counts, draining)
            conn.execute(pq.RESERVE_PLACEMENT, (database, chosen))
        return chosen

    def release(self, database: str) -> None:
        with self.dbs.control_conn() as conn:
            conn.execute(pq.RELEASE_PLACEMENT, (database,))

    @contextmanager
    def locked(self) -> Iterator[psycopg.Connection]:
        """A control transaction under the placement lock: a drain mark read
        in it cannot change before it commits (a move's switch takes it too)."""
        with self.dbs.control_conn() as conn:
            conn.execute(pq.PLACEMENT_LOCK)
            yield conn

    @staticmethod
    def is_draining(conn: psycopg.Connection, server: str) -> bool:
        row = conn.execute(pq.SERVER_DRAINING, (server,)).fetchone()
        return row is not None and bool(row[0])

    @contextmanager
    def recording(self, server: str, database: str) -> Iterator[psycopg.Connection]:
        """The control transaction that records the workspace placed on
        ``server``; DrainedMeanwhile (nothing written) when the server is
        draining now. Its placement goes with the record."""
        with self.locked() as conn:
            if self.is_draining(conn, server):
                raise DrainedMeanwhile(server)
            conn.execute(pq.RELEASE_PLACEMENT, (database,))
            yield conn

    def set_draining(self, server: str, draining: bool) -> None:
        """The drain mark, changed under the placement lock: once it is
        acknowledged, no creation placed before it is recorded there."""
        if server not in self.dbs.servers.names:
            # InvalidArgument naming the field ('' too, which elsewhere means
            # the default server: a mark is set on a name).
            raise errors.InvalidArgument("server", unknown_server(server, self.dbs.servers.names))
        with self.dbs.control_conn() as conn:
            conn.execute(pq.PLACEMENT_LOCK)
            conn.execute(q.SET_SERVER_DRAINING, (server, draining))
