"""Command-line options of the MCP server, kept apart from the server so that
building the `recallatron` parser does not import the MCP SDK."""

from __future__ import annotations

import argparse
import os

from recallatron.client import default_gateway

# Beside the gateway's HTTP/JSON (7420) and review page (7410).
DEFAULT_HTTP = "127.0.0.1:7421"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the default: one member, the agent client starts it) or streamable http",
    )
    parser.add_argument(
        "--gateway",
        default=default_gateway(),
        help="host:port of the gateway the tools call (default: RECALLATRON_GATEWAY, "
        "else 127.0.0.1:7400)",
    )
    parser.add_argument(
        "--listen",
        default=os.environ.get("RECALLATRON_MCP_LISTEN", DEFAULT_HTTP),
        help="host:port for --transport http (the endpoint is /mcp; default: "
        f"RECALLATRON_MCP_LISTEN, else {DEFAULT_HTTP})",
    )
