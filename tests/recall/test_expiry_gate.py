"""The expiry gate through the stack (design §8.3; docs/migration.md, "The
expiry gate"): with the workspace setting ``expiry_days``, memories whose
``updated_at`` is older than the gate are left out of recall, in both arms;
a correct renews one; turning the gate off restores them, and they stay
readable throughout. A hand-over of a removed member's private memories
changes who reads them, not how old they are: it renews nothing."""

from __future__ import annotations

import uuid

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

MODES = ("lexical", "dense", "hybrid")


def backdate(stack: Stack, team: Team, memory_id: str, days: int) -> None:
    """The memory as last changed ``days`` ago (its vectors' copies follow,
    migration 0026)."""
    dbutil.query(
        stack,
        team.database_name,
        "UPDATE memory SET updated_at = now() - make_interval(days => %s) WHERE id = %s"
        " RETURNING id",
        (days, memory_id),
    )


def found(client: Client, query: str, mode: str) -> set[str]:
    outcome = client.recall(query, mode=mode, skip_rerank=True).outcome
    assert mode == "lexical" or outcome.dense_available, outcome.dense_unavailable_reason
    return {r.memory.id for r in outcome.results}


def in_every_mode(client: Client, query: str, memory_id: str) -> bool:
    return all(memory_id in found(client, query, mode) for mode in MODES)


def not_embedded(client: Client, query: str) -> int:
    """How many of the memories the caller may see wait for their vector."""
    return client.recall(query, mode="dense", skip_rerank=True).outcome.not_embedded


def in_no_mode(client: Client, query: str, memory_id: str) -> bool:
    return not any(memory_id in found(client, query, mode) for mode in MODES)


def test_the_gate_leaves_old_memories_out_of_both_arms_until_renewed_or_off(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    tag = uuid.uuid4().hex[:8]
    old = ada.remember(f"Harbour office {tag}", f"zq{tag} We move to 22 Harbour Street.").memory
    new = ada.remember(f"Harbour parking {tag}", f"zq{tag} Harbour Street has 12 spaces.").memory
    ada.wait_embedded()
    backdate(stack, team, old.id, 40)
    query = f"zq{tag} Harbour Street"
    assert in_every_mode(ada, query, old.id) and in_every_mode(ada, query, new.id)

    ada.update_settings(expiry_days=30)
    wait_for(lambda: in_no_mode(ada, query, old.id), "the gate", 30)
    assert in_every_mode(ada, query, new.id)
    assert [m.id for m in ada.read([old.id]).memories] == [old.id]  # still readable

    ada.correct(old.id, 1, "still true", confidence=0.9)  # renewed, its text unchanged
    assert in_every_mode(ada, query, old.id)

    backdate(stack, team, old.id, 40)
    ada.update_settings(expiry_days=0)
    wait_for(lambda: in_every_mode(ada, query, old.id), "the gate off", 30)


def test_a_hand_over_of_a_removed_members_memories_renews_none_of_them(
    stack: Stack, team: Team
) -> None:
    """Handing a removed member's private memories to another set their
    updated_at to the hand-over's time: memories long past the gate came
    back into the receiver's recall, and a read showed them as changed that
    day with no revision saying so."""
    ada, bob, cy = team.clients["ada"], team.clients["bob"], team.clients["cy"]
    tag = uuid.uuid4().hex[:8]
    old = bob.remember(f"Harbour office {tag}", f"zq{tag} We move to 22 Harbour Street.").memory
    new = bob.remember(f"Harbour parking {tag}", f"zq{tag} Harbour Street has 12 spaces.").memory
    query = f"zq{tag} Harbour Street"
    # Bob's memories are his own: the owner's wait_embedded counts only what
    # Ada may see, so wait for them as Bob's recall counts them.
    wait_for(lambda: not_embedded(bob, query) == 0, "Bob's memories embedded", 600)
    backdate(stack, team, old.id, 40)
    was = bob.read([old.id]).memories[0].updated_at.ToDatetime()
    ada.update_settings(expiry_days=30)
    wait_for(lambda: in_no_mode(bob, query, old.id), "the gate", 30)

    done = ada.remove_member(team.members["bob"], "transfer", transfer_to=team.members["cy"])
    assert done.memories_transferred == 2
    for mode in MODES:
        got = found(cy, query, mode)
        assert new.id in got, mode  # the receiver's recall finds what is within the gate
        assert old.id not in got, mode
    read = cy.read([old.id]).memories[0]
    assert read.audience.member_id == team.members["cy"]
    assert read.updated_at.ToDatetime() == was
