"""A `tools/call` whose `arguments` is not a JSON object (a list, a string, a
number) is refused naming `arguments` and saying an object is expected, as
every other bad argument is named, over stdio and streamable HTTP; the
session serves on. The call never reaches the gateway, so the server runs
against an address that accepts connections and never answers."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.surfaces.mcp_server import REPO, http_server

pytestmark = pytest.mark.integration

ACCEPT = "application/json, text/event-stream"
# A guard against a server that never answers, not a timing check.
REPLY_WAIT_SECONDS = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "arguments-shape", "version": "0"},
    },
}
NOT_OBJECTS = [["query", "q"], "query=q", 5, True]
IDS = ["list", "string", "number", "boolean"]


@pytest.fixture
def silent_gateway() -> Iterator[str]:
    """A listening socket nobody ever reads."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def call(request_id: int, arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": arguments},
    }


def assert_names_arguments(reply: dict[str, Any], request_id: int) -> None:
    assert reply["id"] == request_id and "result" not in reply, reply
    error = reply["error"]
    assert error["code"] == -32602, reply
    message = error["message"]
    assert "arguments" in message and "object" in message, reply


class Stdio:
    """``python -m recallatron_mcp --transport stdio`` with raw lines in and out."""

    def __init__(self, gateway: str) -> None:
        env = {**os.environ, "RECALLATRON_TOKEN": "rc_not_checked_here"}
        env["RECALLATRON_GATEWAY"] = gateway
        env.pop("RECALLATRON_TOKEN_FILE", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "recallatron_mcp", "--transport", "stdio"],
            env=env,
            cwd=str(REPO),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def ask(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload).encode() + b"\n")
        self.proc.stdin.flush()
        if "id" not in payload:
            return {}
        try:
            reply: dict[str, Any] = json.loads(self.lines.get(timeout=REPLY_WAIT_SECONDS))
        except queue.Empty:
            raise AssertionError("the server sent no reply") from None
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def test_arguments_not_an_object_are_named_over_stdio(silent_gateway: str) -> None:
    """The SDK refused them -32602 'Invalid request parameters', naming nothing."""
    server = Stdio(silent_gateway)
    try:
        assert "result" in server.ask(INITIALIZE)
        server.ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i, arguments in enumerate(NOT_OBJECTS, start=1):
            assert_names_arguments(server.ask(call(i, arguments)), i)
        # Still serving.
        listed = server.ask({"jsonrpc": "2.0", "id": 99, "method": "tools/list"})
        assert listed["result"]["tools"], listed
    finally:
        server.close()


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE answer."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


@pytest.mark.parametrize("arguments", NOT_OBJECTS, ids=IDS)
def test_arguments_not_an_object_are_named_over_http(silent_gateway: str, arguments: Any) -> None:
    with http_server(silent_gateway) as url:
        base = {"Accept": ACCEPT, "Authorization": "Bearer rc_not_checked_here"}
        init = httpx2.post(url, headers=base, timeout=30, json=INITIALIZE)
        assert init.status_code == 200, init.text
        headers = {
            **base,
            "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": _messages(init)[0]["result"]["protocolVersion"],
        }
        done = httpx2.post(
            url,
            headers=headers,
            timeout=30,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        assert done.status_code == 202, done.text
        answer = httpx2.post(url, headers=headers, timeout=30, json=call(1, arguments))
        replies = _messages(answer)
        assert len(replies) == 1, answer.text
        assert_names_arguments(replies[0], 1)
