"""A LISTEN connection whose server vanishes without closing it (a host gone, a
network partition: nothing reaches either end) ends by itself, so the
revocation feed stops vouching for completeness (its streams end, and the
gateways stop caching) and every listener reconnects as it does after a
closed connection. Driven in this process (the store's own RevocationFeed and
Listener) through a proxy that stops carrying and reading, on an embedded
Postgres of its own."""

from __future__ import annotations

import os
import queue
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from recallatron import errors
from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port
from services.store.domain.revocations import CHANNEL, RevocationFeed, Subscription
from services.store.infrastructure.listen import Listener, listen_connection
from tests.conftest import WAIT_SECONDS, wait_for
from tests.faults.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

OTHER_CHANNEL = "recallatron_test_listener"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    base: Path = tmp_path_factory.mktemp("vanished")
    pg = LocalPostgres(base / "pg", free_port(), secrets_dir=base / "secrets")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


def _through(proxy: TcpProxy, pg: LocalPostgres) -> str:
    # The password file names the server's own port, not the proxy's.
    return make_conninfo(pg.url, port=str(proxy.port), password=pg.superuser_password)


def _notify(pg: LocalPostgres, channel: str, payload: str) -> None:
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def _subscribed(feed: RevocationFeed) -> Subscription | None:
    try:
        return feed.subscribe()
    except errors.Unavailable:
        return None


def _next(subscription: Subscription, what: str) -> str | None:
    try:
        return subscription.get(timeout=WAIT_SECONDS)
    except queue.Empty:
        raise AssertionError(
            f"nothing on the revocation stream {WAIT_SECONDS:.0f} s {what}"
        ) from None


def test_listen_connections_end_when_their_server_vanishes(postgres: LocalPostgres) -> None:
    stop = threading.Event()
    connects: list[int] = []
    heard: list[str] = []
    with TcpProxy("127.0.0.1", postgres.port) as proxy:
        url = _through(proxy, postgres)
        feed = RevocationFeed(url, stop, retry_seconds=0.2)
        listener = Listener(
            "test-listener",
            url,
            OTHER_CHANNEL,
            stop,
            heard.append,
            on_connect=lambda _conn: connects.append(1),
            retry_seconds=0.2,
        )
        feed.start()
        listener.start()
        try:
            subscription = wait_for(lambda: _subscribed(feed), "the revocation feed live")
            wait_for(lambda: connects, "the listener connected")
            _notify(postgres, CHANNEL, "before")
            assert _next(subscription, "after a revocation") == "before"

            assert proxy.blackhole() == 2
            # Nothing tells either end: the feed must find out by itself.
            assert _next(subscription, "after its server vanished") is None, (
                "the feed went on vouching for a connection whose server vanished"
            )
            wait_for(lambda: len(connects) == 2, "the listener connected again")

            # Both connect again (through the proxy, which carries new
            # connections) and hear what is notified from then on.
            again = wait_for(lambda: _subscribed(feed), "the revocation feed live again")
            _notify(postgres, CHANNEL, "after")
            assert _next(again, "after a revocation, connected again") == "after"
            _notify(postgres, OTHER_CHANNEL, "after")
            wait_for(lambda: "after" in heard, "the listener hearing a notification")
        finally:
            stop.set()


def test_a_listen_connection_has_the_kernel_watch_its_server(postgres: LocalPostgres) -> None:
    """A server gone with its host answers nothing at all: the kernel itself
    ends the connection once its probes go unanswered (or data it sent stays
    unacknowledged), within about 25 s."""
    with (
        TcpProxy("127.0.0.1", postgres.port) as proxy,
        listen_connection(_through(proxy, postgres)) as conn,
        socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock,
    ):
        watch = {
            "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "unacknowledged_ms": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }
    assert watch["keepalive"] == 1
    assert watch["idle"] + watch["interval"] * watch["count"] <= 30, watch
    assert 0 < watch["unacknowledged_ms"] <= 30_000, watch
