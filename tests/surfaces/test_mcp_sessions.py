"""MCP sessions over streamable HTTP are bounded per client address
(recallatron_mcp/sessions.py): an `initialize` needs no token, so without a
bound one address could open all the SDK's 10,000 sessions and shut every
member out (503 for 30 minutes). The server runs against a gateway address
nobody answers: sessions are opened and pinged, never forwarded."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx2
import pytest

from recallatron_mcp.sessions import SESSIONS_PER_ADDRESS, SETTING, sessions_per_address
from tests.surfaces.mcp_server import http_server
from tests.surfaces.test_mcp_duplicate_ids import ACCEPT, _messages

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "sessions", "version": "0"},
    },
}


@pytest.fixture
def silent_gateway() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def _open(client: httpx2.Client, url: str, headers: dict[str, str]) -> str:
    answer = client.post(url, headers={"Accept": ACCEPT, **headers}, json=INIT)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def _ping(client: httpx2.Client, url: str, session: str, headers: dict[str, str]) -> int:
    answer = client.post(
        url,
        headers={
            "Accept": ACCEPT,
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18",
            **headers,
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
    )
    if answer.status_code == 200:
        assert _messages(answer)[0]["result"] == {}
    return answer.status_code


@pytest.mark.integration
def test_one_address_cannot_hold_every_session(silent_gateway: str) -> None:
    """Its newest session ends the one it used least recently; the sessions
    it keeps using and another address's are untouched. (The local test
    client stands for another address by X-Forwarded-For, which the server
    takes from loopback, as from a proxy on the same host.)"""
    here: dict[str, str] = {}
    elsewhere = {"X-Forwarded-For": "203.0.113.7"}
    with http_server(silent_gateway) as url, httpx2.Client(timeout=30) as client:
        theirs = _open(client, url, elsewhere)
        mine = [_open(client, url, here) for _ in range(SESSIONS_PER_ADDRESS)]
        assert _ping(client, url, mine[0], here) == 200  # now the most recently used
        newest = _open(client, url, here)
        assert _ping(client, url, mine[1], here) == 404, "the address held more sessions"
        for session in (mine[0], mine[2], mine[-1], newest):
            assert _ping(client, url, session, here) == 200
        assert _ping(client, url, theirs, elsewhere) == 200


def test_the_limit_is_a_setting() -> None:
    assert sessions_per_address({}) == SESSIONS_PER_ADDRESS
    assert sessions_per_address({SETTING: " 400 "}) == 400
    for bad in ("0", "-3", "many", "1.5"):
        with pytest.raises(ValueError, match=SETTING):
            sessions_per_address({SETTING: bad})
