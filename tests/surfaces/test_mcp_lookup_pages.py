"""A lookup whose cards pass the answer's budget goes on with its
next_page_token (docs/api.md, "Limits"): over MCP that token must fit the
lookup tool's own page_token schema. It held the name looked up, as JSON
escapes it (six characters for one CJK character, more once folded), and the
ids answered before, so a long name's token ran past the schema's 1,000
characters and the agent could not ask for the next page ("is too long")."""

from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest

from recallatron.client import Client
from recallatron.tools import TOOLS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import stdio_session

pytestmark = pytest.mark.integration

NAME = "名" * 150
# Three cards of 200 attributes of 2,000 four-byte characters: 1.6 MB each,
# two of them fit the 4 MiB answer.
CARDS, PARTS = 3, 2


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _big_entities(ada: Client) -> set[str]:
    made = set()
    for _ in range(CARDS):
        entity: dict[str, str] = {"name": NAME}
        for part in range(PARTS):
            claims = [
                {"entity": entity, "attribute": f"a{part}_{i}", "value": "\U0001f600" * 2000}
                for i in range(100)
            ]
            memory = ada.remember(
                f"Card part {part}", kind="fact", audience_to="workspace", claims=claims
            ).memory
            entity = {"entity_id": memory.claims[0].entity.id}
        made.add(entity["entity_id"])
    return made


def test_a_lookup_goes_on_to_its_next_page_over_mcp(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    made = _big_entities(ada)
    [lookup] = [t for t in TOOLS if t.name == "lookup"]
    limit = lookup.input_schema["properties"]["page_token"]["maxLength"]

    async def run() -> None:
        async with stdio_session(stack.gateway, ada.token) as session:
            seen: list[str] = []
            args: dict[str, str] = {"name": NAME}
            for _ in range(CARDS):
                page = await session.call_tool("lookup", args)
                assert not page.is_error, _text(page)[:300]
                answer = json.loads(_text(page))
                seen += [card["id"] for card in answer["entities"]]
                token = answer["next_page_token"]
                if not token:
                    break
                assert len(token) <= limit, (len(token), limit)
                args = {"name": NAME, "page_token": token}
            assert sorted(seen) == sorted(made), seen

    anyio.run(run)
