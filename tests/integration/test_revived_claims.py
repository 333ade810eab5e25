"""A memory whose successor is forgotten is current again (design §7.1,
migration 0051), and so are the claims, relations and aliases it states: the
supersede retired them (its successor stated them again), the forget took the
successor's away, and a current memory stating nothing in the graph would
leave every member's lookup, neighbors, timeline and recall cards without
what it says (docs/graph.md: a claim is visible exactly when its memory is)."""

from __future__ import annotations

import pytest

from tests.conftest import Team, remember_robin

pytestmark = pytest.mark.integration


def _card(team: Team, handle: str) -> tuple[set[tuple[str, str, str]], set[tuple[str, str]]]:
    """What bob's lookup of Robin Goodwin states now: (attribute, value, by
    memory) and (predicate, by memory), plus each current alias as a relation
    named "alias:<alias>"."""
    (card,) = team.clients[handle].lookup("Robin Goodwin").entities
    attributes = {(a.attribute, a.value, a.memory_id) for a in card.attributes}
    relations = {(r.predicate, r.memory_id) for r in card.relations}
    relations |= {(f"alias:{a.alias}", a.memory_id) for a in card.alias_claims}
    return attributes, relations


def test_the_claims_of_a_memory_current_again_are_current_again(team: Team) -> None:
    ada = team.clients["ada"]
    old = remember_robin(ada, "From the kickoff.", audience_to="workspace").memory
    assert _card(team, "bob") == (
        {("city", "Lisbon", old.id)},
        {("leads", old.id), ("alias:Robin", old.id)},
    )
    new = ada.supersede(old.id, old.revision, "Robin leads Apollo", reason="restated").memory
    assert _card(team, "bob") == (
        {("city", "Lisbon", new.id)},
        {("leads", new.id), ("alias:Robin", new.id)},
    )

    ada.forget(new.id, "said in error")

    # The old memory reads as current, and states what it stated again.
    current = team.clients["bob"].read([old.id]).memories[0]
    assert current.superseded_by_id == ""
    assert [(c.attribute, c.HasField("retired_at")) for c in current.claims] == [("city", False)]
    assert _card(team, "bob") == (
        {("city", "Lisbon", old.id)},
        {("leads", old.id), ("alias:Robin", old.id)},
    )


def test_only_what_the_supersede_retired_comes_back(team: Team) -> None:
    """A claim a correct replaced before the supersede stays in the history."""
    ada = team.clients["ada"]
    old = remember_robin(ada, "From the kickoff.", audience_to="workspace").memory
    robin = next(m.entity_id for m in old.mentions if m.name == "Robin Goodwin")
    porto = [{"entity": {"entity_id": robin}, "attribute": "city", "value": "Porto"}]
    corrected = ada.correct(old.id, old.revision, "moved", claims=porto).memory
    new = ada.supersede(old.id, corrected.revision, "Robin in Porto", reason="restated").memory
    ada.forget(new.id, "said in error")

    assert _card(team, "ada") == ({("city", "Porto", old.id)}, set())
    claims = ada.read([old.id]).memories[0].claims
    assert sorted((c.value, c.HasField("retired_at")) for c in claims) == [
        ("Lisbon", True),
        ("Porto", False),
    ]
