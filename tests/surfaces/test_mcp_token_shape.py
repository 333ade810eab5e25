"""A member token that no token can be (a copied quote mark, a non-ASCII
letter, a control character in it) is the caller's to fix: the MCP server
answers UNAUTHENTICATED saying so and sends nothing, not INTERNAL ("retry
later, and report it") from the gRPC library refusing it as call metadata."""

from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest

from tests.surfaces.mcp_server import stdio_session

# It starts the MCP server's own process.
pytestmark = pytest.mark.integration

# Nothing listens there: a call that went out would be UNAVAILABLE.
NO_GATEWAY = "127.0.0.1:1"


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize(
    "token",
    ["\u201crct_pasted_with_quotes\u201d", "rct_caf\u00e9", "rct_a\x01b"],
    ids=["smart-quotes", "non-ascii", "control"],
)
def test_a_token_no_token_can_be_is_unauthenticated_not_internal(token: str) -> None:
    async def run() -> None:
        async with stdio_session(NO_GATEWAY, token) as s:
            result = await s.call_tool("recall", {"query": "anything"})
            said = json.loads(_text(result))
            assert result.is_error
            assert said.startswith("UNAUTHENTICATED"), said
            assert "printable ASCII" in said
            # The token itself is not echoed back.
            assert token not in said

    anyio.run(run)
