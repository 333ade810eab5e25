"""A write that makes a memory answers with that memory exactly as a read of
it gives it (design §7): the store reads it back in the write's own
transaction and runs only the provenance queries the write can have filled
(services/store/domain/memory_writes.py, `_write_new`), so each kind of
provenance a write can make is checked here against a read afterwards."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

from tests.conftest import Team, remember_robin

pytestmark = pytest.mark.integration


def same_as_read(team: Team, handle: str, answered: Any) -> None:
    (read,) = team.clients[handle].read([answered.id]).memories
    assert answered == read


def test_remember_and_derive_answer_as_a_read_does(team: Team) -> None:
    ada = team.clients["ada"]
    plain = ada.remember("Plain note", "Nothing but text.").memory
    same_as_read(team, "ada", plain)
    assert not plain.links and not plain.mentions

    shared = ada.remember("Shared fact", "For everyone.", audience_to="workspace").memory
    same_as_read(team, "ada", shared)

    about = ada.remember("About the fact", "Linked.", about=[shared.id]).memory
    same_as_read(team, "ada", about)
    assert [link.target.id for link in about.links] == [shared.id]

    graph = remember_robin(
        ada,
        "Robin Goodwin leads the Apollo project from Lisbon.",
        mention_names=["Robin Goodwin", "Apollo"],
    ).memory
    same_as_read(team, "ada", graph)
    assert graph.mentions and graph.claims and graph.relations and graph.aliases

    # Claims alone make mentions of the entities they name.
    claims_only = ada.remember(
        "Apollo's budget",
        "Set for the year.",
        claims=[{"entity": {"name": "Apollo"}, "attribute": "budget", "value": "2M"}],
    ).memory
    same_as_read(team, "ada", claims_only)

    derived = ada.derive([plain.id, graph.id], "Summary", "Both, summed up.").memory
    same_as_read(team, "ada", derived)
    assert {link.target.id for link in derived.links} == {plain.id, graph.id}

    # Written for another member: the writer may not read it, and is still
    # answered with what it wrote (the memory itself, without provenance).
    for_bob = ada.remember("For Bob", "Only Bob reads this.", audience_to=team.members["bob"])
    (bobs,) = team.clients["bob"].read([for_bob.memory.id]).memories
    assert for_bob.memory.title == bobs.title and for_bob.memory.body == bobs.body
    with pytest.raises(grpc.RpcError) as refused:
        ada.read([for_bob.memory.id])
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_replayed_remember_answers_with_the_first_memory_as_read(team: Team) -> None:
    ada = team.clients["ada"]
    request_id = str(uuid.uuid4())
    first = ada.remember("Once", "Written once.", mention_names=["Quill"], request_id=request_id)
    again = ada.remember("Once", "Written once.", mention_names=["Quill"], request_id=request_id)
    assert again.replayed and not first.replayed
    assert again.memory == first.memory
    same_as_read(team, "ada", again.memory)
