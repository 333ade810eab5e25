"""An audience given as a word (the MCP tools' `audience`, the CLI's
`--audience`) is 'workspace' or a member id, as the schema and the help say.
Another word ("everyone", "Workspace", "team") was sent as a member id and
refused "audience.member_id: must be a UUID" (over MCP "audience: must be a
UUID"), which tells the agent to find a UUID when it meant the workspace."""

from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest

from recallatron_cli import main as cli
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import stdio_session

pytestmark = pytest.mark.integration

WORDS = ("everyone", "Workspace", "team")


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_an_audience_that_is_no_word_the_tool_takes_is_refused_saying_which(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    before = ada.list_memories().memories

    async def run() -> None:
        async with stdio_session(stack.gateway, ada.token) as session:
            for word in WORDS:
                args = {"request_id": f"a-{word}", "kind": "note", "title": "A note"}
                refused = await session.call_tool("remember", {**args, "audience": word})
                assert refused.is_error
                told = json.loads(_text(refused))
                assert told.startswith("INVALID_ARGUMENT"), told
                assert f"audience: 'workspace' or a member id, not '{word}'" in told, told

    anyio.run(run)
    assert ada.list_memories().memories == before


def test_the_cli_refuses_such_an_audience_naming_its_flag(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = team.clients["ada"]
    for word in WORDS:
        status = cli.main(
            [
                "remember",
                "A note",
                "--audience",
                word,
                "--gateway",
                stack.gateway,
                "--token",
                ada.token,
            ]
        )
        said = capsys.readouterr().err
        assert status != 0
        assert f"'workspace' or a member id, not '{word}'" in said, said
        assert "--audience" in said, said
