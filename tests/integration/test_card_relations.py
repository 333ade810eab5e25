"""An entity card's relations (docs/graph.md, `lookup`): each relation claim
the caller may see is listed once, as neighbors and the timeline count it, a
relation from an entity to itself (or between two entities merged into one)
too, and so counted once towards the card's cap."""

from __future__ import annotations

import pytest

from recallatron.v1 import common_pb2 as cpb
from tests.conftest import Team

pytestmark = pytest.mark.integration

OUTGOING, INCOMING = cpb.RELATION_DIRECTION_OUTGOING, cpb.RELATION_DIRECTION_INCOMING


def test_a_relation_to_itself_is_listed_once_on_the_card(team: Team) -> None:
    ada = team.clients["ada"]
    stated = ada.remember(
        "Ego and Alt",
        "Ego reviews itself; Ego knows Alt.",
        audience_to="workspace",
        relations=[
            {"subject": {"name": "Ego"}, "predicate": "reviews", "object": {"name": "Ego"}},
            {"subject": {"name": "Ego"}, "predicate": "knows", "object": {"name": "Alt"}},
        ],
    ).memory
    ego = ada.lookup("Ego").entities[0]
    listed = sorted((r.predicate, r.direction, r.other.name) for r in ego.relations)
    assert listed == [("knows", OUTGOING, "Alt"), ("reviews", OUTGOING, "Ego")], (
        f"Ego's card listed {listed}"
    )
    assert [r.memory_id for r in ego.relations] == [stated.id, stated.id]
    history = ada.lookup("Ego", include_history=True).entities[0]
    assert len(history.relations) == 2
    # As the walk counts it: one edge from Ego to itself.
    walked = ada.neighbors(ego.id, hops=1)
    assert sorted((e.subject.name, e.predicate, e.object.name) for e in walked.edges) == [
        ("Ego", "knows", "Alt"),
        ("Ego", "reviews", "Ego"),
    ]
    alt = ada.lookup("Alt").entities[0]
    assert [(r.predicate, r.direction, r.other.name) for r in alt.relations] == [
        ("knows", INCOMING, "Ego")
    ]


def test_a_relation_between_two_merged_entities_is_listed_once(team: Team) -> None:
    ada = team.clients["ada"]
    ada.remember(
        "Robin and R. Goodwin",
        "Robin met R. Goodwin.",
        audience_to="workspace",
        relations=[
            {"subject": {"name": "Robin"}, "predicate": "met", "object": {"name": "R. Goodwin"}}
        ],
    )
    robin = ada.lookup("Robin").entities[0].id
    goodwin = ada.lookup("R. Goodwin").entities[0].id
    ada.merge_entities(robin, goodwin)
    card = ada.lookup("Robin").entities[0]
    assert card.id == robin
    listed = [(r.predicate, r.direction, r.other.id) for r in card.relations]
    assert listed == [("met", OUTGOING, robin)], f"the merged card listed {listed}"
