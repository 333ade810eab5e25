"""Two requests with the same JSON-RPC id in one MCP session (streamable
HTTP): the second is refused at once, and the first still gets its own
answer instead of hanging (recallatron_mcp/inflight.py). The MCP server runs
as its own process against a gateway address that accepts connections and
never answers, so the first call is surely still in flight when the second
arrives; it ends with the client's deadline (10 s) as a tool error."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.surfaces.mcp_server import http_server

pytestmark = pytest.mark.integration

ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def silent_gateway() -> Iterator[str]:
    """A listening socket nobody ever reads: calls to it wait for their deadline."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE answer."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


@pytest.mark.parametrize("second_id", [7, "7"], ids=["same", "same-as-text"])
def test_a_duplicate_request_id_leaves_the_first_answered(
    silent_gateway: str, second_id: int | str
) -> None:
    """7 and "7" are two ids to JSON-RPC, but the SDK keys its answer streams
    by the id as text: the second took the first's stream like a duplicate."""
    with http_server(silent_gateway) as url:
        base = {"Accept": ACCEPT, "Authorization": "Bearer rc_not_checked_here"}
        init = httpx2.post(
            url,
            headers=base,
            timeout=30,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "duplicate-ids", "version": "0"},
                },
            },
        )
        assert init.status_code == 200, init.text
        version = _messages(init)[0]["result"]["protocolVersion"]
        headers = {
            **base,
            "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": version,
        }
        done = httpx2.post(
            url,
            headers=headers,
            timeout=30,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        assert done.status_code == 202, done.text
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "anything"}},
        }
        first: dict[str, Any] = {}

        def post_first() -> None:
            try:
                first["response"] = httpx2.post(url, headers=headers, json=call, timeout=60)
            except httpx2.TimeoutException as exc:
                first["error"] = exc

        thread = threading.Thread(target=post_first)
        thread.start()
        time.sleep(1.0)  # the first is now waiting on the silent gateway
        second = httpx2.post(url, headers=headers, json={**call, "id": second_id}, timeout=60)
        assert second.status_code == 409, second.text
        refusal = second.json()
        assert refusal["id"] == second_id and refusal["error"]["code"] == -32600
        thread.join(90)
        assert "error" not in first, "the first request was left hanging"
        answers = _messages(first["response"])
        assert [a["id"] for a in answers] == [7]
        # Its own answer: the gateway did not answer in time, as a tool error.
        assert answers[0]["result"]["isError"] is True
