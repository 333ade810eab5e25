"""`lookup` and `neighbors` as of a time (docs/graph.md, "Time"): they answer
what the memory held at that time, so an entity first mentioned after it did
not exist then, by name, by alias or by id."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import grpc
import pytest

from tests.conftest import Team
from tests.integration.corrected_mention import correct_an_old_note

pytestmark = pytest.mark.integration


def test_an_entity_first_mentioned_after_as_of_is_not_found_then(team: Team) -> None:
    ada = team.clients["ada"]
    ada.remember(
        "Early",
        "Nell works at the harbour.",
        audience_to="workspace",
        mention_names=["Nell Ward"],
    )
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    ada.remember(
        "Mo joins",
        "Mo Salah joined the harbour team.",
        audience_to="workspace",
        mention_names=["Mo Salah"],
        claims=[{"entity": {"name": "Mo Salah"}, "attribute": "team", "value": "harbour"}],
        aliases=[{"entity": {"name": "Mo Salah"}, "alias": "Mo"}],
        relations=[
            {
                "subject": {"name": "Mo Salah"},
                "predicate": "works_with",
                "object": {"name": "Nell Ward"},
            }
        ],
    )
    mo = ada.lookup("Mo Salah").entities[0]
    nell = ada.lookup("Nell Ward").entities[0]

    then = [c.name for c in ada.lookup("Mo Salah", as_of=between).entities]
    assert then == [], f"lookup as of a time before its first mention answered {then}"
    assert ada.lookup("mo", as_of=between).entities == []
    assert ada.lookup("Mo Sala", as_of=between, partial=True).entities == []
    # Known then: answered, with what it held then (no relation yet).
    known = ada.lookup("Nell Ward", as_of=between).entities
    assert [(c.id, list(c.relations), list(c.mentioned_by)) for c in known] == [
        (nell.id, [], [nell.mentioned_by[0]])
    ]
    # Now and with the history, as before.
    assert [c.id for c in ada.lookup("Mo Salah").entities] == [mo.id]
    assert [c.id for c in ada.lookup("Mo Salah", as_of=between, include_history=True).entities] == [
        mo.id
    ]

    with pytest.raises(grpc.RpcError) as err:
        ada.neighbors(mo.id, hops=1, as_of=between)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert err.value.details() == "entity_id: entity not found"
    alone = ada.neighbors(nell.id, hops=2, as_of=between)
    assert [(n.entity.id, n.depth) for n in alone.nodes] == [(nell.id, 0)]
    assert list(alone.edges) == []
    assert [n.entity.name for n in ada.neighbors(mo.id, hops=1).nodes] == ["Mo Salah", "Nell Ward"]


def test_a_mention_a_later_correction_added_does_not_count_before_it(team: Team) -> None:
    """A correction's claims may name entities, new or known, in an older
    memory: the memory did not mention them before the correction, so as of a
    time before it a new one is not found and a known one is not mentioned by it."""
    ada = team.clients["ada"]
    made = correct_an_old_note(ada)
    newcomer = ada.lookup("Newcomer").entities[0]
    assert list(newcomer.mentioned_by) == [made.plain]
    then = [
        (c.name, list(c.mentioned_by)) for c in ada.lookup("Newcomer", as_of=made.before).entities
    ]
    assert then == [], f"lookup as of a time before the correction naming it answered {then}"
    with pytest.raises(grpc.RpcError) as err:
        ada.neighbors(newcomer.id, hops=1, as_of=made.before)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    kai_then = ada.lookup("Kai", as_of=made.before).entities
    assert [list(c.mentioned_by) for c in kai_then] == [[made.kai]]
    assert list(ada.lookup("Kai").entities[0].mentioned_by) == [made.plain, made.kai]
