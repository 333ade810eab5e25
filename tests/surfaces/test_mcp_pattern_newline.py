"""The MCP server's check of a tool's arguments reads each schema pattern as
JSON Schema does (ECMA-262: ``$`` is the end of the text), so an identifier
ending in a newline is refused before anything is sent, as the store refuses
it, where Python's ``$``, which also matches before a final newline, let
"city\\n" through to a refusal a round trip later."""

from __future__ import annotations

from typing import Any

import pytest

from recallatron_mcp.tools import ToolError, check_arguments

CLAIM: dict[str, Any] = {"entity": {"name": "Robin"}, "attribute": "city", "value": "Lisbon"}
BASE: dict[str, Any] = {"request_id": "r-1", "kind": "note", "title": "t"}


@pytest.mark.parametrize(
    "arguments, where",
    [
        ({**BASE, "claims": [{**CLAIM, "attribute": "city\n"}]}, "claims[0].attribute"),
        ({**BASE, "mentions": [{"name": "Robin", "type": "person\n"}]}, "mentions[0].type"),
        ({**BASE, "mentions": [{"name": "Robin", "type": "\n"}]}, "mentions[0].type"),
    ],
)
def test_an_identifier_ending_in_a_newline_is_refused_before_sending(
    arguments: dict[str, Any], where: str
) -> None:
    with pytest.raises(ToolError) as err:
        check_arguments("remember", arguments)
    assert "nothing was sent" in str(err.value) and where in str(err.value), str(err.value)


@pytest.mark.parametrize("type_", ["", "person", "project_2"])
def test_what_the_store_takes_still_passes(type_: str) -> None:
    check_arguments(
        "remember",
        {**BASE, "claims": [CLAIM], "mentions": [{"name": "Robin", "type": type_}]},
    )
