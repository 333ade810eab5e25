"""An agent whose token is scoped to some purposes (docs/agents.md: `--purposes
audit`) calls a tool as its schema allows, without a purpose: the call is made
for assist, the schema's default, and the gateway refuses it naming the
scope. What the agent is told to do next must be what works, calling again
with a purpose of the scope; it was "This member may not do this; ask a
workspace owner.", so an agent gave up on a call it could make."""

from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import stdio_session

pytestmark = pytest.mark.integration


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_a_purpose_outside_the_token_s_scope_is_told_how_to_call_again(
    stack: Stack, team: Team, operator: Client
) -> None:
    ada = team.clients["ada"]
    ada.remember("Audit finding", "The Q3 audit found two issues.", purposes=["audit"])
    scoped = operator.create_token(team.members["ada"], "auditor", purposes=["audit"]).token

    async def run() -> None:
        async with stdio_session(stack.gateway, scoped) as session:
            refused = await session.call_tool("recall", {"query": "audit finding"})
            assert refused.is_error
            told = json.loads(_text(refused))
            assert told.startswith("PERMISSION_DENIED: purpose: token scope is purposes audit")
            assert "This member may not do this" not in told, told
            assert "call again with one of them as purpose" in told, told
            written = await session.call_tool(
                "remember", {"request_id": "r1", "kind": "note", "title": "A note"}
            )
            assert written.is_error
            told = json.loads(_text(written))
            assert "This member may not do this" not in told, told
            assert "call again with one of them as purpose" in told, told
            # Which is what works.
            found = await session.call_tool(
                "recall", {"query": "audit finding", "purpose": "audit"}
            )
            assert not found.is_error, _text(found)
            assert [r["title"] for r in json.loads(_text(found))["results"]] == ["Audit finding"]

    anyio.run(run)
