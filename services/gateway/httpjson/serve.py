"""The HTTP/JSON server beside the gateway's gRPC server, in the same process:
uvicorn on a thread of its own, with its own event loop, and bounds on its
connections (uvicorn keeps one that sends nothing open for good)."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
from collections import Counter

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from services.gateway.httpjson.app import HttpJsonApp
from services.gateway.listening import split, write_port

# Connections served at once (over it, 503) and how long one may send nothing
# (from its opening, or from its last answer).
MAX_CONNECTIONS = 1000
KEEP_ALIVE_SECONDS = 30
# A request's head and body must arrive within this long of its first byte,
# however slowly they trickle (the largest body at 2 Mbit/s).
REQUEST_SECONDS = 60
_OVER_SHARE_BODY = b'{"code": "unavailable", "message": "too many connections from this address"}'
_OVER_SHARE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_OVER_SHARE_BODY), _OVER_SHARE_BODY)
)


def bounded(per_address: Counter[str], share: int) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, with a deadline on each connection until
    its request has arrived whole, and ``per_address`` counting each client
    address's connections (one server's, on its event loop's thread), at
    most ``share`` of them open at once."""

    class Bounded(H11Protocol):
        address = ""
        timer: asyncio.TimerHandle | None = None
        receiving = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.address = self.client[0] if self.client else ""
            per_address[self.address] += 1
            if per_address[self.address] > share:
                transport.write(_OVER_SHARE)
                transport.close()
                return
            self._wait(KEEP_ALIVE_SECONDS)

        def connection_lost(self, exc: Exception | None) -> None:
            per_address[self.address] -= 1
            if per_address[self.address] <= 0:
                del per_address[self.address]
            self._stop()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self.receiving:
                # A request's first byte: the whole of it is due in REQUEST_SECONDS.
                self.receiving = True
                self._wait(REQUEST_SECONDS)
            super().data_received(data)

        def on_response_complete(self) -> None:
            self.receiving = False
            self._wait(KEEP_ALIVE_SECONDS)
            super().on_response_complete()

        def _wait(self, seconds: float) -> None:
            self._stop()
            self.timer = self.loop.call_later(seconds, self._late)

        def _stop(self) -> None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def _late(self) -> None:
            self.timer = None
            # Only while the request is still arriving (or none has begun): a
            # request read whole is the call's own deadline's to end.
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self.transport.close()

    return Bounded


class HttpJsonServer:
    def __init__(self, listen: str, app: HttpJsonApp, per_address: int) -> None:
        """``per_address``: the connections one client address may hold open,
        so that one address cannot take every one (the gateway's
        ``http_connections_per_address``; behind a proxy, the proxy is the
        address)."""
        host, port = split(listen)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Bound here: a port in use fails at start-up, and port 0 is known at once.
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the connections only
        # then (without it, a response's body waits for the client's delayed
        # ACK of its head: 40 ms a call on a kept-alive connection).
        self.socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.port = int(self.socket.getsockname()[1])
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                lifespan="on",
                log_config=None,
                access_log=False,
                # The client's address is the connection's: X-Forwarded-For is
                # not believed (the failed-authentication limit keys on it).
                proxy_headers=False,
                server_header=False,
                http=bounded(Counter(), per_address),
                limit_concurrency=MAX_CONNECTIONS,
                timeout_keep_alive=KEEP_ALIVE_SECONDS,
            )
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="http-json", daemon=True
        )

    def start(self, port_file: str = "", timeout: float = 10.0) -> int:
        """Serves; the port, written to ``port_file`` too when one is named."""
        self.thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if self.server.started or not self.thread.is_alive():
                break
            deadline.wait(0.01)
        if not self.server.started:
            raise RuntimeError(f"the HTTP/JSON server did not start on port {self.port}")
        if port_file:
            write_port(port_file, self.port)
        return self.port

    def stop(self, grace: float = 10.0) -> None:
        """Stops accepting connections and closes the idle ones at once; a
        call in flight (its body still arriving too) gets ``grace`` seconds
        to be answered, its connection closed then. Called before the gRPC
        server drains: the calls are relayed to it."""
        self.server.config.timeout_graceful_shutdown = math.ceil(grace)
        self.server.should_exit = True
        # Past the grace, the lifespan's shutdown (the relay's channels) and
        # uvicorn's 0.1 s ticks.
        self.thread.join(timeout=grace + 5)
        self.socket.close()
