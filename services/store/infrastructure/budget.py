"""The connection budget (design §10, docs/servers.md): per Postgres server and
per process, one cap on the connections open to it, shared by every workspace
database on that server, so that the cost follows the busy workspaces and a
thousand idle ones hold nothing.

- A database's connections are lent from its :class:`DatabasePool`, capped per
  database (a workspace never takes the whole budget) and, all together, by
  its server's :class:`ServerBudget`.
- Callers wait in one queue per server, in order of arrival, for a bounded
  time; past it they get :class:`BudgetTimeout` (UNAVAILABLE with a retry
  hint, mapped in ``services.store.infrastructure.db.translate_db_errors``).
- When the budget is spent and another database has a connection idle, that
  connection is closed to make room: an idle workspace gives way to a busy
  one. Idle connections close by themselves after ``idle_seconds``.
- A close counts until the server has let the backend go (the socket reached
  its end), so the bound holds on the server's own count, not just here.

Why not psycopg_pool for these: its pools are one per database, each with its
own size and background workers that retry a failed connect on their own, so
a cap shared across databases cannot be put on them. The control plane's
single pool stays a psycopg_pool ``ConnectionPool``.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from recallatron import deadline
from services.store.infrastructure.liveness import looks_alive

log = logging.getLogger("recallatron.store.budget")

# How long a close waits for the server to end the backend before it counts
# the slot free anyway (a server that does not answer frees it by itself).
CLOSE_WAIT_SECONDS = 2.0
# With the budget full, an idle connection unused this long is closed ahead of
# need: it is the one the next workspace to wake would close anyway.
CLOSE_AHEAD_AFTER_SECONDS = 0.25
# An idle connection lent after this long is looked at first (liveness.py):
# one found ended while idle is replaced, not handed to the call.
CHECK_IDLE_AFTER_SECONDS = 1.0


class BudgetTimeout(Exception):
    """No connection within the wait allowed; the caller may retry.
    ``limit``: the limit that held the caller back, its setting named (a
    workspace database's own cap, or the server's budget), as the caller
    is told it; the exception's text adds where and how long."""

    def __init__(self, where: str, limit: str, waited: float, retry_after: float) -> None:
        super().__init__(f"{where}: {limit} (waited {waited:.1f} s)")
        self.limit = limit
        self.retry_after = retry_after


class PoolClosed(Exception):
    """The database's pool was closed (its workspace moved or was removed)."""


@contextmanager
def closing_and_waiting(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """``conn`` for the block, then closed with :func:`close_and_wait`."""
    try:
        yield conn
    finally:
        close_and_wait(conn)


def close_and_wait(conn: psycopg.Connection, timeout: float = CLOSE_WAIT_SECONDS) -> None:
    """Closes ``conn`` and waits until the server has ended its backend: the
    backend leaves the server's process table before its socket closes, so
    the end of the socket says the slot is free on the server too."""
    fd = -1
    try:
        if not conn.closed:
            fd = os.dup(conn.pgconn.socket)
    except (OSError, psycopg.Error):
        fd = -1
    try:
        conn.close()
    except Exception as exc:  # a broken connection still frees its slot
        log.debug("close failed", extra={"error": str(exc)})
    if fd < 0:
        return
    try:
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if ready and not os.read(fd, 65536):
                return
    except OSError:
        return  # the socket is gone: so is the backend's end of it
    finally:
        os.close(fd)


@dataclass
class _Waiter:
    pool: DatabasePool
    event: threading.Event = field(default_factory=threading.Event)
    # Set when granted: an idle connection, or None with ``slot`` True (open
    # a new one, after closing ``victim`` when one is given).
    conn: psycopg.Connection | None = None
    idle_since: float = 0.0
    slot: bool = False
    victim: psycopg.Connection | None = None
    # Where the victim was idle, and since when: it goes back there when the
    # waiter's call was abandoned before it closed it.
    victim_from: tuple[DatabasePool, float] | None = None


# Compared by identity, and no repr: its conninfo may hold a password.
@dataclass(eq=False, repr=False)
class DatabasePool:
    """The connections of one database (and role) on a server's budget. Its
    interface is the part of psycopg_pool's that the store uses.
    ``setting``: the one ``max_size`` comes from, named when a caller waited
    on that cap in vain."""

    budget: ServerBudget
    key: str
    conninfo: str
    _: KW_ONLY
    max_size: int
    timeout: float
    statement_timeout_ms: int
    configure: Callable[[psycopg.Connection], None] | None = None
    name: str = ""
    setting: str = "RECALLATRON_POOL_MAX_SIZE"
    # Guarded by the budget's lock.
    idle: deque[tuple[psycopg.Connection, float]] = field(init=False, default_factory=deque)
    # In use (being opened among them).
    in_use: int = field(init=False, default=0)
    # When its first connection since it last had none was granted: for
    # grow_after from then the workspace has just woken up.
    woke_at: float = field(init=False, default=0.0)
    waiting: int = field(init=False, default=0)
    timeouts: int = field(init=False, default=0)
    last_used: float = field(init=False, default_factory=time.monotonic)
    closed: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.name = self.name or self.key

    def connect_timeout(self) -> int:
        """How long a new connection may take to open: the pool's wait, the
        server URL's own connect_timeout when smaller, and no longer than
        what is left of the call it is opened for (DeadlineExceeded when
        nothing is). Whole seconds, as libpq counts them (and at least 2)."""
        wait = deadline.capped(self.timeout)
        given = conninfo_to_dict(self.conninfo).get("connect_timeout")
        with suppress(TypeError, ValueError):
            if given is not None and float(given) > 0:  # 0 is libpq's "no limit"
                wait = min(wait, float(given))
        return max(1, round(wait))

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(
            self.conninfo,
            options=f"-c statement_timeout={self.statement_timeout_ms}",
            connect_timeout=self.connect_timeout(),
        )
        try:
            if self.configure is not None:
                self.configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        """A connection for the block: committed when it ends, rolled back on
        an error (as psycopg_pool's), then lent to the next caller."""
        conn = self.budget.acquire(self, self.timeout if timeout is None else timeout)
        try:
            yield conn
            if not conn.closed and conn.info.transaction_status == TransactionStatus.INTRANS:
                conn.commit()
        except BaseException:
            if not conn.closed and conn.info.transaction_status != TransactionStatus.UNKNOWN:
                with suppress(psycopg.Error):
                    conn.rollback()
            raise
        finally:
            self.budget.release(self, conn)

    def get_stats(self) -> dict[str, int]:
        with self.budget.lock:
            idle = len(self.idle)
            return {
                "pool_size": idle + self.in_use,
                "pool_available": idle,
                "requests_waiting": self.waiting,
                "requests_errors": self.timeouts,
            }

    def close(self) -> None:
        self.budget.drop(self)


@dataclass(eq=False, repr=False)
class ServerBudget:
    """One server's connections in this process: at most ``limit`` open.
    ``setting``: the one ``limit`` comes from, named as for a pool's."""

    server: str
    limit: int
    idle_seconds: float
    grow_after: float = 0.05
    close_ahead_after: float = CLOSE_AHEAD_AFTER_SECONDS
    setting: str = "RECALLATRON_CONNECTION_BUDGET"
    # Connections closed ahead of need, by one thread of the budget's own.
    _closing: queue.SimpleQueue[psycopg.Connection] = field(
        init=False, default_factory=queue.SimpleQueue
    )
    _closer: threading.Thread | None = field(init=False, default=None)
    lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    pools: dict[str, DatabasePool] = field(init=False, default_factory=dict)
    waiters: deque[_Waiter] = field(init=False, default_factory=deque)
    # Connections open, being opened, or closing (until the server let go).
    open: int = field(init=False, default=0)
    timeouts: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("a connection budget must allow at least one connection")

    # -- lending -----------------------------------------------------------

    def pool(self, key: str, make: Callable[[], DatabasePool]) -> DatabasePool:
        with self.lock:
            pool = self.pools.get(key)
            if pool is None or pool.closed:
                pool = self.pools[key] = make()
            pool.last_used = time.monotonic()
            return pool

    def acquire(self, pool: DatabasePool, timeout: float) -> psycopg.Connection:
        """A connection of ``pool`` within ``timeout``. Inside a call
        (recallatron/deadline.py), one abandoned while it waits leaves the
        queue at once (DeadlineExceeded), and one abandoned once its turn
        came gives its place back: nothing is opened, and no other
        workspace's idle connection closed, for nobody."""
        call = deadline.current()
        deadline.remaining()  # nothing left of the call: not queued at all
        started = time.monotonic()
        end = started + max(0.0, timeout)
        waiter = _Waiter(pool)
        with self.lock:
            if pool.closed:
                raise PoolClosed(pool.name)
            # A pool the upkeep forgot while its holder kept it (unused past
            # idle_seconds) comes back, so that its connections are counted,
            # reaped and chosen to close again.
            self.pools.setdefault(pool.key, pool)
            pool.last_used = started
            pool.waiting += 1
            self.waiters.append(waiter)
            self._dispatch()
        take_back = call.on_abandon(lambda: self._abandon(waiter)) if call else lambda: None
        try:
            self._wait(waiter, started, end, timeout)
        finally:
            take_back()
        if call is not None and call.abandoned:
            self._give_back(waiter)
            deadline.remaining()  # raises: the call is abandoned
        if waiter.conn is not None:
            if time.monotonic() - waiter.idle_since < CHECK_IDLE_AFTER_SECONDS:
                return waiter.conn
            if looks_alive(waiter.conn):
                return waiter.conn
            # Ended while idle: its place goes to a new connection.
            log.info("an idle connection was found ended; opening another")
            waiter.victim, waiter.conn, waiter.slot = waiter.conn, None, True
        if not waiter.slot:
            raise PoolClosed(pool.name)
        if waiter.victim is not None:
            close_and_wait(waiter.victim)
        try:
            return pool._connect()
        except BaseException:
            with self.lock:
                self.open -= 1
                pool.in_use -= 1
                self._dispatch()
            raise

    def _wait(self, waiter: _Waiter, started: float, end: float, timeout: float) -> None:
        """Until ``waiter`` is granted, abandoned or dropped (BudgetTimeout at
        ``end``). Woken at least every grow_after: one held back while its
        workspace was waking up may open a connection of its own after it."""
        pool = waiter.pool
        while not waiter.event.wait(max(0.0, min(end - time.monotonic(), self.grow_after))):
            with self.lock:
                if waiter.event.is_set():
                    break
                if time.monotonic() >= end:
                    self.waiters.remove(waiter)
                    pool.waiting -= 1
                    pool.timeouts += 1
                    self.timeouts += 1
                    raise self._refusal(pool, time.monotonic() - started, min(1.0, timeout))
                self._dispatch()

    def _refusal(self, pool: DatabasePool, waited: float, retry_after: float) -> BudgetTimeout:
        """Which limit held a caller of ``pool`` back (under the lock)."""
        if pool.in_use >= pool.max_size:
            where = f"database {pool.name!r}"
            held = f"connections this workspace's database may hold ({pool.setting})"
            limit = f"all {pool.max_size} {held} are in use"
        else:
            where = f"server {self.server!r}"
            held = f"connections this process may hold to the server ({self.setting})"
            limit = f"all {self.limit} {held} are in use"
        return BudgetTimeout(where, limit, waited, retry_after)

    def _abandon(self, waiter: _Waiter) -> None:
        """The waiter's call was abandoned: out of the queue, if still in it."""
        with self.lock:
            if waiter in self.waiters:
                self.waiters.remove(waiter)
                waiter.pool.waiting -= 1
                waiter.event.set()  # granted nothing

    def _give_back(self, waiter: _Waiter) -> None:
        """What an abandoned call's waiter was granted, returned unused: an
        idle connection to its pool, a place to the budget (its victim back
        where it was idle, when that pool is still open)."""
        if waiter.conn is not None:
            self.release(waiter.pool, waiter.conn)
            return
        if not waiter.slot:
            return
        victim, owner = waiter.victim, waiter.victim_from
        with self.lock:
            waiter.pool.in_use -= 1
            if victim is None or owner is None:
                self.open -= 1
            elif not owner[0].closed:
                owner[0].idle.appendleft((victim, owner[1]))
                victim = None
            self._dispatch()
        if victim is not None:
            self._discard(victim)

    def release(self, pool: DatabasePool, conn: psycopg.Connection) -> None:
        status = conn.info.transaction_status if not conn.closed else TransactionStatus.UNKNOWN
        # A connection left in autocommit (caller_transaction restores it when
        # idle) would change what the next borrower's statements mean.
        keep = status == TransactionStatus.IDLE and not conn.broken and not conn.autocommit
        with self.lock:
            pool.in_use -= 1
            pool.last_used = time.monotonic()
            if keep and not pool.closed:
                pool.idle.append((conn, pool.last_used))
                self._dispatch()
                return
        self._discard(conn)

    def _discard(self, conn: psycopg.Connection) -> None:
        close_and_wait(conn)
        with self.lock:
            self.open -= 1
            self._dispatch()

    def _dispatch(self) -> None:
        """Grants what can be granted, in order of arrival. A waiter held back
        by its own database's cap does not hold back the others; one held back
        by the budget does (no later caller passes it). For ``grow_after``
        after a workspace wakes up (its first connection since it had none),
        its concurrent calls share that connection instead of opening one
        each: a new backend costs a connect and its own catalog and plan
        caches, more than the wait (docs/servers.md, "Connection budget").
        Under the lock."""
        now = time.monotonic()
        for waiter in list(self.waiters):
            pool = waiter.pool
            if pool.in_use >= pool.max_size:
                continue
            if pool.idle:
                waiter.conn, waiter.idle_since = pool.idle.pop()  # the most recent: warm
            elif pool.in_use and now - pool.woke_at < self.grow_after:
                continue
            else:
                if not pool.in_use:
                    pool.woke_at = now
                if self.open < self.limit:
                    self.open += 1
                else:
                    owner = self._oldest_idle_pool()
                    if owner is None:
                        return
                    # The slot passes from the victim to the waiter, which
                    # closes the victim before it opens its own.
                    waiter.victim, since = owner.idle.popleft()
                    waiter.victim_from = (owner, since)
                waiter.slot = True
                if self.open >= self.limit:
                    self._close_ahead(now)
            pool.in_use += 1
            pool.waiting -= 1
            self.waiters.remove(waiter)
            waiter.event.set()

    def _close_ahead(self, now: float) -> None:
        """With every connection of the budget taken, closes the oldest idle
        one (unused for ``close_ahead_after``) on the closer thread, so that
        the next workspace to wake finds a free place instead of closing it
        on its own critical path (a close waits for the backend to end, about
        1.5 ms). The place counts as taken until the server let it go. Under
        the lock."""
        oldest = self._oldest_idle_pool()
        if oldest is None or now - oldest.idle[0][1] < self.close_ahead_after:
            return
        self._closing.put(oldest.idle.popleft()[0])
        if self._closer is None:
            self._closer = threading.Thread(
                target=self._close_loop, name=f"budget-closer-{self.server}", daemon=True
            )
            self._closer.start()

    def _close_loop(self) -> None:
        while True:
            self._discard(self._closing.get())

    def _oldest_idle_pool(self) -> DatabasePool | None:
        """The pool holding the connection idle longest, if any is idle."""
        oldest: DatabasePool | None = None
        for pool in self.pools.values():
            if pool.idle and (oldest is None or pool.idle[0][1] < oldest.idle[0][1]):
                oldest = pool
        return oldest

    # -- upkeep ------------------------------------------------------------

    def close_idle(self, now: float | None = None) -> int:
        """Closes connections idle longer than ``idle_seconds`` and forgets
        pools with nothing open and nobody waiting. Returns how many closed."""
        now = time.monotonic() if now is None else now
        expired: list[psycopg.Connection] = []
        with self.lock:
            for key, pool in list(self.pools.items()):
                while pool.idle and now - pool.idle[0][1] >= self.idle_seconds:
                    expired.append(pool.idle.popleft()[0])
                unused = not pool.idle and not pool.in_use and not pool.waiting
                if unused and now - pool.last_used >= self.idle_seconds:
                    del self.pools[key]
        for conn in expired:
            self._discard(conn)
        return len(expired)

    def drop(self, pool: DatabasePool) -> None:
        """Closes a pool: its idle connections now, those in use as they come
        back; its waiting callers get :class:`PoolClosed` at once."""
        with self.lock:
            pool.closed = True
            if self.pools.get(pool.key) is pool:
                del self.pools[pool.key]
            idle = [c for c, _ in pool.idle]
            pool.idle.clear()
            for waiter in [w for w in self.waiters if w.pool is pool]:
                self.waiters.remove(waiter)
                pool.waiting -= 1
                waiter.event.set()  # granted nothing: acquire raises PoolClosed
        for conn in idle:
            self._discard(conn)

    def close(self) -> None:
        with self.lock:
            pools = list(self.pools.values())
        for pool in pools:
            self.drop(pool)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "open": self.open,
                "limit": self.limit,
                "waiting": len(self.waiters),
                "timeouts": self.timeouts,
                "idle": sum(len(p.idle) for p in self.pools.values()),
            }
