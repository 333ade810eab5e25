"""A tool call the client cancels (notifications/cancelled) over streamable
HTTP: its gateway call is cancelled at once, so the gateway stops the work,
the POST is answered and the request id is free again, long before the
call's deadline (recallatron_mcp/tools.py, call_cancellable). The MCP server
runs as its own process; the gateway is a stub in this process whose first
recall is held until the call ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import httpx2
import pytest

from tests.surfaces.mcp_server import http_server
from tests.surfaces.test_mcp_duplicate_ids import ACCEPT, _messages

pytestmark = pytest.mark.integration

# A generous limit for a condition that holds at once when all is well.
WAIT = 30.0


class HeldRecall:
    """The gateway's Recall: the first call is held until gRPC ends it
    (cancelled, or run out of time), noting the time it had left then; later
    calls are answered at once with no memories."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()
        # The time the held call had when it came, and when it ended.
        self.granted: float | None = None
        self.remaining: float | None = None
        self.calls = 0
        self._lock = threading.Lock()

    def recall(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if not first:
            return b""  # an empty RecallResponse

        def ended() -> None:
            self.remaining = context.time_remaining()
            self.ended.set()

        self.granted = context.time_remaining()
        context.add_callback(ended)
        self.started.set()
        self.ended.wait(WAIT)
        return b""


@pytest.fixture
def held() -> Iterator[tuple[str, HeldRecall]]:
    recall = HeldRecall()
    server = grpc.server(ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "recallatron.v1.MemoryService",
                {"Recall": grpc.unary_unary_rpc_method_handler(recall.recall)},
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", recall
    recall.ended.set()
    server.stop(0)


def _session(url: str) -> dict[str, str]:
    """The headers of an initialized session."""
    base = {"Accept": ACCEPT, "Authorization": "Bearer rct_not_checked_here"}
    init = httpx2.post(
        url,
        headers=base,
        timeout=WAIT,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cancel", "version": "0"},
            },
        },
    )
    assert init.status_code == 200, init.text
    headers = {
        **base,
        "mcp-session-id": init.headers["mcp-session-id"],
        "mcp-protocol-version": _messages(init)[0]["result"]["protocolVersion"],
    }
    done = httpx2.post(
        url,
        headers=headers,
        timeout=WAIT,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    assert done.status_code == 202, done.text
    return headers


def test_a_cancelled_tool_call_cancels_its_gateway_call_and_frees_its_id(
    held: tuple[str, HeldRecall],
) -> None:
    gateway, recall = held
    with http_server(gateway) as url:
        headers = _session(url)
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "anything"}},
        }
        first: dict[str, Any] = {}

        def post_first() -> None:
            first["response"] = httpx2.post(url, headers=headers, json=call, timeout=60)

        thread = threading.Thread(target=post_first)
        thread.start()
        assert recall.started.wait(WAIT), "the recall never reached the gateway"
        cancel = httpx2.post(
            url,
            headers=headers,
            timeout=WAIT,
            json={
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "the person moved on"},
            },
        )
        assert cancel.status_code == 202, cancel.text
        assert recall.ended.wait(WAIT), "the gateway's call never ended"
        # Most of its time left: the call was cancelled, not run out. (Not
        # "any time left": the MCP server's own deadline comes a little before
        # the gateway's, and reaches it as a cancellation.)
        assert recall.granted is not None and recall.remaining is not None
        assert recall.remaining > recall.granted / 2, (
            "the gateway's call ran on to its deadline after the client cancelled it "
            f"({recall.remaining:.1f} s of {recall.granted:.1f} s left)"
        )
        thread.join(WAIT)
        assert "response" in first, "the cancelled request's POST was left hanging"
        answers = _messages(first["response"])
        assert [a.get("id") for a in answers] == [7]
        assert answers[0]["error"]["code"] == -32800, answers
        # The id is free again: a new call with it is served, not refused 409.
        again = httpx2.post(url, headers=headers, json=call, timeout=WAIT)
        assert again.status_code == 200, again.text
        result = _messages(again)[0]["result"]
        assert result["isError"] is False, result
