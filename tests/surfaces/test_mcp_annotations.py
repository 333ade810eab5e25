"""The MCP server's tools/list and instructions, in process (no stack, no
gateway call): every tool annotated, the annotations those of the catalogue,
and instructions that add to the tool descriptions rather than repeat them."""

from __future__ import annotations

import anyio
from mcp import Client

from recallatron.tools import TOOLS
from recallatron_mcp.server import INSTRUCTIONS, Clients, build_server

READ_ONLY = {"recall", "read", "lookup", "neighbors", "timeline", "list_memories", "audit_log"}
DESTRUCTIVE = {"correct", "forget"}


def listed() -> tuple[list[dict[str, object]], str | None]:
    async def run() -> tuple[list[dict[str, object]], str | None]:
        server = build_server(Clients("127.0.0.1:1", ""))
        async with Client(server, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            dumped = [t.model_dump(by_alias=True, exclude_none=True) for t in tools]
            return dumped, client.instructions

    return anyio.run(run)


def test_every_tool_carries_all_four_annotations() -> None:
    tools, _ = listed()
    assert [t["name"] for t in tools] == [t.name for t in TOOLS]
    for tool in tools:
        name = tool["name"]
        assert tool["annotations"] == {
            "readOnlyHint": name in READ_ONLY,
            "destructiveHint": name in DESTRUCTIVE,
            "idempotentHint": True,
            "openWorldHint": False,
        }, name


def test_instructions_add_to_the_descriptions() -> None:
    _, instructions = listed()
    assert instructions == INSTRUCTIONS
    assert "Call recall before you say you have no context" in INSTRUCTIONS
    assert "plainly told you" in INSTRUCTIONS
    # Not a repeat of any description: no sentence of one appears in them.
    for tool in TOOLS:
        for sentence in tool.description.split(". "):
            if len(sentence) > 30:
                assert sentence not in INSTRUCTIONS, (tool.name, sentence)


def test_the_agents_guide_gives_every_tools_annotations() -> None:
    """docs/agents.md says every tool carries annotations and tabulates them:
    each listed tool in one row, with the values the server lists."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    header = "| tool | `readOnlyHint` | `destructiveHint` | `idempotentHint` | `openWorldHint` |"
    table = guide.split(header, 1)[1].split("\n\n", 1)[0]
    rows: dict[str, tuple[bool, ...]] = {}
    for line in table.strip().splitlines()[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        hints = tuple(c.split()[0] == "true" for c in cells[1:])
        for name in cells[0].replace("`", "").split(", "):
            rows[name] = hints
    tools, _ = listed()
    assert set(rows) == {t["name"] for t in tools}
    for tool in tools:
        a = tool["annotations"]
        assert isinstance(a, dict)
        said = (a["readOnlyHint"], a["destructiveHint"], a["idempotentHint"], a["openWorldHint"])
        assert rows[str(tool["name"])] == said, tool["name"]


def test_the_agents_guide_names_every_read_only_tool_for_the_read_scope() -> None:
    """docs/agents.md's OAuth scope table says which tools `recallatron:read`
    grants: exactly the catalogue's read-only tools (the gateway's read-only
    calls), in the catalogue's order."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    row = next(line for line in guide.splitlines() if line.startswith("| `recallatron:read` |"))
    said = row.split("(", 1)[1].split(")", 1)[0].replace("`", "").split(", ")
    assert said == [t.name for t in TOOLS if t.read_only], row
