"""Times over HTTP/JSON are RFC 3339 (docs/api.md), as curl users write them:
a "t" and "z" in lower case are the same time (RFC 3339 5.6), as the MCP
server and the CLI read them; a time without its offset, or one that is no
RFC 3339 time at all, is refused naming the field and saying what is wrong
(the protobuf parser said it could not read "2026-12", or named a format of
its own), and nothing changes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.surfaces.httpjson import call, violations

pytestmark = pytest.mark.integration

REMEMBER = "recallatron.v1.MemoryService/Remember"
LOOKUP = "recallatron.v1.MemoryService/Lookup"
LIST = "recallatron.v1.MemoryService/ListMemories"


@pytest.fixture(scope="module")
def token(operator: Client) -> Iterator[str]:
    ws = operator.create_workspace(f"t-{uuid.uuid4().hex[:12]}").workspace
    member = operator.create_member(ws.id, "ada", owner=True).member
    yield operator.create_token(member.id, "times").token


def remember(occurred_at: str, valid_from: str) -> dict[str, Any]:
    return {
        "requestId": str(uuid.uuid4()),
        "kind": "KIND_FACT",
        "title": "The Lisbon office opens at nine",
        "audience": {"workspace": True},
        "occurredAt": occurred_at,
        "claims": [
            {
                "entity": {"name": "Lisbon office"},
                "attribute": "opens_at",
                "value": "09:00",
                "validFrom": valid_from,
            }
        ],
    }


def test_a_time_in_lower_case_is_the_same_time(stack: Stack, token: str) -> None:
    status, answer = call(
        stack.http_url,
        REMEMBER,
        remember("2026-01-05t09:30:00z", "2026-01-05t00:00:00+01:00"),
        token,
    )
    assert status == 200, answer
    claim = answer["memory"]["claims"][0]
    assert claim["validFrom"] == "2026-01-04T23:00:00Z", claim
    # As of now, written in lower case: the answer of the same time in upper case.
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    answers = [
        call(stack.http_url, LOOKUP, {"name": "Lisbon office", "asOf": at}, token)
        for at in (now, now.lower())
    ]
    assert answers[0] == answers[1], answers
    status, answer = answers[1]
    assert status == 200, answer
    [card] = answer["entities"]
    assert [a["value"] for a in card["attributes"]] == ["09:00"], card


@pytest.mark.parametrize(
    ("occurred_at", "valid_from", "field", "said"),
    [
        ("2026-01-05T09:30:00", "2026-01-05T00:00:00Z", "occurredAt", "needs its offset"),
        ("2026-01-05T09:30:00Z", "2026-01-05T00:00:00", "claims[0].validFrom", "needs its offset"),
        ("2026-01-05 09:30:00Z", "2026-01-05T00:00:00Z", "occurredAt", "not an RFC 3339 time"),
        ("2026-01-05", "2026-01-05T00:00:00Z", "occurredAt", "not an RFC 3339 time"),
        ("2026-01-05T09:30:00Z", "10000-01-01T00:00:00Z", "claims[0].validFrom", "not an RFC 3339"),
    ],
)
def test_a_time_that_is_not_rfc_3339_is_refused_saying_why(
    stack: Stack, token: str, occurred_at: str, valid_from: str, field: str, said: str
) -> None:
    before = call(stack.http_url, LIST, {}, token)[1]
    status, answer = call(stack.http_url, REMEMBER, remember(occurred_at, valid_from), token)
    assert (status, answer.get("code")) == (400, "invalid_argument"), answer
    assert violations(answer) == [field], answer
    assert answer["message"].startswith(f"{field}: "), answer
    assert said in answer["message"], answer
    assert "does not match format" not in answer["message"], answer
    assert call(stack.http_url, LIST, {}, token)[1] == before


def test_a_lookup_as_of_a_time_without_its_offset_is_refused_saying_so(
    stack: Stack, token: str
) -> None:
    status, answer = call(
        stack.http_url, LOOKUP, {"name": "Lisbon office", "asOf": "2026-01-06T00:00:00"}, token
    )
    assert (status, violations(answer)) == (400, ["asOf"]), answer
    assert "needs its offset (Z or +hh:mm)" in answer["message"], answer
