"""The MCP tools' arguments fuzzed against their JSON schemas
(recallatron/tools.py TOOLS), in-process through recallatron_mcp.tools.call
with a real client to the stack: whatever the arguments, the only exception
that may escape is ToolError, and it never reports a server fault."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.client import Client
from recallatron.tools import TOOLS
from recallatron_devkit.stack import Stack
from recallatron_mcp.tools import ToolError, call
from tests.conftest import make_team
from tests.faults.stackutil import record
from tests.security.protofuzz import hostile_text, string_values

pytestmark = pytest.mark.integration

# A fault relayed as a tool's message still is a fault.
FAULT_PREFIXES = ("UNKNOWN", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "DATA_LOSS")
CALLS: Counter[str] = Counter()
Draw = Callable[[st.SearchStrategy[Any]], Any]

any_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile_text,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(hostile_text, inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def caller(stack: Stack, operator: Client) -> Iterator[tuple[Client, tuple[str, ...]]]:
    team = make_team(stack, operator, ("ada", "bob"))
    ada = team.clients["ada"]
    memories = [
        ada.remember(f"mcp fuzz {i}", "Ada met Carol", audience_to="workspace").memory
        for i in range(2)
    ]
    entities = [m.entity_id for mem in memories for m in mem.mentions]
    ids = tuple(m.id for m in memories) + tuple(entities) + tuple(team.members.values())
    yield ada, ids
    for client in team.clients.values():
        client.close()


def value_of(draw: Draw, schema: dict[str, Any], ids: tuple[str, ...], depth: int = 0) -> Any:
    """A value for ``schema``: mostly of its type, at and past its bounds;
    sometimes any JSON at all."""
    if depth > 3 or not draw(st.integers(0, 9)):
        return draw(any_json)
    if "enum" in schema:
        return draw(st.one_of(st.sampled_from(schema["enum"]), hostile_text))
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = draw(st.sampled_from(kind))
    if kind == "object" or "properties" in schema:
        return arguments(draw, schema, ids, depth + 1)
    if kind == "array":
        items = schema.get("items", {})
        most = schema.get("maxItems", 4)
        count = draw(st.sampled_from([0, 1, 2, most, most + 1]))
        if count > 4:
            return [value_of(draw, items, ids, depth + 1)] * count
        return [value_of(draw, items, ids, depth + 1) for _ in range(count)]
    if kind == "string":
        longest = schema.get("maxLength")
        choices = [string_values(ids)]
        if longest is not None:
            choices.append(st.sampled_from(["x" * longest, "x" * (longest + 1)]))
        return draw(st.one_of(choices))
    if kind in ("integer", "number"):
        bounds = [schema.get("minimum", 0), schema.get("maximum", 100)]
        edges = [b + d for b in bounds for d in (-1, 0, 1)] + [2**31, -(2**63), 2**64]
        if kind == "integer":
            return draw(st.one_of(st.sampled_from(edges), st.integers(-5, 60)))
        return draw(
            st.one_of(
                st.sampled_from([*map(float, edges), math.nan, math.inf, -math.inf, 0.5]),
                st.floats(allow_nan=True, allow_infinity=True),
            )
        )
    if kind == "boolean":
        return draw(st.booleans())
    return draw(any_json)


def arguments(
    draw: Draw, schema: dict[str, Any], ids: tuple[str, ...], depth: int = 0
) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    out: dict[str, Any] = {}
    for name, sub in properties.items():
        # Required ones are mostly given, so a call gets past the schema.
        given_odds = 9 if name in required else 2
        if draw(st.integers(0, 9)) < given_odds:
            out[name] = value_of(draw, sub, ids, depth)
    if not draw(st.integers(0, 9)):
        out[draw(hostile_text)] = draw(any_json)
    return out


@settings(
    max_examples=700,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
@given(data=st.data())
def test_fuzz_mcp_tool_arguments(
    caller: tuple[Client, tuple[str, ...]], data: st.DataObject
) -> None:
    client, ids = caller
    tool = data.draw(st.sampled_from(TOOLS))
    args = arguments(data.draw, tool.input_schema, ids)
    if not data.draw(st.integers(0, 19)):
        args = data.draw(any_json)  # not even an object
    CALLS[tool.name] += 1
    try:
        call(client, tool.name, args)
    except ToolError as exc:
        assert not str(exc).startswith(FAULT_PREFIXES), (tool.name, args, str(exc))


def test_fuzz_mcp_figures() -> None:
    """Runs last in the module: every tool was called."""
    record("mcp-fuzz", calls=sum(CALLS.values()), by_tool=dict(CALLS))
    assert set(CALLS) == {t.name for t in TOOLS}
