"""A memory superseded by one the caller may not see (design §4, "Not found
means not found"): the caller reads it with no successor, so recall must
treat it as the current memory it reads as, not leave it out as superseded.
Left out, the caller's answer changes with a row they may not see."""

from __future__ import annotations

import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _supersede_for(team: Team, old: cpb.Memory, title: str, member: str) -> cpb.Memory:
    ada = team.clients["ada"]
    request = pb.SupersedeRequest(
        request_id=f"supersede-{old.id}",
        id=old.id,
        expected_revision=old.revision,
        kind=cpb.KIND_NOTE,
        title=title,
        audience=cpb.Audience(member_id=team.members[member]),
    )
    return ada.call(ada.memory.Supersede, request).memory


def test_a_memory_whose_successor_the_caller_may_not_see_is_recalled_as_current(
    team: Team,
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    old = ada.remember("The build server is in rack four", audience_to="workspace").memory
    successor = _supersede_for(team, old, "The build server moved to rack nine", "ada")

    # Bob reads the old memory as current: no successor is named to him.
    assert bob.read([old.id]).memories[0].superseded_by_id == ""
    for include_superseded in (False, True):
        got = bob.recall("rack", mode="lexical", include_superseded=include_superseded).outcome
        found = [r.memory.id for r in got.results]
        assert found == [old.id], (include_superseded, found)
        assert (got.counts.lexical, got.counts.fused, got.counts.admitted) == (1, 1, 1)

    # Ada, who may see the successor, finds the old memory only when she asks
    # for superseded ones.
    mine = [r.memory.id for r in ada.recall("rack", mode="lexical").outcome.results]
    assert mine == [successor.id]
    with_old = ada.recall("rack", mode="lexical", include_superseded=True).outcome
    assert {r.memory.id for r in with_old.results} == {old.id, successor.id}
