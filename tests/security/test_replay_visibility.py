"""A retried write (the same request id and request) answers with what the
caller may see now (design §4, "Not found means not found"): a memory its
author wrote for another member, changed since by the one who may see it,
or one out of the retrying token's purposes, comes back as the id alone,
never with another member's later text or successor."""

from __future__ import annotations

import grpc
import pytest

from recallatron.client import Client
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _not_readable(client: Client, memory_id: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        client.read([memory_id])
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_retry_does_not_show_the_audience_member_s_later_correction(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    ask = {"audience_to": team.members["bob"], "request_id": "replay-note-for-bob"}
    first = ada.remember("Note for Bob", "original", **ask).memory
    assert first.body == "original"  # its first answer: what she wrote
    _not_readable(ada, first.id)
    bob.correct(first.id, first.revision, "mine now", body="bob's private PIN is 4711")
    again = ada.remember("Note for Bob", "original", **ask)
    assert again.replayed and again.memory.id == first.id
    assert "4711" not in str(again) and "mine now" not in str(again)
    assert again.memory.revision != 2


def test_a_retry_does_not_show_a_successor_the_author_may_not_see(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    ask = {"audience_to": team.members["bob"], "request_id": "replay-note-2-for-bob"}
    first = ada.remember("Note 2 for Bob", "original", **ask).memory
    successor = bob.supersede(first.id, first.revision, "Bob's own successor", "secret").memory
    again = ada.remember("Note 2 for Bob", "original", **ask)
    assert again.replayed and again.memory.id == first.id
    assert successor.id not in str(again) and "secret" not in str(again)


def test_a_retry_by_a_narrower_token_shows_nothing_outside_its_purposes(
    stack,
    operator,
    team: Team,  # type: ignore[no-untyped-def]
) -> None:
    ada = team.clients["ada"]
    audit = ada.remember(
        "Audit finding: vendor X overbilled", "details", audience_to="workspace",
        purposes=["audit"], purpose="audit",
    ).memory  # fmt: skip
    ada.correct(audit.id, 1, "typo", body="corrected", purpose="audit", request_id="replay-audit")
    token = operator.create_token(team.members["ada"], "assist only", purposes=["assist"]).token
    scoped = Client(stack.gateway, token)
    _not_readable(scoped, audit.id)
    got = scoped.correct(
        audit.id, 1, "typo", body="corrected", purpose="assist", request_id="replay-audit"
    )
    assert got.replayed and got.memory.id == audit.id
    assert "vendor X" not in str(got) and "corrected" not in got.memory.body
    # The author's own token, which may see it, gets the memory itself.
    full = ada.correct(
        audit.id, 1, "typo", body="corrected", purpose="audit", request_id="replay-audit"
    )
    assert full.replayed and full.memory.title == audit.title and full.memory.body == "corrected"
    scoped.close()
