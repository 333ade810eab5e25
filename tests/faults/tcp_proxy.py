"""A TCP proxy in front of a server, for faults a network makes: each
connection it accepts is carried to the server until ``blackhole`` holds the
connections open at that moment: nothing more is carried either way and
neither end is read from, yet no socket is closed, as when a host vanishes
or the network between is cut (nothing tells either end). Connections made
afterwards are carried as before."""

from __future__ import annotations

import selectors
import socket
import struct
import threading
from types import TracebackType

# How often a waiting thread looks up, to notice a hold or the proxy closing.
_POLL_SECONDS = 0.2


class _Pair:
    """One client's connection and the proxy's own to the server."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.held = threading.Event()
        self.ended = threading.Event()

    def carry(self, closing: threading.Event) -> None:
        other = {self.client: self.server, self.server: self.client}
        with selectors.DefaultSelector() as selector:
            for end in other:
                selector.register(end, selectors.EVENT_READ, end)
            while not (closing.is_set() or self.held.is_set()):
                for key, _ in selector.select(_POLL_SECONDS):
                    if self.held.is_set():
                        break
                    sock: socket.socket = key.data
                    try:
                        data = sock.recv(65536)
                        if data:
                            other[sock].sendall(data)
                    except OSError:
                        data = b""
                    if not data:
                        self.close()
                        return

    def close(self) -> None:
        self.ended.set()
        for sock in (self.client, self.server):
            sock.close()


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_POLL_SECONDS)
        self.port: int = self._listener.getsockname()[1]
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            client.settimeout(None)
            pair = _Pair(client, server)
            thread = threading.Thread(target=pair.carry, args=(self._closing,), daemon=True)
            with self._lock:
                self._pairs.append(pair)
                self._threads.append(thread)
            thread.start()

    def blackhole(self) -> int:
        """Holds every connection open now; how many were held."""
        with self._lock:
            open_now = [p for p in self._pairs if not p.ended.is_set()]
        for pair in open_now:
            pair.held.set()
        return len(open_now)

    def reset(self) -> int:
        """Ends every connection open now: the client's side with a reset
        (as a firewall or NAT that forgot it answers), the server's with a
        close, so the server ends its session and stays up. The client
        learns of it only when it next reads. How many were ended."""
        with self._lock:
            open_now = [p for p in self._pairs if not p.ended.is_set()]
        for pair in open_now:
            # Linger 0: the close sends a reset, not an orderly end.
            pair.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            pair.held.set()
            pair.close()
        return len(open_now)

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
        with self._lock:
            for pair in self._pairs:
                if not pair.ended.is_set():
                    pair.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
