"""The walk over relations (neighbors) on stored state no write makes: a
relation whose end no memory the caller sees mentions (a hand-edited
database, or a copy of one). The walk places each end by the entity's
group, which rests on a visible mention; an end it cannot place is skipped
with its edge, as lookup and timeline skip what they cannot show, rather
than answering INTERNAL."""

from __future__ import annotations

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_a_relation_whose_end_nobody_may_see_is_skipped_by_the_walk(
    stack: Stack, team: Team
) -> None:
    """neighbors answered INTERNAL (a KeyError placing the unseen end)."""
    ada = team.clients["ada"]
    stated = ada.remember(
        "Robin's work",
        relations=[
            {"subject": {"name": "Robin"}, "predicate": "leads", "object": {"name": "Apollo"}},
            {"subject": {"name": "Robin"}, "predicate": "knows", "object": {"name": "Sam"}},
            {"subject": {"name": "Sam"}, "predicate": "funds", "object": {"name": "Apollo"}},
        ],
        audience_to="workspace",
    ).memory
    ids = {m.name: m.entity_id for m in stated.mentions}
    dropped = dbutil.query(
        stack,
        team.database_name,
        "DELETE FROM mention WHERE entity_id = %s RETURNING memory_id",
        (ids["Apollo"],),
    )
    assert len(dropped) == 1
    for client in (ada, team.clients["bob"]):
        walked = client.neighbors(ids["Robin"], hops=2)
        assert [(n.entity.name, n.depth) for n in walked.nodes] == [("Robin", 0), ("Sam", 1)]
        assert [(e.subject.name, e.predicate, e.object.name) for e in walked.edges] == [
            ("Robin", "knows", "Sam")
        ]
        assert not walked.truncated
