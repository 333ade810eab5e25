"""The bound on a merged entity (design §8.5, MAX_ENTITY_GROUP) holds for the
group as the workspace holds it, not only as the deciding call sees it: merges
decided under another purpose, whose entities that call cannot see, count."""

from __future__ import annotations

import grpc
import pytest

from recallatron.client import Client
from recallatron.vocabulary import MAX_ENTITY_GROUP
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _entities(ada: Client, title: str, names: list[str], purposes: list[str]) -> list[str]:
    memory = ada.remember(
        title, "Who is on it.", purposes=purposes, mention_names=names, purpose=purposes[-1]
    ).memory
    by_name = {m.name: m.entity_id for m in memory.mentions}
    return [by_name[n] for n in names]


def _group_size(ada: Client, name: str, purpose: str) -> int:
    cards = ada.lookup(name, purpose=purpose).entities
    assert len(cards) == 1, [c.name for c in cards]
    return 1 + len(cards[0].merged)


def test_merges_under_other_purposes_count_toward_the_bound(team: Team) -> None:
    ada = team.clients["ada"]
    # The kept entity is seen for both purposes; the others each for one.
    (kept,) = _entities(ada, "The Kestrel hub", ["Kestrel Hub"], ["assist", "audit"])
    assisting = _entities(
        ada,
        "The assist crew",
        [f"Assist Quillon {i}" for i in range(MAX_ENTITY_GROUP - 1)],
        ["assist"],
    )
    auditing = _entities(ada, "The audit crew", ["Audit Quillon 0"], ["audit"])
    for other in assisting:
        ada.merge_entities(kept, other, purpose="assist")
    assert _group_size(ada, "Kestrel Hub", "assist") == MAX_ENTITY_GROUP

    # For audit the group looks like one entity, but it holds the bound already.
    assert _group_size(ada, "Kestrel Hub", "audit") == 1
    with pytest.raises(grpc.RpcError) as err:
        ada.merge_entities(kept, auditing[0], purpose="audit")
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, err.value.details()
    assert f"at most {MAX_ENTITY_GROUP} entities" in (err.value.details() or "")
    assert _group_size(ada, "Kestrel Hub", "audit") == 1

    # Once the audit entity is also mentioned for assist, no reader finds the
    # group past the bound.
    ada.remember(
        "Audit Quillon helps", purposes=["assist", "audit"], mention_ids=auditing, purpose="audit"
    )
    assert _group_size(ada, "Kestrel Hub", "assist") == MAX_ENTITY_GROUP

    # Undoing one merge makes room, whichever purpose decides the next.
    undone = next(
        m.id for m in ada.entity_merges(purpose="assist").merges if m.merged.id == assisting[0]
    )
    ada.undo_entity_merge(undone, purpose="assist")
    assert ada.merge_entities(kept, auditing[0], purpose="audit").created
    assert _group_size(ada, "Kestrel Hub", "assist") == MAX_ENTITY_GROUP
