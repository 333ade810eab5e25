"""Reaching a Postgres server (docs/servers.md, Connection budget): the
start-up check of the budgets against what the server allows, and which
configured names reach one server, asked of the server itself: host strings
differ (`localhost`, `127.0.0.1`, a DNS name) where the server is one, and
one server must have one budget in a process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from services.store.infrastructure.servers import (
    BudgetTooLarge,
    Demand,
    check_connections,
    demand,
)
from services.store.settings import StoreSettings
from services.store.sql import server_queries as q

# A server not reached (down, or refusing the budgets) is asked again after
# this long: the calls meanwhile are told at once instead of each connecting.
REACH_AGAIN_SECONDS = 1.0


@dataclass(frozen=True)
class Identity:
    """What a server says it is."""

    system: str  # pg_control_system().system_identifier: the cluster
    port: str
    started: str  # pg_postmaster_start_time(): tells copies of a cluster apart

    def same_cluster(self, other: Identity) -> bool:
        return (self.system, self.port) == (other.system, other.port)


def identify(conn: psycopg.Connection) -> Identity:
    row = conn.execute(q.IDENTITY).fetchone()
    assert row is not None
    return Identity(str(row[0]), str(row[1]), str(row[2]))


def _processes(settings: StoreSettings, default: bool) -> dict[str, tuple[int, Demand]]:
    """Each kind of process on a server: its replicas and its connections at most."""
    s = settings
    control = s.control_pool_max_size
    return {
        "store": (s.store_replicas, demand("store", s.connection_budget, control, default)),
        "embedding job": (
            s.job_replicas,
            demand("embedding job", s.job_connection_budget, control, default),
        ),
    }


def check_budget(
    settings: StoreSettings, server: str, default: bool, conn: psycopg.Connection
) -> int:
    """The start-up check: the store's and the job's connections on
    ``server``, times their replicas, against its max_connections less its
    reserved slots and the operators' reserve. Raises BudgetTooLarge;
    returns the connections asked for."""
    row = conn.execute(q.CONNECTION_ROOM).fetchone()
    assert row is not None
    return check_connections(
        server,
        max_connections=int(row[0]),
        reserved=int(row[1]),
        reserve=settings.connection_reserve,
        processes=_processes(settings, default),
    )


@dataclass(frozen=True)
class Room:
    """What a server allows beyond the store's and the job's connections at
    their most (times their replicas): the room operators' connections share,
    at least RECALLATRON_CONNECTION_RESERVE where the start-up check passed."""

    max_connections: int
    reserved: int  # by the server itself
    processes: int  # the store's and the job's, at their most

    @property
    def left(self) -> int:
        return self.max_connections - self.reserved - self.processes

    def __str__(self) -> str:
        return (
            f"max_connections {self.max_connections} - {self.reserved} reserved by the server"
            f" - {self.processes} for the store's and the embedding job's replicas at their most"
        )


def room(settings: StoreSettings, default: bool, conn: psycopg.Connection) -> Room:
    row = conn.execute(q.CONNECTION_ROOM).fetchone()
    assert row is not None
    asked = sum(n * d.total for n, d in _processes(settings, default).values())
    return Room(int(row[0]), int(row[1]), asked)


class SameServers:
    """Configured name -> the first name reached of its server (whose budget
    every name of that server shares)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._identity: dict[str, Identity] = {}
        self._first: dict[str, str] = {}
        self._reaching: dict[str, threading.Lock] = {}
        self._failed: dict[str, tuple[float, Exception]] = {}

    def first(self, name: str) -> str | None:
        """The name whose budget ``name`` spends; None until it was reached."""
        with self._lock:
            return self._first.get(name)

    def reach(self, name: str, ensure: Callable[[], None]) -> str:
        """The first name of ``name``'s server, reaching it with ``ensure``
        (which checks the budgets and calls :meth:`place`) unless that was
        done: a server down at the start is checked when it is first reached,
        not served over a budget it cannot hold. One reach at a time per
        name; a failure is raised again, without connecting, for
        REACH_AGAIN_SECONDS."""
        with self._lock:
            if name in self._first:
                return self._first[name]
            lock = self._reaching.setdefault(name, threading.Lock())
        with lock:
            with self._lock:
                failed = self._failed.get(name)
            if failed is not None and time.monotonic() < failed[0]:
                raise failed[1]
            if self.first(name) is None:
                try:
                    ensure()
                except (psycopg.OperationalError, BudgetTooLarge) as exc:
                    with self._lock:
                        self._failed[name] = (time.monotonic() + REACH_AGAIN_SECONDS, exc)
                    raise
        first = self.first(name)
        assert first is not None, "ensure() places the name"
        return first

    def place(self, name: str, found: Identity, ask: Callable[[str], Identity | None]) -> str:
        """Records what ``name`` reached. A name of the same cluster that
        answered another start time is asked again (``ask``; None: it does
        not answer): its server may have restarted since."""
        with self._lock:
            if name in self._first:
                return self._first[name]
            stale = [o for o, i in self._identity.items() if i != found and i.same_cluster(found)]
        for other in stale:
            now = ask(other)
            if now is not None:
                with self._lock:
                    self._identity[other] = now
        with self._lock:
            if name not in self._first:
                same = next((o for o, i in self._identity.items() if i == found), None)
                self._identity[name] = found
                self._first[name] = self._first[same] if same is not None else name
            return self._first[name]
