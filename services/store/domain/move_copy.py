"""A move's initial copy, watched (docs/servers.md, Moving, Requirements).

Postgres retries a table sync that fails for ever: a source out of
replication slots or WAL senders, a target out of replication workers. The
move waited with it, the workspace's move stuck at `copying` with nothing
said. So the source's room is asked before anything is recorded, and a copy
that makes no progress for COPY_STALL_SECONDS is given up (the move then
rolls back, the source serving throughout). Also the move's quiet session
(the subscription's statement holds a password) and its slot's drop."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress

import psycopg
from psycopg import sql

from recallatron import errors
from services.store.sql import move_queries as q

# A move holds on its source the subscription's slot and WAL sender, and,
# during the initial copy, one more of each for the table being synced (a
# sync that finds none fails and is tried again for ever).
SOURCE_ROOM_NEEDED = 2
# The longest the copy may go without a table's state changing or a row
# copied before the move gives up.
COPY_STALL_SECONDS = 60.0
POLL_SECONDS = 0.2


def check_replication_room(conn: psycopg.Connection, server: str) -> None:
    """Refuses a move whose source has too few replication slots or WAL
    senders free (``conn``: an admin connection to the source)."""
    row = conn.execute(q.REPLICATION_ROOM).fetchone()
    assert row is not None
    slots, senders = int(row[0]), int(row[1])
    if min(slots, senders) < SOURCE_ROOM_NEEDED:
        raise errors.FailedPrecondition(
            f"workspace: its server {server!r} has {slots} free replication slots and "
            f"{senders} free WAL senders; a move needs {SOURCE_ROOM_NEEDED} of each there "
            "(the subscription's, and one for the initial copy of each table in turn): "
            "raise max_replication_slots or max_wal_senders, or drop a slot no longer used",
            "workspace",
            reason="REPLICATION_ROOM",
        )


def wait_copied(
    conn: psycopg.Connection,
    subscription: str,
    tables: int,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Returns once every table of the subscription is ready (``conn``: the
    target's database); raises Unavailable when the copy made no progress
    for COPY_STALL_SECONDS."""
    last: tuple[object, object] | None = None
    moved_at = clock()
    while True:
        row = conn.execute(q.COPY_PROGRESS).fetchone()
        assert row is not None
        states, copied, not_ready, known = row
        if not_ready == 0 and known >= tables:
            return
        now = clock()
        if (states, copied) != last:
            last, moved_at = (states, copied), now
        elif now - moved_at >= COPY_STALL_SECONDS:
            raise errors.Unavailable(
                f"copying: no progress for {COPY_STALL_SECONDS:.0f} s ({known - not_ready} of "
                f"{tables} tables copied{_failures(conn, subscription)}); the target server's "
                "log says why: often the source out of replication slots or WAL senders, or "
                "the target out of replication workers (docs/servers.md, Requirements)"
            )
        time.sleep(POLL_SECONDS)


def _failures(conn: psycopg.Connection, subscription: str) -> str:
    with suppress(psycopg.Error):  # the view is PostgreSQL 15's
        row = conn.execute(q.SYNC_ERRORS, (subscription,)).fetchone()
        if row is not None and row[0]:
            return f"; {int(row[0])} failed table syncs or apply starts"
    return ""


def quiet(conn: psycopg.Connection) -> None:
    """No statement of this session in the server's log or its activity
    view (each setting a superuser's; one the role may not set is skipped,
    and the move goes on as before)."""
    for setting, value in (
        ("log_min_error_statement", "panic"),
        ("log_statement", "none"),
        ("track_activities", "off"),
    ):
        with suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(setting), sql.Literal(value)))


def drop_slot(conn: psycopg.Connection, slot: str) -> None:
    """The move's slot on its source (``conn``, autocommit) dropped, its
    WAL sender ended first."""
    for _ in range(100):
        row = conn.execute(q.SLOT_PID, (slot,)).fetchone()
        if row is None:
            return
        if row[0] is not None:
            conn.execute(q.TERMINATE, (row[0],))
            time.sleep(0.05)
            continue
        try:
            conn.execute(q.DROP_SLOT, (slot,))
            return
        except psycopg.errors.ObjectInUse:
            time.sleep(0.05)
