"""A caller's connections (design §4, §9): the caller a transaction runs for,
the workspace pool that lends connections the way every store call wants them,
database errors as the domain's, the statement of an abandoned call cancelled,
and `caller_transaction`, which sets the caller for row-level security."""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import psycopg
from pgvector import Vector
from pgvector.psycopg.vector import (
    VectorBinaryDumper,
    VectorBinaryLoader,
    VectorDumper,
    VectorLoader,
)
from psycopg.pq import TransactionStatus
from psycopg.types import TypeInfo
from psycopg.types.string import TextLoader
from psycopg_pool import PoolTimeout

from recallatron import deadline, errors
from services.store.infrastructure.budget import BudgetTimeout, DatabasePool, PoolClosed
from services.store.infrastructure.servers import BudgetTooLarge

log = logging.getLogger("recallatron.store.db")


@dataclass(frozen=True)
class Caller:
    workspace_id: str
    member_id: str
    purpose: str  # one of the four purposes, as stored
    role: str = "member"  # "owner" or "member", as the gateway authenticated it


@contextmanager
def translate_db_errors() -> Iterator[None]:
    """A database that cannot be reached is UNAVAILABLE to the caller, fast;
    a value the database's own checks refuse is INVALID_ARGUMENT."""
    try:
        yield
    except psycopg.errors.QueryCanceled as exc:
        # statement_timeout (the call's deadline) or a cancel for an abandoned call.
        raise errors.DeadlineExceeded("the statement was stopped at the call's deadline") from exc
    except BudgetTimeout as exc:
        # The connection budget is spent, or the workspace's own cap (design
        # §10): retry shortly. Which of them, by its setting.
        raise errors.Unavailable(f"database busy: {exc.limit}; retry", exc.retry_after) from exc
    except PoolTimeout as exc:
        raise errors.Unavailable("database unavailable: no connection in time", 1.0) from exc
    except PoolClosed as exc:
        raise errors.Unavailable("database unavailable: the workspace moved; retry", 0.2) from exc
    except BudgetTooLarge as exc:
        # A server first reached after the start whose budgets it cannot hold
        # (docs/servers.md): refused as the start refuses it, in one line
        # naming both numbers, until its max_connections or the budgets change.
        raise errors.Unavailable(str(exc), 5.0) from exc
    except psycopg.OperationalError as exc:
        raise errors.Unavailable("database unavailable", 1.0) from exc
    except psycopg.errors.InvalidParameterValue as exc:
        # A check in the database that names the request's field it refused
        # (RAISE ... USING COLUMN: a removed audience or author,
        # 0067_baseline/04_memory.sql).
        if not exc.diag.column_name:
            raise
        raise errors.InvalidArgument(
            exc.diag.column_name, exc.diag.message_primary or "refused"
        ) from exc


@contextmanager
def translate_race_errors() -> Iterator[None]:
    """In a workspace's database, a foreign key broken by a change committed
    beside the call (a forget deleting the entity a write names at the same
    moment) is a race to retry, as a deadlock is, not a server fault. A
    deadlock or serialization failure rolled the whole transaction back, so a
    retry is safe; said so, not as a database that cannot be reached."""
    try:
        yield
    except psycopg.errors.ForeignKeyViolation as exc:
        raise errors.Unavailable(
            "a change made at the same moment removed what this call refers to; retry", 0.2
        ) from exc
    except (
        psycopg.errors.DeadlockDetected,
        psycopg.errors.SerializationFailure,
        psycopg.errors.TransactionRollback,
    ) as exc:
        raise errors.Unavailable(
            "a change made at the same moment collided with this call; nothing was written; retry",
            0.2,
        ) from exc


def configure_connection(conn: psycopg.Connection) -> None:
    """uuid columns come back as their canonical text: every caller wants a
    string, and building a uuid.UUID per row cost more than some queries."""
    conn.adapters.register_loader("uuid", TextLoader)


def configure_workspace_connection(conn: psycopg.Connection, vector: TypeInfo) -> None:
    """As :func:`configure_connection`, and vectors go out in pgvector's binary
    form (numpy arrays as ``%b`` parameters): formatting 384 floats as text
    took ~0.3 ms a vector. ``vector`` is the database's vector type, looked up
    once per database: pgvector's own register_vector looks up four types,
    four round trips on every new connection (5 ms measured)."""
    configure_connection(conn)
    vector.register(conn)
    text_dumper, binary_dumper = _vector_dumpers(vector.oid)
    adapters = conn.adapters
    adapters.register_dumper(Vector, text_dumper)
    adapters.register_dumper(Vector, binary_dumper)
    adapters.register_dumper("numpy.ndarray", text_dumper)
    adapters.register_dumper("numpy.ndarray", binary_dumper)
    adapters.register_loader(vector.oid, VectorLoader)
    adapters.register_loader(vector.oid, VectorBinaryLoader)


# pgvector's register_vector_info makes two new dumper classes on every call,
# and psycopg remembers every dumper class it is given for the life of the
# process (AdaptersMap._optimised): one call per new connection grew the store
# and the embedding job without end (docs/reliability.md, "Soak with faults").
# The same registrations with the classes made once per vector type oid (one
# per database at most).
_VECTOR_DUMPERS: dict[int, tuple[type[VectorDumper], type[VectorBinaryDumper]]] = {}
_VECTOR_DUMPERS_LOCK = threading.Lock()


def _vector_dumpers(oid: int) -> tuple[type[VectorDumper], type[VectorBinaryDumper]]:
    with _VECTOR_DUMPERS_LOCK:
        dumpers = _VECTOR_DUMPERS.get(oid)
        if dumpers is None:
            dumpers = _VECTOR_DUMPERS[oid] = (
                type("VectorDumper", (VectorDumper,), {"oid": oid}),
                type("VectorBinaryDumper", (VectorBinaryDumper,), {"oid": oid}),
            )
        return dumpers


# Every transaction-local setting in one statement (keys and values are
# parameters; the keys come from this code, never from a request).
SET_LOCALS = "SELECT set_config(k, v, true) FROM unnest(%s::text[], %s::text[]) AS s(k, v)"


@functools.cache
def begin_with_settings(n: int) -> str:
    """BEGIN and ``n`` transaction-local settings as one simple-protocol
    message: one round trip where BEGIN then SET_LOCALS took two (per
    transaction p50 0.106 -> 0.079 ms, the client's CPU 0.076 -> 0.051 ms:
    benchmarks.transaction_open). Keys and values are bound by the driver."""
    return "BEGIN; SELECT " + ", ".join(["set_config(%s, %s, true)"] * n)


# For a transaction whose statements plan the same whatever their values (ids
# in arrays, flags, a time): the driver prepares them, but Postgres would
# still plan each execution afresh, row-level security included, whenever it
# costs its generic plan above a custom one. Measured at 10,000 memories: the
# entity cards' five statements spent 2.3 ms planning against 0.1 ms running;
# generic plans took a card lookup from 4.2 to 0.6 ms (5.4 to 1.8 ms at
# 100,000), with the same answers (docs/benchmarks.md). Not for the dense
# arm, whose plan follows the caller's filters.
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}


# Cancel requests go out from here, not from the gRPC thread that learns a
# call was abandoned (sending one opens a connection to the server).
_CANCELLER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pg-cancel")
CANCEL_TIMEOUT_SECONDS = 2.0
# After a cancel, how long an abandoned call may still hold its connection
# before the connection is taken for one nothing answers on (a cancelled
# statement ends within milliseconds).
CUT_AFTER_SECONDS = 5.0


class _CancelGuard:
    """Cancels what a connection runs for an abandoned call, and only while
    the call still holds it: the lock keeps a late cancel from reaching the
    next call the pool lends the connection to. A call still holding it
    CUT_AFTER_SECONDS after the cancel was waiting on a connection nothing
    answers on (a proxy or balancer between that acknowledges what is sent
    while nothing reaches the server: no keepalive or user timeout fires,
    and the cancel reaches a backend running nothing): its socket is shut,
    which ends the wait; the pool then discards the broken connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.released = False

    def fire(self) -> None:
        _CANCELLER.submit(self._cancel)

    def _cancel(self) -> None:
        with self.lock:
            if self.released:
                return
            try:
                self.conn.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
                log.info("statement cancelled: its call was abandoned")
            except Exception as exc:  # a failed cancel leaves statement_timeout to act
                log.warning("could not cancel a statement", extra={"error": str(exc)})
        cut = threading.Timer(CUT_AFTER_SECONDS, self._cut)
        cut.daemon = True
        cut.start()

    def _cut(self) -> None:
        with self.lock:
            if self.released or self.conn.closed:
                return
            log.warning("an abandoned call's connection answered nothing; closing it")
            # A copy of the descriptor: shutting it ends the connection's wait,
            # closing it leaves libpq's own to the pool's discard.
            with (
                suppress(OSError, psycopg.Error),
                socket.socket(fileno=os.dup(self.conn.pgconn.socket)) as sock,
            ):
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        with self.lock:
            self.released = True


@contextmanager
def cancelled_if_abandoned(conn: psycopg.Connection) -> Iterator[None]:
    """While the block runs, the statement in progress is cancelled when the
    current call is abandoned (its deadline passed, its client cancelled)."""
    scope = deadline.current()
    if scope is None:
        yield
        return
    guard = _CancelGuard(conn)
    take_back = scope.on_abandon(guard.fire)
    try:
        yield
    finally:
        take_back()
        guard.release()


class WorkspacePool(DatabasePool):
    """A workspace database's connections, lent the way every store call
    wants them: database and budget errors become the domain's (one place,
    :func:`translate_db_errors`), and inside a call with a deadline the wait
    is capped by what is left of it and the statement in progress is
    cancelled when the call is abandoned."""

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        wait = self.timeout if timeout is None else timeout
        left = deadline.remaining()
        with (
            translate_db_errors(),
            translate_race_errors(),
            super().connection(wait if left is None else min(wait, left)) as conn,
            cancelled_if_abandoned(conn),
        ):
            yield conn


# A transaction still open (or failed) when the block ends.
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)


@contextmanager
def caller_transaction(
    pool: WorkspacePool, caller: Caller, settings: Mapping[str, str] | None = None
) -> Iterator[psycopg.Connection]:
    """A transaction whose every query sees only what the caller may see: the
    row-level security policies read the first two settings, local to it.
    ``settings`` adds more transaction-local ones (planner, HNSW); all of them
    go out with BEGIN, in one message.

    Inside a call with a deadline (design §9) the work ends with it: the wait
    for a connection is capped by what is left (a thread never waits on a
    pool past its call), ``statement_timeout`` is set to it when nearer than
    the pool's fixed one, and the statement in progress is cancelled when the
    call is abandoned."""
    left = deadline.remaining()
    local = {
        "recallatron.member_id": caller.member_id,
        "recallatron.purpose": caller.purpose,
        **(settings or {}),
    }
    # A connection that died while idle (and looked alive when lent) fails
    # the first message, our BEGIN with its settings: no statement of the
    # block has run, so the block goes once more on another connection.
    # Never after the block began: a write may have run.
    for attempt in (1, 2):
        with pool.connection() as conn:
            if left is not None:
                # Read again: the connection may have taken a while to come.
                left = deadline.remaining() or left
                ms = max(1, int(left * 1000))
                if ms < pool.statement_timeout_ms:
                    local["statement_timeout"] = str(ms)
            # The transaction is opened by our own BEGIN, sent with the
            # settings, so the driver must not send one of its own first:
            # autocommit for the block's length (statements still run inside
            # our transaction; a nested conn.transaction() becomes a savepoint).
            conn.autocommit = True
            try:
                try:
                    statement = begin_with_settings(len(local))
                    values = [x for kv in local.items() for x in kv]
                    psycopg.ClientCursor(conn).execute(statement, values)
                except psycopg.OperationalError:
                    if attempt > 1 or not conn.broken:
                        raise
                    log.info("a pooled connection was found ended; the call goes again")
                    continue  # the pool discards the broken connection
                yield conn
                conn.commit()
                return
            except BaseException:
                if not conn.closed and conn.info.transaction_status in _OPEN:
                    with suppress(psycopg.Error):
                        conn.rollback()
                raise
            finally:
                # A connection not idle now is discarded by the pool (release).
                if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
                    conn.autocommit = False
