"""A schema violation the MCP server finds before sending anything names the
argument as the gateway's refusal of the same argument reads to the agent
(``mentions[0].name``, recallatron/argument_paths.py), not as JSON Schema's
path (``mentions.0.name``): one argument has one name in every error. No stack."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from recallatron.tools import BY_NAME
from recallatron_mcp import tools

REMEMBER = {"request_id": "r-1", "kind": "note", "title": "t", "body": "b"}


def schema_refusal(name: str, arguments: dict[str, Any]) -> str:
    with pytest.raises(tools.ToolError) as err:
        tools.check_arguments(name, arguments)
    return str(err.value)


@pytest.mark.parametrize(
    ("name", "arguments", "gateway_field"),
    [
        (
            "recall",
            {"query": "q", "mentions": [str(uuid.uuid4()), 5]},
            "filters.mention_entity_ids[1]",
        ),
        ("remember", {**REMEMBER, "mentions": [{"name": 5}]}, "mentions[0].name"),
        ("remember", {**REMEMBER, "about": ["a", 7]}, "about_ids[1]"),
        (
            "remember",
            {**REMEMBER, "claims": [{"entity": {"name": 5}, "attribute": "a", "value": "v"}]},
            "claims[0].entity.name",
        ),
    ],
    ids=["recall mentions", "remember mentions", "about", "nested claim"],
)
def test_a_schema_violation_names_the_argument_as_the_gateway_does(
    name: str, arguments: dict[str, Any], gateway_field: str
) -> None:
    as_the_gateway_names_it = BY_NAME[name].argument_of(gateway_field)
    message = schema_refusal(name, arguments)
    assert f"(nothing was sent): {as_the_gateway_names_it}: " in message, message
