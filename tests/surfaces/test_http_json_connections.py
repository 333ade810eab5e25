"""The HTTP/JSON server's connections (services/gateway/httpjson/serve.py):
a connection that sends nothing, or a request that never finishes arriving,
is closed instead of holding one of the server's connections for good, and
one client address cannot take them all; either way anyone, without a token,
could shut the API for everybody."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from recallatron_devkit.stack import Stack, free_port
from services.gateway.httpjson.serve import MAX_CONNECTIONS
from services.gateway.settings import GatewaySettings
from tests.integration.test_rolling_upgrade import REPO, Processes

pytestmark = pytest.mark.integration

DESCRIBE = "/recallatron.v1.MemoryService/DescribeTools"
# One client address's share of the connections, unless the gateway is told otherwise.
PER_ADDRESS = int(GatewaySettings.model_fields["http_connections_per_address"].default)
# Generous: the server's own limits are tens of seconds.
WAIT_SECONDS = 240


def _status(stack: Stack, address: str = "127.0.0.1", port: int | None = None) -> int:
    """A call that needs no token, from ``address`` (a loopback one), to
    the session gateway's HTTP/JSON (or the one on ``port``)."""
    port = port or urllib.parse.urlparse(stack.http_url).port
    conn = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(address, 0))
    try:
        conn.sendall(
            f"POST {DESCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}".encode()
        )
        head = conn.recv(64)
    finally:
        conn.close()
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


@pytest.fixture
def port(stack: Stack) -> int:
    return int(urllib.parse.urlparse(stack.http_url).port or 0)


def _open(port: int, count: int, address: str) -> list[socket.socket]:
    return [
        socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(address, 0))
        for _ in range(count)
    ]


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (or answered it, then closed it)."""
    sock.settimeout(0.05)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def test_silent_and_unfinished_connections_are_closed_and_cannot_shut_the_api(
    stack: Stack, port: int, held: list[socket.socket]
) -> None:
    """MAX_CONNECTIONS connections that never sent a byte made every call 503
    for as long as they stayed open (they were never closed): no token needed."""
    silent = _open(port, PER_ADDRESS, "127.0.0.2")
    held.extend(silent)
    partial_head = _open(port, 1, "127.0.0.3")[0]
    partial_head.sendall(f"POST {DESCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Le".encode())
    partial_body = _open(port, 1, "127.0.0.3")[0]
    partial_body.sendall(
        b"POST /recallatron.v1.MemoryService/Recall HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    held.extend([partial_head, partial_body])
    # Every other address keeps being served meanwhile.
    assert _status(stack, "127.0.0.4") == 200
    unfinished = [*silent, partial_head, partial_body]
    deadline = time.monotonic() + WAIT_SECONDS
    while unfinished:
        unfinished = [s for s in unfinished if not _closed_by_server(s)]
        assert time.monotonic() < deadline, (
            f"{len(unfinished)} connections that never finished a request are still open "
            f"after {WAIT_SECONDS} s"
        )
        time.sleep(1)


def test_one_address_cannot_take_every_connection(
    stack: Stack, port: int, held: list[socket.socket]
) -> None:
    held.extend(_open(port, MAX_CONNECTIONS, "127.0.0.5"))
    time.sleep(0.5)
    assert _status(stack, "127.0.0.6") == 200
    # The address over its share is refused, the others are not.
    assert _status(stack, "127.0.0.5") == 503


@pytest.fixture(scope="module")
def behind_one_address(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """Another gateway on the session store, as one behind an ingress is
    configured: every client comes from the ingress's one address."""
    procs = Processes(stack, tmp_path_factory.mktemp("one-address-gateway"))
    port = free_port()
    settings = {
        "RECALLATRON_HTTP_LISTEN": f"127.0.0.1:{port}",
        "RECALLATRON_HTTP_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS + 50),
    }
    try:
        procs.start(
            "gateway", REPO, settings, store=stack.address("store"), rank=stack.address("rank")
        )
        yield port
    finally:
        procs.stop()


def test_the_share_of_one_address_is_a_setting(
    stack: Stack, behind_one_address: int, held: list[socket.socket]
) -> None:
    """Fixed at 100: a deployment whose clients all
    come through one ingress address was refused past it."""
    held.extend(_open(behind_one_address, PER_ADDRESS + 20, "127.0.0.7"))
    assert _status(stack, "127.0.0.7", behind_one_address) == 200
    held.extend(_open(behind_one_address, 40, "127.0.0.7"))
    # Past the share set, the address is refused all the same.
    assert _status(stack, "127.0.0.7", behind_one_address) == 503


def test_a_kept_alive_connections_next_request_is_not_taken_for_its_going_away(
    port: int, held: list[socket.socket]
) -> None:
    """A call's connection is watched while it runs, so that a client that
    goes away stops its call: requests sent back to back on one connection
    (the next arriving while one is served) are each answered, none
    stopped as if the client had left."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)
    held.append(conn)
    request = (
        f"POST {DESCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()
    conn.sendall(request * 3)
    reader = conn.makefile("rb")
    statuses = []
    for _ in range(3):
        status = reader.readline()
        assert status.startswith(b"HTTP/1.1 "), f"after {statuses}: {status!r}"
        headers = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if b"content-length" in headers:
            reader.read(int(headers[b"content-length"]))
        else:  # chunked: up to its last, empty chunk
            while (size := int(reader.readline(), 16)) > 0:
                reader.read(size + 2)
            reader.readline()
        statuses.append(int(status.split(b" ")[1]))
    assert statuses == [200, 200, 200]
