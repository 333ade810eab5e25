"""Typed MCP outputs against the real stack: every listed tool has a title and
an output schema (the catalogue's), and every tool's structured result, called
through the SDK's own client over stdio, conforms to its output schema and is
the JSON of its text content. A linked memory the reader may not see shows no
title or kind."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession

from recallatron.tools import BY_NAME, TOOLS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.mcp_server import stdio_session

pytestmark = pytest.mark.integration


class Checked:
    """One session's calls, each structured result checked against the tool's
    listed output schema."""

    def __init__(self, session: ClientSession, listed: dict[str, types.Tool]) -> None:
        self.session = session
        self.validators = {
            name: jsonschema.Draft202012Validator(tool.output_schema or {})
            for name, tool in listed.items()
        }
        self.called: set[str] = set()

    async def __call__(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.session.call_tool(name, arguments)
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        assert not result.is_error, (name, text)
        structured = result.structured_content
        assert isinstance(structured, dict) and structured == json.loads(text), name
        problems = [e.message for e in self.validators[name].iter_errors(structured)]
        assert problems == [], (name, problems[:3])
        self.called.add(name)
        return structured


def test_every_tool_answers_as_its_output_schema_says(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    # Bob may see the note but not what it is about (that one is audit-only).
    secret = ada.remember("Salary bands draft", audience_to="workspace", purposes=["audit"])
    note = ada.remember(
        "About the bands", audience_to="workspace", about=[secret.memory.id], purpose="audit"
    ).memory

    async def as_ada() -> set[str]:
        async with stdio_session(stack.gateway, ada.token) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert list(listed) == [t.name for t in TOOLS]
            for name, tool in listed.items():
                assert tool.title and tool.title == BY_NAME[name].title, name
                assert tool.output_schema == BY_NAME[name].output_schema, name
                assert tool.output_schema["type"] == "object"
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            call = Checked(s, listed)

            def rid() -> str:
                return str(uuid.uuid4())

            made = await call(
                "remember",
                {
                    "request_id": rid(),
                    "kind": "fact",
                    "title": "Robin Goodwin leads Apollo",
                    "body": "Robin Goodwin has led the Apollo project from Lisbon since May.",
                    "audience": "workspace",
                    "purposes": ["assist", "audit"],
                    "mentions": [{"name": "Lisbon", "type": "city"}],
                    "claims": [
                        {
                            "entity": {"name": "Robin Goodwin", "type": "person"},
                            "attribute": "city",
                            "value": "Lisbon",
                            "valid_from": "2026-05-01T00:00:00Z",
                            "confidence": 0.9,
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
            first = made["memory"]
            assert first["audience"] == "workspace" and first["kind"] == "fact"
            assert first["purposes"] == ["assist", "audit"] and made["replayed"] is False
            assert first["claims"][0]["valid_from"] == "2026-05-01T00:00:00Z"
            other = (
                await call(
                    "remember",
                    {
                        "request_id": rid(),
                        "kind": "note",
                        "title": "Apollo ships in June",
                        "audience": "workspace",
                        "about": [first["id"]],
                    },
                )
            )["memory"]

            found = await call("recall", {"query": "Apollo", "mode": "lexical", "limit": 5})
            assert {first["id"], other["id"]} <= {r["id"] for r in found["results"]}
            assert found["mode"] == "lexical" and "lexical_rank" in found["results"][0]["scores"]

            read = await call("read", {"ids": [other["id"]]})
            link = read["memories"][0]["links"][0]
            assert link["kind"] == "about" and link["target"]["title"] == first["title"]

            derived = (
                await call(
                    "derive",
                    {
                        "request_id": rid(),
                        "sources": [first["id"], other["id"]],
                        "kind": "summary",
                        "title": "Apollo: Robin leads it, ships in June",
                    },
                )
            )["memory"]
            assert derived["origin"] == "derived"
            assert {x["kind"] for x in derived["links"]} == {"derived_from"}

            fixed = await call(
                "correct",
                {
                    "request_id": rid(),
                    "id": other["id"],
                    "expected_revision": 1,
                    "body": "Planned for the second week of June.",
                    "reason": "date known",
                },
            )
            assert fixed["memory"]["revision"] == 2

            replaced = await call(
                "supersede",
                {
                    "request_id": rid(),
                    "id": other["id"],
                    "expected_revision": 2,
                    "kind": "note",
                    "title": "Apollo ships in July",
                    "reason": "slipped",
                },
            )
            assert replaced["superseded"]["superseded_by_id"] == replaced["memory"]["id"]

            cards = (await call("lookup", {"name": "robin"}))["entities"]
            assert [c["name"] for c in cards] == ["Robin Goodwin"]
            robin = cards[0]
            assert robin["relations"][0]["direction"] == "outgoing"

            walked = await call("neighbors", {"entity_id": robin["id"], "hops": 2})
            assert [n["name"] for n in walked["nodes"]] == ["Robin Goodwin", "Apollo"]

            events = await call("timeline", {"entity_id": robin["id"]})
            assert first["id"] in {e["memory_id"] for e in events["events"]}

            gone = await call(
                "forget", {"request_id": rid(), "id": derived["id"], "reason": "not needed"}
            )
            assert gone["id"] == derived["id"] and gone["forgotten_at"]

            listed = await call("list_memories", {"page_size": 1})
            assert [m["id"] for m in listed["memories"]] == [replaced["memory"]["id"]]
            audited = await call("audit_log", {"actions": ["forget"]})
            assert [e["memory_id"] for e in audited["events"]] == [derived["id"]]
            return call.called

    async def as_bob() -> dict[str, Any]:
        async with stdio_session(stack.gateway, bob.token) as s:
            call = Checked(s, {t.name: t for t in (await s.list_tools()).tools})
            return await call("read", {"ids": [note.id]})

    assert anyio.run(as_ada) == set(BY_NAME)
    hidden = anyio.run(as_bob)["memories"][0]["links"][0]
    assert hidden["kind"] == "about"
    assert hidden["target"] == {"id": "", "visible": False}
