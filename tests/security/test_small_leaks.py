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
