"""Small leaks (design §4, "Not found means not found"): an id the reader
may not see never shows as a memory's successor, and an owner's status
counts only the memories the owner may see."""

from __future__ import annotations

import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_superseded_by_id_hides_a_successor_the_reader_may_not_see(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    old = ada.remember("The build server is in rack 4", audience_to="workspace").memory
    # Replaced by a memory for ada alone: bob still reads the old one...
    request = pb.SupersedeRequest(
        request_id="supersede-for-ada-alone",
        id=old.id,
        expected_revision=old.revision,
        kind=cpb.KIND_NOTE,
        title="The build server moved to rack 9",
        audience=cpb.Audience(member_id=team.members["ada"]),
    )
    resp = ada.call(ada.memory.Supersede, request)
    successor = resp.memory
    assert successor.audience.member_id == team.members["ada"]
    seen_by_bob = bob.read([old.id]).memories[0]
    # ...but not the id of what he may not see.
    assert seen_by_bob.superseded_by_id == ""
    assert successor.id not in str(seen_by_bob)
    # The author, who may see it, does.
    assert ada.read([old.id]).memories[0].superseded_by_id == successor.id


def test_owner_status_counts_only_what_the_owner_may_see(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    before = ada.status()
    for i in range(3):
        bob.remember(f"Bob's private note {i}")  # audience: bob alone
    ada.remember("Ada's own note")
    ada.remember("A note for everyone", audience_to="workspace")
    after = ada.status()
    assert after.memories - before.memories == 2
    ada.wait_embedded(timeout=120)
    settled = ada.status()
    assert settled.memories == settled.embedded == before.memories + 2


def test_a_purpose_scoped_token_s_status_counts_only_its_purposes(
    stack,
    operator,
    team: Team,  # type: ignore[no-untyped-def]
) -> None:
    """An owner's token scoped to assist counted audit-only memories too, which
    no call of that token may see (design §4: statistics never reveal rows)."""
    from recallatron.client import Client

    ada = team.clients["ada"]
    token = operator.create_token(team.members["ada"], "assist only", purposes=["assist"]).token
    scoped = Client(stack.gateway, token)
    before, whole = scoped.status(), ada.status()
    ada.remember("Audit-only note", audience_to="workspace", purposes=["audit"])
    ada.remember("Assist note", audience_to="workspace", purposes=["assist", "audit"])
    after = scoped.status()
    assert after.memories == before.memories + 1
    assert ada.status().memories == whole.memories + 2
    scoped.close()


def test_status_counts_memories_embedded_by_the_newest_model(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    """While a rebuild writes a new model's vectors beside the old ones, each
    memory counts once, embedded when the newest model's vector is there
    (embedded was 2 x memories, per vector of any model), and the answer
    names that model."""
    from tests import dbutil

    ada = team.clients["ada"]
    for i in range(3):
        ada.remember(f"Status probe {i}", f"kettle descaling schedule {i}", audience_to="workspace")
    ada.wait_embedded(timeout=120)
    current = ada.status()
    assert current.model_id and current.embedded == current.memories
    # A new model's vectors for two of the three, written after the old ones.
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding, created_at)"
        " SELECT memory_id, 'next-model', input_version, embedding, now() + interval '1 second'"
        " FROM memory_embedding ORDER BY memory_id LIMIT 2 RETURNING 1",
    )
    during = ada.status()
    assert (during.memories, during.embedded, during.model_id) == (
        current.memories, 2, "next-model"
    )  # fmt: skip
