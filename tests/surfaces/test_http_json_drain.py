"""The HTTP/JSON server on SIGTERM (services/gateway/__main__.py): it stops
before the gRPC server its calls are relayed to drains, so a call in flight
is answered as it would have been, and a kept-alive connection is closed
(its client goes elsewhere) instead of answered ``unavailable``."""

from __future__ import annotations

import signal
import socket

import pytest

from recallatron_devkit.stack import Stack, free_port
from tests.integration.test_rolling_upgrade import REPO, Processes

pytestmark = pytest.mark.integration

DESCRIBE = "/recallatron.v1.MemoryService/DescribeTools"
HEAD = (
    f"POST {DESCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 2\r\n\r\n"
).encode()
# Generous: every wait is for a condition.
WAIT_SECONDS = 120


def _status(sock: socket.socket) -> int:
    """The status of the answer read whole from ``sock`` (by its
    Content-Length or its last chunk, so the connection is idle after it);
    0 when it was closed without one."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            return 0
        if not part:
            return 0
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields = dict(line.lower().partition(b":")[::2] for line in lines[1:])
    length = int(fields.get(b"content-length", b"0"))
    chunked = fields.get(b"transfer-encoding", b"").strip() == b"chunked"
    while (not body.endswith(b"0\r\n\r\n")) if chunked else len(body) < length:
        part = sock.recv(65536)
        assert part, "closed in the middle of an answer"
        body += part
    return int(lines[0].split(b" ", 2)[1])


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (nothing is due on it)."""
    sock.settimeout(WAIT_SECONDS)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_sigterm_answers_the_http_call_in_flight_and_closes_kept_alive_connections(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The HTTP server was stopped only after the gRPC drain: a call still
    arriving then, or one sent on a kept-alive connection, was relayed to a
    server that refused it, and answered 503 ``unavailable``."""
    procs = Processes(stack, tmp_path_factory.mktemp("drained-gateway"))
    port = free_port()
    settings = {
        "RECALLATRON_HTTP_LISTEN": f"127.0.0.1:{port}",
        "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "60",
    }
    kept = arriving = None
    try:
        procs.start(
            "gateway", REPO, settings, store=stack.address("store"), rank=stack.address("rank")
        )
        gateway = procs.procs[-1]
        kept = socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS)
        kept.sendall(HEAD + b"{}")
        assert _status(kept) == 200
        arriving = socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS)
        arriving.sendall(HEAD + b"{")
        # A call answered on the other connection after that: the server's
        # one event loop has read the arriving call's head by then.
        kept.sendall(HEAD + b"{}")
        assert _status(kept) == 200
        gateway.send_signal(signal.SIGTERM)
        # The idle connection is closed, not left to answer through a draining server.
        assert _closed(kept)
        arriving.sendall(b"}")
        assert _status(arriving) == 200
        assert gateway.wait(WAIT_SECONDS) == 0
    finally:
        for sock in (kept, arriving):
            if sock is not None:
                sock.close()
        procs.stop()
