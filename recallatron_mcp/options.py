"""Command-line options of the MCP server, kept apart from the server so that
building the `recallatron` parser does not import the MCP SDK."""

from __future__ import annotations

import argparse
import os

from recallatron.client_connection import local_gateway

# Beside the gateway's HTTP/JSON (7420) and review page (7410).
DEFAULT_HTTP = "127.0.0.1:7421"
LISTEN_SETTING = "RECALLATRON_MCP_LISTEN"


def listen_address(listen: str) -> tuple[str, int]:
    """--listen's host (127.0.0.1 when left out; an IPv6 one in brackets or
    not) and port. One without a port, or with one no port can be, stops the
    start naming the option and the variable its default comes from."""
    host, _, port = listen.strip().rpartition(":")
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(
            f"listen: {listen[:60]!r} is not host:port with a port from 1 to 65535 "
            f"(--listen, or {LISTEN_SETTING})"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the default: one member, the agent client starts it) or streamable http",
    )
    parser.add_argument(
        "--gateway",
        default=local_gateway(),
        help="host:port of the gateway the tools call (default: RECALLATRON_GATEWAY, "
        "else the local stack's in RECALLATRON_STATE_DIR, else 127.0.0.1:7400)",
    )
    parser.add_argument(
        "--listen",
        default=os.environ.get(LISTEN_SETTING, DEFAULT_HTTP),
        help="host:port for --transport http (the endpoint is /mcp; default: "
        f"RECALLATRON_MCP_LISTEN, else {DEFAULT_HTTP})",
    )
