"""The HTTP server's fallback member (RECALLATRON_TOKEN) serves only a request
that brings no credentials: one whose Authorization header the server cannot
use (another scheme, a bearer with no token) is refused, never served as the
fallback member (docs/agents.md, "Over streamable HTTP")."""

from __future__ import annotations

import json

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import http_server

pytestmark = pytest.mark.integration


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _recall(url: str, headers: dict[str, str]) -> types.CallToolResult:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        return await s.call_tool("recall", {"query": "Ada's salary review", "mode": "lexical"})


def test_an_unusable_authorization_header_is_refused_not_served_as_the_fallback_member(
    stack: Stack, team: Team
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    # Ada's own: only she may read it.
    secret = ada.remember("Ada's salary review", "Ada's salary review is on Friday").memory

    async def run(url: str) -> None:
        # No header at all: the fallback member, as documented.
        alone = await _recall(url, {})
        assert not alone.is_error, _text(alone)
        assert secret.id in [r["id"] for r in json.loads(_text(alone))["results"]]
        for header in (f"Token {bob.token}", f"Basic {bob.token}", "Bearer"):
            result = await _recall(url, {"Authorization": header})
            said = _text(result)
            assert result.is_error, f"{header.split()[0]!r} was served as the fallback member"
            assert secret.id not in said
            assert json.loads(said).startswith("UNAUTHENTICATED"), said
            assert "Authorization" in said
        # Bob's token as a bearer still acts for Bob.
        his = await _recall(url, {"Authorization": f"Bearer {bob.token}"})
        assert not his.is_error, _text(his)
        assert secret.id not in _text(his)

    with http_server(stack.gateway, ada.token) as url:
        anyio.run(run, url)
