"""An optional argument given as null is one not given: many agents fill
every property of a tool's schema, null for those they do not mean (strict
function calling asks for all of them), and the request builder reads None
as left out, but the schema's check refused the call first ("limit: None is
not of type 'integer'"), so a plain recall failed for a null the agent never
meant as a value. A required argument given as null is still refused, naming
it and saying null, as JSON does, not Python's None."""

from __future__ import annotations

from typing import Any

import pytest

from recallatron.tools import BY_NAME, TOOLS, Tool
from recallatron_mcp.tools import ToolError, prepare

# Each tool's required arguments, with values the schema takes.
REQUIRED: dict[str, dict[str, Any]] = {
    "recall": {"query": "standup"},
    "read": {"ids": ["5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11"]},
    "remember": {"request_id": "r-1", "kind": "note", "title": "t"},
    "derive": {
        "request_id": "r-1",
        "sources": ["5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11"],
        "kind": "note",
        "title": "t",
    },
    "correct": {
        "request_id": "r-1",
        "id": "5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11",
        "expected_revision": 1,
        "reason": "why",
    },
    "supersede": {
        "request_id": "r-1",
        "id": "5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11",
        "expected_revision": 1,
        "kind": "note",
        "title": "t",
    },
    "forget": {"request_id": "r-1", "id": "5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11", "reason": "r"},
    "lookup": {"name": "Robin"},
    "neighbors": {"entity_id": "5f0c1d52-8a0e-4a3b-9c56-1f0d2b7e9a11"},
    "timeline": {},
    "list_memories": {},
    "audit_log": {},
}


def _optional(tool: Tool) -> list[str]:
    required = set(tool.input_schema["required"])
    return [name for name in tool.input_schema["properties"] if name not in required]


def test_every_tool_is_covered() -> None:
    assert set(REQUIRED) == {t.name for t in TOOLS}


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_optional_argument_given_null_is_left_out(tool: Tool) -> None:
    given = REQUIRED[tool.name]
    nulls = dict.fromkeys(_optional(tool))
    _, plain = prepare(tool.name, given)
    _, with_nulls = prepare(tool.name, {**given, **nulls})
    assert with_nulls == plain


def test_a_null_inside_an_item_is_left_out_too() -> None:
    base = REQUIRED["remember"]
    claim = {"entity": {"name": "Robin", "entity_id": None}, "attribute": "city", "value": "L"}
    mention = {"name": "Robin", "type": None, "entity_id": None}
    _, plain = prepare("remember", {**base, "claims": [{**claim, "entity": {"name": "Robin"}}]})
    _, with_nulls = prepare(
        "remember",
        {**base, "claims": [{**claim, "valid_from": None, "confidence": None}], "mentions": None},
    )
    assert with_nulls == plain
    _, request = prepare("remember", {**base, "mentions": [mention]})
    assert [m.name for m in request.mentions] == ["Robin"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "arguments", "where"),
    [
        ("recall", {"query": None}, "query"),
        ("remember", {**REQUIRED["remember"], "title": None}, "title"),
        ("read", {"ids": [None]}, "ids[0]"),
        ("recall", {"query": "x", "not_an_argument": None}, "not_an_argument"),
    ],
)
def test_a_required_argument_or_an_item_given_null_is_refused_naming_it(
    name: str, arguments: dict[str, Any], where: str
) -> None:
    with pytest.raises(ToolError) as err:
        prepare(name, arguments)
    message = str(err.value)
    assert message.startswith("INVALID_ARGUMENT (nothing was sent): ") and where in message
    assert "None" not in message, message


def test_the_schema_still_offers_no_null() -> None:
    """Left out is the way to say none: the schema agents read is unchanged."""
    assert BY_NAME["recall"].input_schema["properties"]["limit"]["type"] == "integer"
