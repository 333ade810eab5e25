"""An episode its creator may not read back (made for another member, or for
purposes the creator was not acting for) still takes its participants: the
call once ended in INTERNAL (the participants' row-level check went through
the episode's visibility). Found by tests/security/test_fuzz_descriptors.py."""

from __future__ import annotations

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.dbutil import query

pytestmark = pytest.mark.integration


def _participants(stack: Stack, team: Team, episode_id: str) -> int:
    rows = query(
        stack,
        team.database_name,
        "SELECT count(*) FROM episode_participant WHERE episode_id = %s",
        (episode_id,),
    )
    return int(rows[0][0])


def test_an_episode_for_purposes_its_creator_does_not_act_for(
    stack: Stack, team: Team, operator: Client
) -> None:
    ada = team.clients["ada"]
    episode_id = ada.create_episode(
        "planning",
        "2026-01-05T06:13:36Z",
        purposes=["personalize"],
        member_ids=[team.members["bob"]],
        purpose="assist",
    ).episode_id
    assert _participants(stack, team, episode_id) == 1


def test_an_episode_for_another_member(stack: Stack, team: Team, operator: Client) -> None:
    ada = team.clients["ada"]
    episode_id = ada.create_episode(
        "for bob",
        "2026-01-05T06:13:36Z",
        audience_to=team.members["bob"],
        member_ids=[team.members["ada"], team.members["bob"]],
    ).episode_id
    assert _participants(stack, team, episode_id) == 2
