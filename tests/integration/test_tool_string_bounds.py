"""The tools' JSON schemas (DescribeTools, MCP's inputSchema) bound each
string argument as the servers do: one the gateway refuses empty has
"minLength": 1, one it refuses past a length has that "maxLength". Checked
against the real refusals, for every string argument of every tool (nested
ones too), so that schema and server cannot drift: an agent whose arguments
pass the schema does not meet INVALID_ARGUMENT naming one of them."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import jsonschema
import pytest

from recallatron.client import Client
from recallatron.grpcclient import peer_status
from recallatron.tools import TOOLS, Tool
from recallatron_mcp.tools import as_arguments
from tests.conftest import Team

pytestmark = pytest.mark.integration

Path_ = tuple[str | int, ...]


def good_arguments(memory_id: str, revision: int, entity_id: str) -> dict[str, dict[str, Any]]:
    """A call of each tool the server takes, holding every nested string."""

    def rid() -> str:
        return f"r-{uuid.uuid4().hex}"

    graph = {
        "mentions": [{"name": "Heron"}],
        "claims": [{"entity": {"name": "Heron"}, "attribute": "colour", "value": "grey"}],
        "relations": [
            {"subject": {"name": "Heron"}, "predicate": "eats", "object": {"name": "Fish"}}
        ],
        "aliases": [{"entity": {"name": "Heron"}, "alias": "grey bird"}],
    }
    write = {"id": memory_id, "expected_revision": revision}
    return {
        "recall": {"query": "heron", "mentions": [entity_id]},
        "read": {"ids": [memory_id]},
        "remember": {
            "request_id": rid(),
            "kind": "note",
            "title": "t",
            "body": "b",
            "about": [memory_id],
            "audience": "workspace",
            **graph,
        },
        "derive": {
            "request_id": rid(),
            "sources": [memory_id],
            "kind": "summary",
            "title": "t",
            "audience": "workspace",
        },
        "correct": {"request_id": rid(), **write, "title": "t", "reason": "typo", **graph},
        "supersede": {
            "request_id": rid(),
            **write,
            "kind": "fact",
            "title": "t",
            "reason": "changed",
            "audience": "workspace",
            **graph,
        },
        "forget": {"request_id": rid(), "id": memory_id, "reason": "asked"},
        "lookup": {"name": "Heron"},
        "neighbors": {"entity_id": entity_id, "predicates": ["eats"]},
        "timeline": {},  # entity_id or episode_id, not both: each tried alone
        "list_memories": {},
        "audit_log": {"actions": ["forget"]},
    }


def string_paths(schema: dict[str, Any], value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Each string argument: every top-level one, and the nested ones the
    good call holds (a time is bounded by its format, an enum by its names)."""
    kind = schema.get("type")
    if kind == "string":
        if "enum" not in schema and schema.get("format") != "date-time":
            yield path
    elif kind == "object":
        for name, inner in schema.get("properties", {}).items():
            if path and (not isinstance(value, dict) or name not in value):
                continue
            given = value.get(name) if isinstance(value, dict) else None
            yield from string_paths(inner, given, (*path, name))
    elif kind == "array" and isinstance(value, list) and value:
        yield from string_paths(schema.get("items", {}), value[0], (*path, 0))


def schema_at(schema: dict[str, Any], path: Path_) -> dict[str, Any]:
    for step in path:
        schema = schema["items"] if isinstance(step, int) else schema["properties"][step]
    return schema


def with_value(arguments: dict[str, Any], path: Path_, value: str) -> dict[str, Any]:
    out = copy.deepcopy(arguments)
    where: Any = out
    for step in path[:-1]:
        where = where[step]
    if isinstance(path[-1], int):
        where[path[-1]] = value
    else:
        where[path[-1]] = value
    return out


def named(path: Path_) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def server_refuses(
    client: Client, tool: Tool, arguments: dict[str, Any], argument: str, saying: str = ""
) -> bool:
    """Whether the gateway refuses the call INVALID_ARGUMENT naming ``argument``
    or the object holding it (an empty name of a mention is no choice of
    entity: `mentions[0]: give an entity_id or a name`), saying ``saying``.
    A value the arguments' conversion refuses before sending (an audience
    that is neither 'workspace' nor a member id) is refused as an agent's
    call is, by the same "argument: why"."""
    try:
        request = tool.request_of(arguments)
    except ValueError as exc:
        s, _, why = str(exc).partition(": ")
        return (argument == s or argument.startswith((f"{s}.", f"{s}["))) and saying in why
    try:
        client.call(getattr(client.memory, tool.method), request)
    except grpc.RpcError as exc:
        status = as_arguments(peer_status(exc), tool)
        if status.code != grpc.StatusCode.INVALID_ARGUMENT:
            return False
        said = [s.partition(": ") for s in (status.message, *status.fields)]
        return any(
            (argument == s or argument.startswith((f"{s}.", f"{s}["))) and saying in why
            for s, _, why in said
        )
    return False


def schema_refuses(tool: Tool, arguments: dict[str, Any]) -> bool:
    return any(jsonschema.Draft202012Validator(tool.input_schema).iter_errors(arguments))


def test_every_string_argument_is_bounded_in_the_schema_as_the_server_bounds_it(
    team: Team,
) -> None:
    """Before, a required string ("title", "reason", "query", ...) was
    refused empty by the server (INVALID_ARGUMENT naming it) while its schema
    took "" (no minLength)."""
    ada = team.clients["ada"]
    made = ada.remember(
        "Heron", "The heron is grey.", audience_to="workspace", mention_names=["Heron"]
    ).memory
    good = good_arguments(made.id, made.revision, made.mentions[0].entity_id)
    assert set(good) == {t.name for t in TOOLS}
    drift: list[str] = []
    checked = 0
    for tool in TOOLS:
        known = tool.input_schema["properties"]
        base = {k: v for k, v in good[tool.name].items() if k in known}
        assert not schema_refuses(tool, base), tool.name
        for path in string_paths(tool.input_schema, base):
            schema = schema_at(tool.input_schema, path)
            values = {"empty": ""}
            if "maxLength" in schema:
                values["over its maxLength"] = "a" * (schema["maxLength"] + 1)
            for what, value in values.items():
                arguments = with_value(base, path, value)
                argument = named(path)
                by_schema = schema_refuses(tool, arguments)
                by_server = server_refuses(ada, tool, arguments, argument)
                checked += 1
                if by_schema != by_server:
                    drift.append(
                        f"{tool.name} {argument} {what}: schema refuses {by_schema}, "
                        f"server refuses {by_server}"
                    )
    assert checked > 40
    assert drift == [], "\n".join(drift)


def test_every_id_argument_the_server_takes_only_as_a_uuid_says_so(team: Team) -> None:
    """Before, correct, supersede and forget took their `id` without
    "format": "uuid" in the schema (every other id argument has it), while
    the gateway refuses any other value (`id: must be a UUID`)."""
    ada = team.clients["ada"]
    made = ada.remember(
        "Heron", "The heron is grey.", audience_to="workspace", mention_names=["Heron"]
    ).memory
    good = good_arguments(made.id, made.revision, made.mentions[0].entity_id)
    drift: list[str] = []
    for tool in TOOLS:
        known = tool.input_schema["properties"]
        base = {k: v for k, v in good[tool.name].items() if k in known}
        for path in string_paths(tool.input_schema, base):
            if path[-1] == "audience":
                continue  # 'workspace' or a member id, as its description says
            says = schema_at(tool.input_schema, path).get("format") == "uuid"
            arguments = with_value(base, path, "not-a-uuid")
            refused = server_refuses(ada, tool, arguments, named(path), "must be a UUID")
            if says != refused:
                drift.append(f"{tool.name} {named(path)}: format uuid {says}, refused {refused}")
    assert drift == [], "\n".join(drift)
