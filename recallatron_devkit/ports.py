"""The local stack's ports: a free one for a stack of its own, and, before a
stack starts anything, whether every fixed port it will listen on is free (a
port another process holds otherwise ends the start in a service's bind
traceback, or in Postgres's log, far from the setting that moves it)."""

from __future__ import annotations

import errno
import random
import socket
from pathlib import Path

# Ports handed out by free_port in this process: two picks never collide.
_HANDED_OUT: set[int] = set()


def _ephemeral_start() -> int:
    """Where the kernel's range for outgoing connections' ports begins."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port free now, for a stack started on ports of its own.

    Picked below the kernel's ephemeral range: a port the kernel hands out
    (port 0) may meanwhile become the local end of some outgoing connection
    (a Postgres client's, say) before the stack binds it, and the service
    then fails with "Address already in use"."""
    low, high = 10_000, _ephemeral_start()
    rng = random.SystemRandom()
    # A range too small to find a port in by chance: the kernel's pick below.
    attempts = 200 if high - low > 1000 else 0
    for _ in range(attempts):
        port = rng.randrange(low, high)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# What listens, by the name check_free is given it under.
_SHOWN = {"review": "the review page", "http": "HTTP/JSON"}


class PortTaken(RuntimeError):
    """``what`` (postgres, a service, review, http) cannot listen on
    ``address``: another process holds it."""

    def __init__(self, what: str, address: str) -> None:
        super().__init__(f"{address} ({_SHOWN.get(what, what)}) is taken by another process")
        self.what = what
        self.address = address


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # As the servers bind: a port a stopped stack's connections still
        # hold in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def check_free(listens: dict[str, str]) -> None:
    """Raises PortTaken for the first of ``listens`` (name -> host:port) whose
    fixed port another process holds; port 0 (a free one), an address
    switched off ("0", empty) or one that is not a plain host:port is left to
    its server."""
    for what, listen in listens.items():
        host, _, port_text = listen.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        try:
            port = int(port_text)
        except ValueError:
            continue
        if port == 0:
            continue
        try:
            free = _bindable(host, port)
        except OSError:
            continue  # an address this host does not have: its server says so
        if not free:
            raise PortTaken(what, listen)
