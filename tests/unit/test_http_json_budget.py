"""The HTTP/JSON app's budget of request-body bytes held at once
(services/gateway/httpjson/budget.py), as ASGI events without a stack:
bodies being read hold it, the next that would pass it is refused unread
with ``unavailable`` (503, Retry-After), and what a call held is given back
however it ends, so the next is taken."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
from collections.abc import MutableMapping
from typing import Any

from recallatron.settings import CommonSettings
from recallatron.v1 import gateway_pb2
from services.gateway.httpjson.app import BODY_BUDGET_BYTES, HttpJsonApp
from services.gateway.httpjson.budget import Reservation

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name[n]
    for n in ("MemoryService", "ReviewService", "AdminService")
]
# Needs no token, and a body with an unknown field is refused once decoded:
# an answer of 400 says the body was taken, read and decoded.
DESCRIBE = "/recallatron.v1.MemoryService/DescribeTools"
REST = b'"noSuchField": 1}'
# Generous: every wait is for a condition.
WAIT_SECONDS = 30


class _Open:
    def admit(
        self, method: str, authorization: str | None, peer: str
    ) -> tuple[tuple[str, str], ...]:
        return ()


def _scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """A call of DescribeTools with these headers."""
    return {
        "type": "http",
        "method": "POST",
        "path": DESCRIBE,
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("192.0.2.7", 4000),
    }


class _Call:
    """One call whose body arrives in two parts: ``{`` at once, the rest
    (or the client's going away) only when :meth:`finish` is called."""

    def __init__(self, app: HttpJsonApp, length: int | None) -> None:
        self.app, self.length = app, length
        self.waiting = asyncio.Event()  # the first part read, the rest asked for
        self.go = asyncio.Event()
        self.gone = False
        self.parts = 0
        self.sent: list[MutableMapping[str, Any]] = []
        self.task: asyncio.Task[None] | None = None

    def start(self, first: bytes = b"{") -> None:
        headers = [(b"content-type", b"application/json")]
        if self.length is not None:
            headers.append((b"content-length", str(self.length).encode()))
        scope = _scope(headers)

        async def receive() -> dict[str, Any]:
            self.parts += 1
            if self.parts == 1:
                return {"type": "http.request", "body": first, "more_body": True}
            if self.parts == 2:
                self.waiting.set()
                await self.go.wait()
                if self.gone:
                    return {"type": "http.disconnect"}
                return {"type": "http.request", "body": REST, "more_body": False}
            await asyncio.sleep(3600)
            return {}

        async def send(event: MutableMapping[str, Any]) -> None:
            self.sent.append(event)

        self.task = asyncio.create_task(self.app(scope, receive, send))

    def finish(self, gone: bool = False) -> None:
        self.gone = gone
        self.go.set()

    async def answer(self) -> tuple[int, dict[str, Any], dict[bytes, bytes]]:
        assert self.task is not None
        await asyncio.wait_for(self.task, WAIT_SECONDS)
        start, body = self.sent[0], self.sent[-1]
        return start["status"], json.loads(body["body"]), dict(start["headers"])


def _app(budget: int = BODY_BUDGET_BYTES) -> HttpJsonApp:
    return HttpJsonApp("127.0.0.1:1", CommonSettings(), SERVICES, _Open(), body_budget=budget)


def test_bodies_being_read_hold_the_budget_and_the_next_is_refused_unread() -> None:
    """Each body was read whole whatever the others held: 1,000 connections
    of 8 MiB bodies against a gateway limited to 384Mi."""
    largest = CommonSettings().max_message_bytes

    async def run() -> None:
        app = _app()
        # As many of the largest bodies as the default budget holds, each
        # sending its first byte and then nothing.
        slow = [_Call(app, largest) for _ in range(BODY_BUDGET_BYTES // largest)]
        for call in slow:
            call.start()
        for call in slow:
            await asyncio.wait_for(call.waiting.wait(), WAIT_SECONDS)
        over = _Call(app, largest)
        over.start()
        status, answer, headers = await over.answer()
        assert (status, answer.get("code")) == (503, "unavailable"), answer
        assert headers.get(b"retry-after") == b"1"
        assert over.parts == 0  # not a byte of its body asked for
        # They end, one as the client goes away, the rest as refused bodies:
        # all they held is given back, and the same call is then taken.
        slow[0].finish(gone=True)
        for call in slow[1:]:
            call.finish()
        assert (await slow[0].answer())[0] == 499
        for call in slow[1:]:
            assert (await call.answer())[0] == 400
        assert app.budget.held == 0
        again = _Call(app, largest)
        again.start()
        await asyncio.wait_for(again.waiting.wait(), WAIT_SECONDS)
        again.finish()
        status, answer, _ = await again.answer()
        assert (status, answer.get("code")) == (400, "invalid_argument"), answer
        assert app.budget.held == 0

    asyncio.run(run())


def test_a_body_of_no_declared_length_is_held_as_it_arrives() -> None:
    """Without a Content-Length (chunked), what has arrived is held; the
    call whose next part would pass the budget is refused."""

    async def run() -> None:
        app = _app(100)
        holding = _Call(app, None)
        holding.start(first=b"{" + b" " * 79)
        await asyncio.wait_for(holding.waiting.wait(), WAIT_SECONDS)
        assert app.budget.held == 80
        over = _Call(app, None)
        over.start(first=b"{" + b" " * 29)
        status, answer, _ = await over.answer()
        assert (status, answer.get("code")) == (503, "unavailable"), answer
        assert app.budget.held == 80
        holding.finish()
        assert (await holding.answer())[0] == 400
        assert app.budget.held == 0

    asyncio.run(run())


async def _gzip_call(app: HttpJsonApp, body: bytes) -> tuple[int, dict[str, Any]]:
    """One call of a gzip body sent whole: its status and its answer."""
    wire = gzip.compress(body)
    scope = _scope(
        [
            (b"content-type", b"application/json"),
            (b"content-encoding", b"gzip"),
            (b"content-length", str(len(wire)).encode()),
        ]
    )
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": wire, "more_body": False}

    async def send(event: MutableMapping[str, Any]) -> None:
        sent.append(event)

    await asyncio.wait_for(app(scope, receive, send), WAIT_SECONDS)
    return sent[0]["status"], json.loads(sent[-1]["body"])


def test_a_gzip_body_is_held_inflated_and_refused_past_the_budget() -> None:
    """Only the bytes sent were reserved: a gzip body of a few dozen bytes
    inflated to 5,000 against a budget of 1,000 was decoded (every worker
    could hold the message limit more while inflating)."""

    async def run() -> None:
        app = _app(1000)
        status, answer = await _gzip_call(app, b"{" + b" " * 4982 + REST)
        assert (status, answer.get("code")) == (503, "unavailable"), answer
        assert app.budget.held == 0
        # One that fits inflated is taken, read and decoded.
        status, answer = await _gzip_call(app, b"{" + b" " * 500 + REST)
        assert (status, answer.get("code")) == (400, "invalid_argument"), answer
        assert app.budget.held == 0

    asyncio.run(run())


def test_a_gzip_body_holds_what_it_inflates_to_until_its_call_ends() -> None:
    """The reservation covers the inflated body (the bytes sent dropped):
    what the call holds while the request is relayed."""
    app = _app(10_000)
    inflated = b"{" + b" " * 4998 + b"}"
    reservation = Reservation(app.budget)
    reservation.cover(100)
    body, _ = app._request(DESCRIBE, gzip.compress(inflated), "application/json", reservation)
    assert body == inflated
    assert (reservation.size, app.budget.held) == (len(inflated), len(inflated))
    reservation.release()
    assert app.budget.held == 0


def test_a_gzip_body_inflated_is_held_once_as_its_reservation_counts() -> None:
    """What inflating holds at its most is what the call reserved (the bytes
    sent and the inflated body, with a step's room and a growing buffer's
    slack): the inflated body was copied whole once inflated, held twice for
    a moment beyond what the budget counted."""
    app = _app(64 * 1024 * 1024)
    inflated = b"{" + b" " * (4 * 1024 * 1024) + REST
    sent = gzip.compress(inflated)
    reservation = Reservation(app.budget)
    tracemalloc.start()
    try:
        body = app._gunzip(sent, reservation)
        _, most = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert body == inflated
    assert reservation.size == len(sent) + len(inflated)
    slack = len(inflated) // 8 + 256 * 1024
    assert most <= reservation.size + slack, (most, reservation.size)
    reservation.release()
