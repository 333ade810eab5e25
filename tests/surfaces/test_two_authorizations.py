"""A call carries one Authorization. One with two (two `authorization`
metadata entries over gRPC, two `Authorization:` lines over HTTP/JSON or to
the MCP server's streamable HTTP) was served as whoever the first named, the
second ignored: what a proxy adding its own header beside the client's would
make of two members. Such a call is refused UNAUTHENTICATED (HTTP 401) saying
that only one may be sent, before any work: nothing is written, whichever
tokens they are (two members', one member's twice) and in either order."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import grpc
import httpx2
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2_grpc
from recallatron.v1 import memory_pb2 as mpb
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import ACCEPT, INITIALIZE, http_server

pytestmark = pytest.mark.integration

ONLY_ONE = "only one Authorization may be sent"
REMEMBER = "recallatron.v1.MemoryService/Remember"
DESCRIBE = "recallatron.v1.MemoryService/DescribeTools"


def _pairs(team: Team) -> list[tuple[str, str]]:
    ada, bob = (f"Bearer {team.clients[m].token}" for m in ("ada", "bob"))
    return [(ada, bob), (bob, ada), (ada, ada)]


def _written(team: Team, title: str) -> bool:
    """Whether a memory of this title is listed to Ada or Bob (either's own)."""
    return any(
        m.title == title
        for member in ("ada", "bob")
        for m in team.clients[member].list_memories(page_size=100).memories
    )


@pytest.fixture
def stub(stack: Stack) -> Iterator[gateway_pb2_grpc.MemoryServiceStub]:
    with grpc.insecure_channel(stack.gateway) as channel:
        yield gateway_pb2_grpc.MemoryServiceStub(channel)


def test_two_authorization_entries_over_grpc_are_refused_writing_nothing(
    team: Team, stub: gateway_pb2_grpc.MemoryServiceStub
) -> None:
    for first, second in _pairs(team):
        title = f"two tokens {uuid.uuid4().hex[:8]}"
        metadata = (("authorization", first), ("authorization", second))
        calls: list[Any] = [
            lambda md=metadata, t=title: stub.Remember(
                mpb.RememberRequest(request_id=str(uuid.uuid4()), title=t, kind=cpb.KIND_NOTE),
                metadata=md,
                timeout=30,
            ),
            lambda md=metadata: stub.DescribeTools(
                mpb.DescribeToolsRequest(), metadata=md, timeout=30
            ),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as info:
                call()
            err = info.value
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err.details()
            assert err.details() == f"authorization: {ONLY_ONE}", err.details()
        assert not _written(team, title)
    # One entry is served as before.
    answer = stub.Remember(
        mpb.RememberRequest(request_id=str(uuid.uuid4()), title="one token", kind=cpb.KIND_NOTE),
        metadata=(("authorization", _pairs(team)[0][0]),),
        timeout=30,
    )
    assert answer.memory.title == "one token"


def _post(url: str, method: str, body: dict[str, Any], authorizations: list[str]) -> Any:
    """A POST carrying each of ``authorizations`` as its own header line."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        data = json.dumps(body).encode()
        conn.putrequest("POST", parts.path.rstrip("/") + (f"/{method}" if method else ""))
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Accept", ACCEPT["Accept"])
        conn.putheader("Content-Length", str(len(data)))
        for value in authorizations:
            conn.putheader("Authorization", value)
        conn.endheaders(data)
        resp = conn.getresponse()
        raw = resp.read()
        if resp.getheader("Content-Type", "").startswith("application/json"):
            return resp.status, json.loads(raw)
        return resp.status, raw
    finally:
        conn.close()


def test_two_authorization_lines_over_http_json_are_refused_writing_nothing(
    stack: Stack, team: Team
) -> None:
    for first, second in _pairs(team):
        title = f"two lines {uuid.uuid4().hex[:8]}"
        remember = {"requestId": str(uuid.uuid4()), "title": title, "kind": "KIND_NOTE"}
        for method, body in ((REMEMBER, remember), (DESCRIBE, {})):
            status, answer = _post(stack.http_url, method, body, [first, second])
            assert (status, answer.get("code")) == (401, "unauthenticated"), (method, answer)
            assert answer["message"] == f"authorization: {ONLY_ONE}", answer
        assert not _written(team, title)
    status, answer = _post(stack.http_url, REMEMBER, {**remember, "title": "one line"}, [first])
    assert status == 200 and answer["memory"]["title"] == "one line", answer


def test_two_authorization_lines_to_the_mcp_server_are_refused(stack: Stack, team: Team) -> None:
    """Refused by the MCP server itself, before the SDK reads the request: a
    tool call, or the initialize before it."""
    ada = team.clients["ada"]
    title = f"two to mcp {uuid.uuid4().hex[:8]}"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"title": title}},
    }
    with http_server(stack.gateway, ada.token) as url:
        for first, second in _pairs(team):
            for body in (INITIALIZE, call):
                status, answer = _post(url, "", body, [first, second])
                assert status == 401, answer
                assert answer["error_description"] == f"authorization: {ONLY_ONE}", answer
        assert not _written(team, title)

        async def one() -> int:
            async with httpx2.AsyncClient(timeout=30) as http:
                resp = await http.post(
                    url,
                    json=INITIALIZE,
                    headers={"Authorization": first, **ACCEPT},
                )
                return resp.status_code

        assert anyio.run(one) == 200
