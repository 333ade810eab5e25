"""One dedicated LISTEN connection to the control database, kept open: the
shape every control-plane feed here shares (moves followed, work marks,
token revocations). On each (re)connect it LISTENs, then calls ``on_connect``
(to read what may have been missed while it was down); every notification's
payload goes to ``on_notify``; ``every`` runs each ``every_seconds`` while
connected; ``on_lost`` runs whenever a connection ends.

A server that vanishes without closing the connection (a host gone, a
network partition) sends nothing, and a connection waiting for notifications
would wait for ever, reporting itself live. Every LISTEN connection is opened
by :func:`listen_connection`, so the kernel ends it when its server stops
answering TCP, and the loop asks the server for an answer every
HEARTBEAT_SECONDS, ending the connection when none comes within
ANSWER_SECONDS (something between may still acknowledge the packets: a
proxy or a balancer whose far side is gone). Either way the connection ends
within about 25 s, and the listener reconnects as after a closed one."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

log = logging.getLogger("recallatron.store.listen")

# How often the loop looks up from waiting, to notice a stop.
POLL_SECONDS = 0.5

# The kernel's watch of an idle connection (libpq's TCP options), for a URL
# that sets none of its own: a probe
# after KEEPALIVE_IDLE_SECONDS of silence, again every
# KEEPALIVE_INTERVAL_SECONDS, the connection ended after KEEPALIVE_COUNT
# unanswered (10 + 3 x 5 = 25 s); data sent and unacknowledged for
# USER_TIMEOUT_MS ends it too.
KEEPALIVE_IDLE_SECONDS = 10
KEEPALIVE_INTERVAL_SECONDS = 5
KEEPALIVE_COUNT = 3
USER_TIMEOUT_MS = 25_000
# A server that does not answer the handshake at all.
CONNECT_TIMEOUT_SECONDS = 10
# The listener's own round trip: asked after HEARTBEAT_SECONDS without one,
# answered within ANSWER_SECONDS (the same limit holds for on_connect and
# every), or the connection is ended: at most 10 + 15 = 25 s of silence.
HEARTBEAT_SECONDS = 10.0
ANSWER_SECONDS = 15.0
HEARTBEAT = "SELECT 1"


def listen_connection(url: str) -> psycopg.Connection:
    """An autocommit connection for LISTEN that the kernel ends when its
    server stops answering TCP (libpq's keepalive and user-timeout options;
    ignored on a Unix socket, which cannot be partitioned)."""
    watch = {
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
        "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
        "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": USER_TIMEOUT_MS,
    }
    # The URL's own (the store's setting, RECALLATRON_POSTGRES_SILENCE_SECONDS,
    # puts them in every server URL) win over these.
    given = conninfo_to_dict(url)
    missing = {k: v for k, v in watch.items() if k not in given}
    return psycopg.connect(
        make_conninfo(url, **missing), autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
    )


def _shut(conn: psycopg.Connection) -> None:
    """Shuts the connection's socket both ways: a call waiting on it wakes and
    fails as on a connection the server closed. The socket is shut through a
    duplicate descriptor, so the connection still owns (and closes) its own."""
    try:
        duplicate = socket.socket(fileno=os.dup(conn.pgconn.socket))
    except (OSError, psycopg.Error):
        return  # already closed
    with duplicate, suppress(OSError):
        duplicate.shutdown(socket.SHUT_RDWR)


@contextmanager
def answered_within(conn: psycopg.Connection, seconds: float) -> Iterator[None]:
    """Ends ``conn`` when the round trips made inside take longer than
    ``seconds``: they then fail with psycopg's OperationalError."""
    lock = threading.Lock()
    finished = [False]

    def expire() -> None:
        with lock:
            # Only while the block runs: after it the connection may be
            # closed and its descriptor another's.
            if not finished[0]:
                log.warning("listener's server did not answer; ending its connection")
                _shut(conn)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            finished[0] = True
        timer.cancel()


# Compared by identity, and no repr: its URL may hold a password.
@dataclass(eq=False, repr=False)
class Listener:
    name: str
    control_url: str
    channel: str
    stop: threading.Event
    on_notify: Callable[[str], None]
    on_connect: Callable[[psycopg.Connection], None] = lambda _conn: None
    every: Callable[[psycopg.Connection], None] | None = None
    every_seconds: float = 0.0
    retry_seconds: float = 1.0
    on_lost: Callable[[], None] = lambda: None
    _thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with listen_connection(self.control_url) as conn:
                    self._listen(conn)
            except psycopg.Error as exc:
                log.warning(
                    "listener lost its connection; retrying",
                    extra={"listener": self.name, "error": type(exc).__name__},
                )
            finally:
                self.on_lost()
            self.stop.wait(self.retry_seconds)

    def _listen(self, conn: psycopg.Connection) -> None:
        with answered_within(conn, ANSWER_SECONDS):
            # Listening first: what happens while on_connect reads is then
            # either read or notified.
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.on_connect(conn)
        last_every = last_answer = time.monotonic()
        while not self.stop.is_set():
            for notify in conn.notifies(timeout=POLL_SECONDS):
                self.on_notify(notify.payload)
            now = time.monotonic()
            if self.every and now - last_every >= self.every_seconds:
                with answered_within(conn, ANSWER_SECONDS):
                    self.every(conn)
                last_every = last_answer = time.monotonic()
            elif now - last_answer >= HEARTBEAT_SECONDS:
                with answered_within(conn, ANSWER_SECONDS):
                    conn.execute(HEARTBEAT)
                last_answer = time.monotonic()
