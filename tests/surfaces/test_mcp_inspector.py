"""The MCP server as a third-party client sees it: the MCP Inspector's CLI
(`mcp-inspector --cli`, installed by `make test` under .tools/) lists and calls
the tools over stdio and over streamable HTTP. Its tools/list output is kept
under test-artifacts/."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest

from recallatron.tools import TOOLS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import REPO, http_server

pytestmark = pytest.mark.integration

INSPECTOR = REPO / ".tools" / "node_modules" / ".bin" / "mcp-inspector"
ARTIFACTS = REPO / "test-artifacts"


def inspect(target: list[str], *args: str, env: dict[str, str] | None = None) -> Any:
    assert INSPECTOR.exists(), f"{INSPECTOR} is missing: `make test` installs it"
    done = subprocess.run(
        [str(INSPECTOR), "--cli", *target, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def stdio(stack: Stack, token: str) -> list[str]:
    return [
        "-e",
        f"RECALLATRON_TOKEN={token}",
        "-e",
        f"RECALLATRON_GATEWAY={stack.gateway}",
        sys.executable,
        "-m",
        "recallatron_mcp",
        "--transport",
        "stdio",
    ]


def test_inspector_lists_and_calls_the_tools_over_stdio(stack: Stack, team: Team) -> None:
    target = stdio(stack, team.clients["ada"].token)
    listed = inspect(target, "--method", "tools/list")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "mcp-inspector-tools-list.json").write_text(json.dumps(listed, indent=1))
    by_name = {t.name: t for t in TOOLS}
    assert [t["name"] for t in listed["tools"]] == list(by_name)
    for tool in listed["tools"]:
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is by_name[tool["name"]].read_only
        assert hints["destructiveHint"] is by_name[tool["name"]].destructive
        assert hints["openWorldHint"] is False
        assert tool["inputSchema"] == by_name[tool["name"]].input_schema
    word = f"inspected{uuid.uuid4().hex[:8]}"
    made = inspect(
        target,
        "--method",
        "tools/call",
        "--tool-name",
        "remember",
        "--tool-arg",
        f"request_id={uuid.uuid4()}",
        "kind=fact",
        f"title=The {word} release ships on Monday",
        "audience=workspace",
    )
    assert made.get("isError") is not True, made
    memory = made["structuredContent"]["memory"]
    found = inspect(
        target, "--method", "tools/call", "--tool-name", "recall", "--tool-arg", f"query={word}"
    )
    assert memory["id"] in [r["id"] for r in found["structuredContent"]["results"]]
    bad = inspect(target, "--method", "tools/call", "--tool-name", "lookup", "--tool-arg", "nam=x")
    assert bad["isError"] is True
    assert "INVALID_ARGUMENT" in bad["content"][0]["text"]


def test_inspector_lists_the_tools_over_streamable_http(stack: Stack, team: Team) -> None:
    with http_server(stack.gateway, team.clients["bob"].token) as url:
        listed = inspect([url, "--transport", "http"], "--method", "tools/list")
        assert [t["name"] for t in listed["tools"]] == [t.name for t in TOOLS]
        card = inspect(
            [url, "--transport", "http"],
            "--method",
            "tools/call",
            "--tool-name",
            "lookup",
            "--tool-arg",
            "name=nobody by this name",
        )
        assert card["structuredContent"] == {"entities": [], "next_page_token": None}
