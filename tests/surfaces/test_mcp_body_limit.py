"""The duplicate-id check (recallatron_mcp/inflight.py) reads a POST's body
to find its ids before the SDK's transport does; a body past the transport's
limit (4 MiB) is refused there as the transport refuses it (413), with no
more of it read than the limit and one chunk, and the app never called. No
processes: the middleware over a stand-in app."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from recallatron_mcp.inflight import OneRequestPerId

LIMIT = DEFAULT_MAX_REQUEST_BODY_SIZE
CHUNK = 64 * 1024


class Body:
    """An ASGI receive giving ``total`` bytes (None: without end) in chunks,
    counting what was read."""

    def __init__(self, total: int | None, first: bytes = b"") -> None:
        self.total = total
        self.first = first
        self.read = 0

    async def __call__(self) -> dict[str, Any]:
        chunk = self.first if self.read == 0 and self.first else b" " * CHUNK
        if self.total is not None:
            chunk = chunk[: self.total - self.read]
        self.read += len(chunk)
        more = self.total is None or self.read < self.total
        return {"type": "http.request", "body": chunk, "more_body": more}


def _post(body: Body, content_length: int | None = None) -> tuple[bool, list[dict[str, Any]]]:
    """Whether the app was called, and what was sent back."""
    called: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(True)

    headers = [(b"mcp-session-id", b"s1")]
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = {"type": "http", "method": "POST", "headers": headers}
    sent: list[dict[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    asyncio.run(OneRequestPerId(app)(scope, body, send))
    return bool(called), sent


REQUEST = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}'


def test_a_body_just_over_the_limit_is_refused_413_unpassed() -> None:
    body = Body(LIMIT + 1, REQUEST)
    called, sent = _post(body)
    assert not called, "a body over the transport's limit was passed on"
    assert sent[0]["status"] == 413


def test_a_body_streamed_past_the_limit_is_read_no_further() -> None:
    body = Body(None, REQUEST)
    called, sent = _post(body)
    assert body.read <= LIMIT + CHUNK, f"read {body.read} bytes of an endless body"
    assert not called
    assert sent[0]["status"] == 413


def test_a_body_declared_past_the_limit_is_refused_unread() -> None:
    body = Body(LIMIT + 1, REQUEST)
    called, sent = _post(body, content_length=LIMIT + 1)
    assert not called and sent[0]["status"] == 413
    assert body.read == 0


def test_a_body_at_the_limit_is_passed_on() -> None:
    body = Body(LIMIT, REQUEST)
    called, sent = _post(body, content_length=LIMIT)
    assert called and not sent
