"""The HTTP/JSON app's own answers, as ASGI events, without a stack
(services/gateway/httpjson/app.py): whatever it refuses, it refuses with a
Connect error body, and a call's deadline is a positive count of
milliseconds, as the Connect protocol has it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from recallatron.settings import CommonSettings
from recallatron.v1 import gateway_pb2
from services.gateway.httpjson.app import HttpJsonApp

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name[n]
    for n in ("MemoryService", "ReviewService", "AdminService")
]
DESCRIBE = "/recallatron.v1.MemoryService/DescribeTools"


class _Open:
    """Admits every caller (the token's check is tests/unit/test_http_admission.py's)."""

    def admit(
        self, method: str, authorization: str | None, peer: str
    ) -> tuple[tuple[str, str], ...]:
        return ()


def _answer(
    method: str, path: str, headers: tuple[tuple[bytes, bytes], ...] = (), body: bytes = b"{}"
) -> tuple[int, dict[str, Any], dict[bytes, bytes]]:
    """The status, JSON body and headers the app answers with, its lifespan
    started first (the relay to a gateway that is not there: nothing here
    reaches it)."""
    app = HttpJsonApp("127.0.0.1:1", CommonSettings(), SERVICES, _Open())
    sent: list[MutableMapping[str, Any]] = []
    startup: list[dict[str, Any]] = [{"type": "lifespan.startup"}]

    async def lifespan_receive() -> dict[str, Any]:
        if startup:
            return startup.pop()
        await asyncio.sleep(3600)
        return {}

    async def lifespan_send(event: MutableMapping[str, Any]) -> None:
        assert event["type"] == "lifespan.startup.complete", event

    given = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if given:
            return given.pop()
        await asyncio.sleep(3600)
        return {}

    async def send(event: MutableMapping[str, Any]) -> None:
        sent.append(event)

    async def run() -> None:
        life = asyncio.create_task(app({"type": "lifespan"}, lifespan_receive, lifespan_send))
        await asyncio.sleep(0)
        scope = {
            "type": "http",
            "method": method,
            "path": path,
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json"), *headers],
            "client": ("192.0.2.7", 4000),
        }
        await asyncio.wait_for(app(scope, receive, send), 30)
        life.cancel()

    asyncio.run(run())
    start, body_event = sent[0], sent[-1]
    answer = json.loads(body_event["body"]) if body_event.get("body") else {}
    return start["status"], answer, dict(start["headers"])


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/recallatron.v1.MemoryService/NoSuchMethod"), ("GET", "/"), ("POST", "/x/y/z")],
)
def test_an_unknown_path_is_a_connect_error_naming_it(method: str, path: str) -> None:
    status, answer, headers = _answer(method, path)
    assert status == 404
    assert headers[b"content-type"] == b"application/json"
    assert answer.get("code") == "unimplemented", answer
    assert path in answer["message"]


def test_a_method_that_is_not_post_is_a_connect_error() -> None:
    status, answer, headers = _answer("GET", DESCRIBE)
    assert (status, headers.get(b"allow")) == (405, b"POST")
    assert answer.get("code") == "unimplemented", answer
    assert "POST" in answer["message"]


@pytest.mark.parametrize("value", ["0", "0000000000", "-5", "abc", "12345678901", "1.5", " "])
def test_a_timeout_that_is_no_positive_count_is_refused_naming_the_header(value: str) -> None:
    status, answer, _ = _answer("POST", DESCRIBE, ((b"connect-timeout-ms", value.encode()),))
    assert (status, answer.get("code")) == (400, "invalid_argument"), (value, answer)
    assert answer["message"].startswith("connect-timeout-ms:")


@pytest.mark.parametrize(
    "given",
    [
        ((b"connect-timeout-ms", b"-5"), (b"connect-timeout-ms", b"5000")),
        ((b"connect-timeout-ms", b"0"), (b"Connect-Timeout-Ms", b"5000")),
        ((b"content-type", b"application/json"),),
        ((b"content-encoding", b"identity"), (b"content-encoding", b"identity")),
    ],
)
def test_a_header_of_the_call_given_twice_is_refused_naming_it(
    given: tuple[tuple[bytes, bytes], ...],
) -> None:
    """The check read a repeated header's last value and the library its
    first: a timeout of -5 given before one of 5000 passed the check and ran
    the call with no time left."""
    status, answer, _ = _answer("POST", DESCRIBE, given)
    name = given[0][0].decode()
    assert (status, answer.get("code")) == (400, "invalid_argument"), answer
    assert answer["message"].startswith(f"{name}:"), answer


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_openapi_document_is_read_with_get_or_head(method: str) -> None:
    status, answer, _ = _answer(method, "/openapi.json")
    assert status == 200
    assert answer["openapi"].startswith("3.1")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_another_method_to_the_openapi_document_is_a_connect_error(method: str) -> None:
    """Any method was answered the document."""
    status, answer, headers = _answer(method, "/openapi.json")
    assert (status, headers.get(b"allow")) == (405, b"GET, HEAD")
    assert headers[b"content-type"] == b"application/json"
    assert answer.get("code") == "unimplemented", answer
    assert method in answer["message"] and "GET" in answer["message"]
