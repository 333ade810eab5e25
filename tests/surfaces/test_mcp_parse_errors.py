"""The MCP server over stdio answers a line that is not JSON with a JSON-RPC
parse error (JSON-RPC 2.0 §5.1: code -32700, id null), and a line of JSON
that is no JSON-RPC message with an invalid-request error (-32600), and
keeps serving: the next request is answered as ever. Raw lines on the
process's stdin, since the SDK's client cannot send either."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from recallatron.tools import TOOLS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import REPO

pytestmark = pytest.mark.integration

# A guard against a server that never answers, not a timing check.
REPLY_WAIT_SECONDS = 60.0


class StdioServer:
    """``python -m recallatron_mcp --transport stdio`` with raw lines in and out."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def request(self, payload: dict[str, Any]) -> None:
        self.send(json.dumps(payload).encode())

    def reply(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=REPLY_WAIT_SECONDS)
        except queue.Empty:
            raise AssertionError("the server sent no reply") from None
        reply: dict[str, Any] = json.loads(line)
        return reply


@pytest.fixture
def server(stack: Stack, team: Team) -> Iterator[StdioServer]:
    env = {
        **os.environ,
        "RECALLATRON_TOKEN": team.clients["ada"].token,
        "RECALLATRON_GATEWAY": stack.gateway,
    }
    env.pop("RECALLATRON_TOKEN_FILE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "recallatron_mcp", "--transport", "stdio"],
        env=env,
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield StdioServer(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _initialize(server: StdioServer, request_id: int) -> dict[str, Any]:
    server.request(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "parse-error-test", "version": "0"},
            },
        }
    )
    return server.reply()


NOT_JSON = [b"this is not json", b"{", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe garbage"]


@pytest.mark.parametrize("line", NOT_JSON, ids=["words", "brace", "cut-short", "not-utf8"])
def test_a_line_that_is_not_json_gets_a_parse_error_and_serving_goes_on(
    server: StdioServer, line: bytes
) -> None:
    server.send(line)
    reply = server.reply()
    assert reply["jsonrpc"] == "2.0" and reply["id"] is None, reply
    assert reply["error"]["code"] == -32700, reply
    assert "result" not in reply
    # Still serving: a session starts and lists its tools.
    started = _initialize(server, 1)
    assert started["id"] == 1 and started["result"]["serverInfo"]["name"] == "recallatron"
    server.request({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send(line)
    assert server.reply()["error"]["code"] == -32700
    server.request({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = server.reply()
    assert listed["id"] == 2 and len(listed["result"]["tools"]) == len(TOOLS), listed


@pytest.mark.parametrize(
    "payload",
    ['{"id": 7}', "[]", "42", '{"jsonrpc": "1.0", "id": 7, "method": "ping"}'],
    ids=["no-method", "empty-batch", "number", "wrong-version"],
)
def test_json_that_is_no_message_gets_an_invalid_request_error(
    server: StdioServer, payload: str
) -> None:
    server.send(payload.encode())
    reply = server.reply()
    assert reply["jsonrpc"] == "2.0" and reply["id"] is None, reply
    assert reply["error"]["code"] == -32600, reply
    assert _initialize(server, 3)["id"] == 3
