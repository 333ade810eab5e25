"""One request per JSON-RPC id at a time in an MCP session (streamable HTTP).

The SDK's HTTP transport keeps one response stream per request id: a second
request with an id still in flight takes that id's stream, so the first
request's POST never gets an answer and hangs (and the second gets the
first's). JSON-RPC says ids are unique among a session's pending requests,
so a duplicate is the client's mistake; it is refused at once here, with a
JSON-RPC error on its own POST, and the request already running keeps its
answer. The SDK keys the streams by the id as text, so an id whose text is
another's in flight (7 and "7") is refused alike. Over stdio every answer
goes out on the one stream, so nothing hangs there."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"
# JSON-RPC's "Invalid Request".
INVALID_REQUEST = -32600


def _request_ids(body: bytes) -> list[Any]:
    """The ids of the requests (not notifications or responses) in a body."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        # Not JSON, or nested past what the parser follows: the SDK refuses it.
        return []
    items = payload if isinstance(payload, list) else [payload]
    return [
        item["id"]
        for item in items
        if isinstance(item, dict) and "method" in item and item.get("id") is not None
    ]


def _stream_key(request_id: Any) -> str:
    """The key of a request's answer stream as the SDK makes it: the id as
    text, so 7 and "7" (two ids to JSON-RPC) take the same stream and are one
    id here."""
    return str(request_id) if isinstance(request_id, int | str) else json.dumps(request_id)


class OneRequestPerId:
    """ASGI middleware around the SDK's streamable HTTP app."""

    def __init__(self, app: App, max_body_size: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        # The transport's own limit: a longer body is refused (413) as it
        # would refuse it, unread past the limit, since reading it all to
        # look for ids would hold more than the transport ever does.
        self.max_body_size = max_body_size
        # (session id, stream key of the request id) of requests being answered.
        self.in_flight: set[tuple[bytes, str]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = dict(scope.get("headers") or ()).get(SESSION_HEADER)
        if scope.get("type") != "http" or scope.get("method") != "POST" or not session:
            await self.app(scope, receive, send)
            return
        peeked = await self._peek(scope, receive)
        if peeked is None:
            await self._too_large(send)
            return
        body, replay = peeked
        ids = _request_ids(body)
        keys = [(session, _stream_key(i)) for i in ids]
        taken = [i for i, k in zip(ids, keys, strict=True) if k in self.in_flight]
        if taken:
            await self._refuse(send, taken[0])
            return
        self.in_flight.update(keys)
        try:
            await self.app(scope, replay, send)
        finally:
            self.in_flight.difference_update(keys)

    async def _peek(self, scope: Scope, receive: Receive) -> tuple[bytes, Receive] | None:
        """The body and a receive that gives the app the same messages
        again; None when it is longer than max_body_size (by its declared
        length, unread, or once that much has come)."""
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body_size:
            return None
        chunks: list[Message] = []
        size = 0
        more = True
        while more:
            message = await receive()
            chunks.append(message)
            if message.get("type") != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_size:
                return None
            more = bool(message.get("more_body"))
        body = b"".join(m.get("body", b"") for m in chunks) if not more else b""

        async def replay() -> Message:
            if chunks:
                return chunks.pop(0)
            return await receive()

        return body, replay

    async def _too_large(self, send: Send) -> None:
        """The transport's own answer to a body past its limit."""
        await _respond(send, 413, b"text/plain; charset=utf-8", b"Request body too large")

    async def _refuse(self, send: Send, request_id: Any) -> None:
        error = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": INVALID_REQUEST,
                "message": "a request with this id is still in flight in this session; "
                "give each request a new id",
            },
        }
        await _respond(send, 409, b"application/json", json.dumps(error).encode())


async def _respond(send: Send, status: int, content_type: bytes, body: bytes) -> None:
    """A whole answer of this middleware's own, never passed to the app."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
