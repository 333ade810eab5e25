"""Whether an idle pooled connection is still there, without a round trip.

An idle connection has nothing to read: the server speaks only when asked.
Something to read means its end came while it sat in the pool (the server
closed it, a reset from a firewall or NAT that forgot it, a FATAL message
before a backend ended, or the kernel gave up on its keepalive probes), or
an asynchronous message that libpq reads and keeps. Reading what is there
tells which, at the cost of one system call when nothing is."""

from __future__ import annotations

import select

import psycopg
from psycopg.pq import ConnStatus, TransactionStatus


def looks_alive(conn: psycopg.Connection) -> bool:
    """False when ``conn`` is known to be broken; True when nothing says so
    (a silent cut is found only by using the connection)."""
    if conn.closed or conn.broken:
        return False
    pgconn = conn.pgconn
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
        if readable:
            pgconn.consume_input()  # OperationalError at the connection's end
    except (OSError, psycopg.Error):
        return False
    return pgconn.status == ConnStatus.OK and pgconn.transaction_status == TransactionStatus.IDLE


def check_alive(conn: psycopg.Connection) -> None:
    """psycopg_pool's ``check`` (the control plane's pool): a connection
    found ended is discarded and another lent in its place."""
    if not looks_alive(conn):
        raise psycopg.OperationalError("the connection ended while idle")
