"""The HTTP/JSON server beside the gateway's gRPC server, in the same process:
uvicorn on a thread of its own, with its own event loop."""

from __future__ import annotations

import socket
import threading

import uvicorn

from services.gateway.httpjson.app import HttpJsonApp
from services.gateway.listening import split, write_port

# Connections served at once (over it, 503) and how long an idle one is kept.
MAX_CONNECTIONS = 1000
KEEP_ALIVE_SECONDS = 30


class HttpJsonServer:
    def __init__(self, listen: str, app: HttpJsonApp) -> None:
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

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        self.socket.close()
