"""An entity named by id on a write (a mention, a claim's entity, a
relation's subject or object, an alias's entity, an episode's participant)
that the caller may not see does not exist for them (docs/graph.md): every
write answers exactly as for an id nothing has, NOT_FOUND naming the field,
as neighbors, timeline and a write naming an episode or a memory it may not
see do, and nothing is written."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

WHEN = "2026-11-30T10:00:00Z"
COUNTS = (
    "SELECT (SELECT count(*) FROM memory), (SELECT count(*) FROM episode),"
    " (SELECT count(*) FROM mention), (SELECT count(*) FROM attribute_claim),"
    " (SELECT count(*) FROM relation_claim), (SELECT count(*) FROM entity_alias)"
)


def _writes(
    client: Client, own: Any, source: str, entity: str
) -> dict[str, tuple[Callable[[], Any], str]]:
    """Each write naming ``entity`` by id in one place, with the field its
    refusal names."""
    ref = {"entity_id": entity}
    new = {"name": "Someone new"}
    return {
        "remember mention": (lambda: client.remember("x", mention_ids=[entity]), "mentions[0]"),
        "remember claim": (
            lambda: client.remember(
                "x", claims=[{"entity": ref, "attribute": "city", "value": "Oslo"}]
            ),
            "claims[0].entity",
        ),
        "remember relation object": (
            lambda: client.remember(
                "x", relations=[{"subject": new, "predicate": "knows", "object": ref}]
            ),
            "relations[0].object",
        ),
        "remember alias": (
            lambda: client.remember("x", aliases=[{"entity": ref, "alias": "Q"}]),
            "aliases[0].entity",
        ),
        "derive relation subject": (
            lambda: client.derive(
                [source], "x", relations=[{"subject": ref, "predicate": "knows", "object": new}]
            ),
            "relations[0].subject",
        ),
        "correct claim": (
            lambda: client.correct(
                own.id,
                own.revision,
                "fix",
                claims=[{"entity": ref, "attribute": "city", "value": "Oslo"}],
            ),
            "claims[0].entity",
        ),
        "supersede mention": (
            lambda: client.supersede(own.id, own.revision, "y", mention_ids=[entity]),
            "mentions[0]",
        ),
        "create episode": (
            lambda: client.create_episode("Retro", WHEN, entity_ids=[entity]),
            "entity_ids[0]",
        ),
    }


def test_a_write_naming_an_entity_it_may_not_see_answers_as_for_none(
    stack: Stack, team: Team
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    hidden = (
        ada.remember(
            "Ada's doctor",
            claims=[{"entity": {"name": "Dr Quill"}, "attribute": "phone", "value": "555-0101"}],
        )
        .memory.claims[0]
        .entity.id
    )
    own = bob.remember("Bob's note", audience_to="workspace").memory
    before = dbutil.query(stack, team.database_name, COUNTS)
    unknown = str(uuid.uuid4())
    answers: dict[str, set[tuple[grpc.StatusCode, str | None]]] = {}
    for entity in (hidden, unknown):
        for name, (write, field) in _writes(bob, own, own.id, entity).items():
            with pytest.raises(grpc.RpcError) as err:
                write()
            answers.setdefault(name, set()).add((err.value.code(), err.value.details()))
            want = (grpc.StatusCode.NOT_FOUND, f"{field}.entity_id: entity not found")
            if field == "entity_ids[0]":
                want = (grpc.StatusCode.NOT_FOUND, "entity_ids[0]: entity not found")
            assert (err.value.code(), err.value.details()) == want, (name, entity == hidden)
    # The hidden id and the unknown one answered alike on every write.
    assert all(len(told) == 1 for told in answers.values()), answers
    assert dbutil.query(stack, team.database_name, COUNTS) == before
    # neighbors and timeline answer the same code for the same id.
    for entity in (hidden, unknown):
        with pytest.raises(grpc.RpcError) as walked:
            bob.neighbors(entity, hops=1)
        assert walked.value.code() == grpc.StatusCode.NOT_FOUND
