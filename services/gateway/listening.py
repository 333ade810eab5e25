"""What the gateway's HTTP servers (the HTTP/JSON API and the review page)
share about where they listen: the `host:port` setting read, and the bound
port told to whoever started the process on port 0."""

from __future__ import annotations

import os


def split(listen: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts in brackets; no host: 127.0.0.1)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def write_port(port_file: str, port: int) -> None:
    """Writes ``port`` to ``port_file`` whole or not at all: renamed into
    place, so a reader polling the file never sees half of it."""
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
