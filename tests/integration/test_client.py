"""The Python client (recallatron/client.py) through the stack: each write
tool takes what an agent's call of it takes (recallatron/tools.py), in the
client's own spelling, and the memory made holds it."""

from __future__ import annotations

import pytest

from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_supersede_and_derive_take_the_memory_fields_remember_takes(team: Team) -> None:
    """supersede took no audience, purposes, mentions, confidence or sources
    and derive no mentions or confidence, which the tools take: a replacement
    shared with the workspace, or a derivation naming who it is about, could
    not be written from the client as remember spells them."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    old = ada.remember("Ada's draft", "Kept to Ada for now.", kind="note").memory
    new = ada.supersede(
        old.id,
        old.revision,
        "The plan, shared",
        "Everyone may read it now.",
        kind="decision",
        reason="shared with the team",
        audience_to="workspace",
        purposes=["assist", "automate"],
        mention_names=["Apollo"],
        confidence=0.6,
    ).memory
    assert new.audience.workspace
    assert sorted(new.purposes) == sorted([1, 2])
    assert [m.name for m in new.mentions] == ["Apollo"]
    assert new.confidence == pytest.approx(0.6)
    assert bob.read([new.id]).memories[0].title == "The plan, shared"

    source = ada.remember("Apollo ships in May", kind="fact", audience_to="workspace").memory
    derived = ada.derive(
        [source.id],
        "Apollo ships this spring",
        mention_ids=[new.mentions[0].entity_id],
        confidence=0.7,
    ).memory
    assert [(m.entity_id, m.name) for m in derived.mentions] == [
        (new.mentions[0].entity_id, "Apollo")
    ]
    assert derived.confidence == pytest.approx(0.7)

    successor = ada.supersede(
        derived.id, derived.revision, "Apollo ships in spring", kind="summary", sources=[source.id]
    ).memory
    assert successor.origin == 2  # derived, from its sources
