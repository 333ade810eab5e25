"""The MCP server against the real stack, driven by the MCP SDK's own client:
over stdio (a spawned `python -m recallatron_mcp`, the member's token in its
environment) and over streamable HTTP (the token in the Authorization header).
The stdio session is written out as a transcript under test-artifacts/."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from recallatron.grpcclient import HINTS
from recallatron.tools import TOOLS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import REPO, http_server, stdio_session

pytestmark = pytest.mark.integration

ARTIFACTS = REPO / "test-artifacts"
SEVEN = {"recall", "read", "remember", "derive", "correct", "supersede", "forget"}
LISTED = SEVEN | {"lookup", "neighbors", "timeline", "list_memories", "audit_log"}


class Transcript:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, direction: str, what: str, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload, indent=1)
        self.lines.append(f"{direction} {what}\n{text}\n")

    def save(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        path.write_text("\n".join(self.lines))
        return path


def _payload(result: types.CallToolResult) -> Any:
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return json.loads(text)


async def _call(
    session: ClientSession, log: Transcript, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    log.add("->", f"tools/call {name}", arguments)
    result = await session.call_tool(name, arguments)
    log.add("<-", f"{name} (is_error={result.is_error})", _payload(result))
    return result


def test_mcp_stdio_session(stack: Stack, team: Team) -> None:
    token = team.clients["ada"].token
    log = Transcript()

    async def run() -> None:
        async with stdio_session(stack.gateway, token) as s:
            listed = (await s.list_tools()).tools
            log.add("<-", "tools/list", [t.name for t in listed])
            assert {t.name for t in listed} == LISTED and len(listed) == 12
            by_name = {t.name: t for t in TOOLS}
            for tool in listed:
                # One source for names, descriptions and schemas.
                assert tool.description == by_name[tool.name].description
                assert tool.input_schema == by_name[tool.name].input_schema
                hints = tool.annotations
                assert hints is not None and hints.open_world_hint is False
                assert hints.read_only_hint is by_name[tool.name].read_only
                assert hints.destructive_hint is by_name[tool.name].destructive
                assert hints.idempotent_hint is True
            recall_text = next(t.description for t in listed if t.name == "recall")
            assert "nearest rows, not the relevant ones" in recall_text
            assert "dated claim" in recall_text and "provenance" in recall_text

            made = await _call(
                s,
                log,
                "remember",
                {
                    "request_id": str(uuid.uuid4()),
                    "kind": "decision",
                    "title": "Quarterly planning moves to the first Monday",
                    "body": "Planning for each quarter happens on its first Monday, 10:00.",
                    "audience": "workspace",
                    "mentions": [{"name": "quarterly planning"}],
                },
            )
            assert not made.is_error
            memory = _payload(made)["memory"]
            assert made.structured_content["memory"]["id"] == memory["id"]
            assert memory["origin"] == "told" and memory["revision"] == 1

            found = await _call(
                s, log, "recall", {"query": "when is quarterly planning", "limit": 5}
            )
            assert not found.is_error
            answer = _payload(found)
            assert memory["id"] in [r["id"] for r in answer["results"]]
            assert {"dense_available", "reranked", "counts"} <= answer.keys()

            read = await _call(s, log, "read", {"ids": [memory["id"]]})
            assert _payload(read)["memories"][0]["mentions"][0]["name"] == ("quarterly planning")

            fixed = await _call(
                s,
                log,
                "correct",
                {
                    "request_id": str(uuid.uuid4()),
                    "id": memory["id"],
                    "expected_revision": 1,
                    "body": "Planning for each quarter happens on its first Monday, 9:30.",
                    "reason": "time changed",
                },
            )
            assert _payload(fixed)["memory"]["revision"] == 2

            stale = await _call(
                s,
                log,
                "correct",
                {
                    "request_id": str(uuid.uuid4()),
                    "id": memory["id"],
                    "expected_revision": 1,
                    "title": "Planning on Tuesdays",
                    "reason": "stale edit",
                },
            )
            assert stale.is_error
            message = _payload(stale)
            assert message.startswith("ABORTED: expected_revision")
            assert "at revision 2" in message and "expected_revision 2" in message
            assert "Read it again" in message

            bad = await _call(
                s, log, "remember", {"request_id": "x", "kind": "opinion", "title": "t"}
            )
            assert bad.is_error and "INVALID_ARGUMENT" in _payload(bad)
            assert "kind" in _payload(bad)

            missing = await _call(s, log, "read", {"ids": [str(uuid.uuid4())]})
            assert missing.is_error and _payload(missing).startswith("NOT_FOUND")
            # What to do is the shared relay's advice, word for word.
            assert _payload(missing).endswith(HINTS[grpc.StatusCode.NOT_FOUND])

            server_side = await _call(
                s,
                log,
                "correct",
                {
                    "request_id": str(uuid.uuid4()),
                    "id": memory["id"],
                    "expected_revision": 2,
                    "title": "",
                    "reason": "blank title",
                },
            )
            assert server_side.is_error
            assert _payload(server_side).startswith("INVALID_ARGUMENT: title")

    anyio.run(run)
    log.save("mcp-stdio-transcript.txt")


def test_mcp_graph_session(stack: Stack, team: Team) -> None:
    """remember with claims, lookup, neighbors, forget, lookup again, through
    the SDK's own client over stdio; the transcript is kept."""
    token = team.clients["ada"].token
    log = Transcript()

    async def run() -> None:
        async with stdio_session(stack.gateway, token) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            for name in ("lookup", "neighbors"):
                assert "dated statement made by one memory" in listed[name].description
                assert listed[name].annotations.read_only_hint is True  # type: ignore[union-attr]
            made = await _call(
                s,
                log,
                "remember",
                {
                    "request_id": str(uuid.uuid4()),
                    "kind": "fact",
                    "title": "Robin Goodwin leads Apollo",
                    "body": "Robin Goodwin has led the Apollo project from Lisbon since May.",
                    "audience": "workspace",
                    "claims": [
                        {
                            "entity": {"name": "Robin Goodwin", "type": "person"},
                            "attribute": "city",
                            "value": "Lisbon",
                            "valid_from": "2026-05-01T00:00:00Z",
                        }
                    ],
                    "relations": [
                        {
                            "subject": {"name": "Robin Goodwin"},
                            "predicate": "leads",
                            "object": {"name": "Apollo", "type": "project"},
                        }
                    ],
                    "aliases": [{"entity": {"name": "Robin Goodwin"}, "alias": "Robin"}],
                },
            )
            assert not made.is_error, _payload(made)
            memory = _payload(made)["memory"]
            assert [c["value"] for c in memory["claims"]] == ["Lisbon"]

            found = await _call(s, log, "lookup", {"name": "robin"})
            cards = _payload(found)["entities"]
            assert len(cards) == 1 and cards[0]["name"] == "Robin Goodwin"
            card = cards[0]
            assert card["type"] == "person" and card["aliases"] == ["Robin"]
            assert card["attributes"][0]["memory_id"] == memory["id"]
            assert card["relations"][0]["other"]["name"] == "Apollo"

            near = await _call(s, log, "neighbors", {"entity_id": card["id"], "hops": 2})
            walked = _payload(near)
            assert [n["name"] for n in walked["nodes"]] == ["Robin Goodwin", "Apollo"]
            assert walked["edges"][0]["predicate"] == "leads"

            bad = await _call(s, log, "neighbors", {"entity_id": card["id"], "hops": 9})
            assert bad.is_error and "INVALID_ARGUMENT" in _payload(bad)

            gone = await _call(
                s,
                log,
                "forget",
                {"request_id": str(uuid.uuid4()), "id": memory["id"], "reason": "asked"},
            )
            assert not gone.is_error
            again = await _call(s, log, "lookup", {"name": "Robin Goodwin"})
            assert _payload(again)["entities"] == []
            walk = await _call(s, log, "neighbors", {"entity_id": card["id"]})
            assert walk.is_error and _payload(walk).startswith("NOT_FOUND: entity_id")

    anyio.run(run)
    log.save("mcp-graph-transcript.txt")


def test_mcp_streamable_http_with_bearer_token(stack: Stack, team: Team) -> None:
    bob = team.clients["bob"]
    mine = bob.remember("Bob keeps the on-call rota in the wiki", audience_to="workspace").memory

    async def run(url: str) -> None:
        headers = {"Authorization": f"Bearer {bob.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            assert {t.name for t in (await s.list_tools()).tools} == LISTED
            result = await s.call_tool("recall", {"query": "on-call rota", "mode": "lexical"})
            assert not result.is_error
            assert mine.id in [r["id"] for r in _payload(result)["results"]]
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            anonymous = await s.call_tool("recall", {"query": "on-call rota"})
            assert anonymous.is_error and _payload(anonymous).startswith("UNAUTHENTICATED")
            assert _payload(anonymous).endswith(HINTS[grpc.StatusCode.UNAUTHENTICATED])

    # No default member: the token travels with each request.
    with http_server(stack.gateway) as url:
        anyio.run(run, url)
