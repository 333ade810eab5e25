"""The MCP server as the MCP tests start it: its own process over streamable
HTTP on a free port, or an SDK client session with it over stdio."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
# A client's first request, as a raw POST sends it.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextmanager
def http_server(
    gateway: str, token: str = "", *, port: int = 0, more_env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """The server for ``gateway`` over streamable HTTP; yields its /mcp URL once
    it answers, and ends it after. ``token``: the member when a request brings
    none (RECALLATRON_TOKEN); without it each request must bring its own.
    ``port``: a free port chosen before (else one is taken); ``more_env``: more
    of its settings (the OAuth ones)."""
    port = port or free_port()
    env = {**os.environ, "RECALLATRON_GATEWAY": gateway, **(more_env or {})}
    env.pop("RECALLATRON_TOKEN", None)
    if token:
        env["RECALLATRON_TOKEN"] = token
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "recallatron_mcp",
            "--transport",
            "http",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        env=env,
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx2.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "MCP HTTP server did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@asynccontextmanager
async def stdio_session(gateway: str, token: str) -> AsyncIterator[ClientSession]:
    """The SDK's client in an initialized session with the server over stdio,
    as ``token``'s member (the server's log discarded)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "recallatron_mcp", "--transport", "stdio"],
        env={"RECALLATRON_TOKEN": token, "RECALLATRON_GATEWAY": gateway},
        cwd=str(REPO),
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield s
