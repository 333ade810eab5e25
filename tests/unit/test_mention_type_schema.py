"""A mention's ``type`` as the tool schema states it and as the store takes
it: whatever the store accepts the schema accepts, and the reverse, so an
agent is never refused by the MCP server's schema check for what the store
would take (nor sent on to a refusal the schema could have given)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from recallatron import errors
from recallatron.tools import BY_NAME
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import MAX_IDENTIFIER
from services.store.api.graph_adapter import entity_of
from services.store.domain.graph_claims import validate_entity

ENTITY = "3f0c6f9e-0000-4000-8000-0000000000e1"
TYPES = ["", "person", "project_2", "x" * MAX_IDENTIFIER, "Person", "2x", "a b", "x" * 65]


def _schema_takes(mention: dict[str, Any]) -> bool:
    arguments = {"request_id": "r-1", "kind": "note", "title": "t", "mentions": [mention]}
    validator = jsonschema.Draft202012Validator(BY_NAME["remember"].input_schema)
    return not list(validator.iter_errors(arguments))


def _store_takes(mention: cpb.MentionInput) -> bool:
    try:
        validate_entity(entity_of(mention, "mentions[0]"), "mentions[0]")
    except errors.InvalidArgument:
        return False
    return True


@pytest.mark.parametrize("type_", TYPES)
def test_a_new_entitys_type_is_taken_by_the_schema_as_by_the_store(type_: str) -> None:
    assert _schema_takes({"name": "Robin", "type": type_}) == _store_takes(
        cpb.MentionInput(name="Robin", type=type_)
    )


def test_an_empty_type_is_no_type_for_an_existing_entity_too() -> None:
    assert _store_takes(cpb.MentionInput(entity_id=ENTITY, type=""))
    assert _schema_takes({"entity_id": ENTITY, "type": ""})


def test_an_empty_type_reaches_the_request_as_no_type() -> None:
    arguments = {"request_id": "r-1", "kind": "note", "title": "t"}
    request = BY_NAME["remember"].request_of(
        {**arguments, "mentions": [{"name": "Robin", "type": ""}]}
    )
    assert isinstance(request, pb.RememberRequest)
    assert request.mentions[0].name == "Robin" and not request.mentions[0].type
