"""An answer stays bounded however a memory grew over its life: each
provenance list is capped per memory with what was left out counted, and a
read past the size budget leaves the rest of its ids to another call, so no
memory (nor a member who wrote one) can make reads or recalls fail for
everyone by outgrowing the gRPC message limit."""

from __future__ import annotations

import pytest

from recallatron.client import Client
from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_CLAIM_VALUE, MAX_PROVENANCE_ITEMS
from tests.conftest import Team

pytestmark = pytest.mark.integration

PER_WRITE = 100  # MAX_CLAIMS: claims one write may state


def _claims(prefix: str, value: str = "known") -> list[dict[str, object]]:
    # Each on an entity of its own, so each is also a mention of the memory.
    return [
        {"entity": {"name": f"{prefix} entity {i}"}, "attribute": "state", "value": value}
        for i in range(PER_WRITE)
    ]


def test_a_memory_corrected_many_times_answers_its_provenance_capped(team: Team) -> None:
    ada: Client = team.clients["ada"]
    memory = ada.remember(
        "Quarry inventory", "The quarry inventory list.", kind="fact", claims=_claims("first")
    ).memory
    for n in range(2):
        memory = ada.correct(
            memory.id,
            memory.revision,
            f"recount {n}",
            claims=_claims(f"recount {n}"),
            replace_claims=True,
        ).memory

    # Each correct keeps the mentions it adds and retires the claims it replaces:
    # 300 mentions, 300 claims of which 200 retired, three revisions.
    read = ada.read([memory.id]).memories[0]
    assert len(read.mentions) == MAX_PROVENANCE_ITEMS
    assert read.provenance_cut
    assert read.omitted.mentions == 3 * PER_WRITE - MAX_PROVENANCE_ITEMS
    # Current claims come first, so the cut keeps them.
    assert len(read.claims) == MAX_PROVENANCE_ITEMS
    assert not any(c.HasField("retired_at") for c in read.claims)
    assert read.omitted.claims == 2 * PER_WRITE
    assert [r.revision for r in read.revisions] == [1, 2, 3]
    assert read.omitted.revisions == 0
    # The write's own answer and recall are cut alike.
    assert memory.provenance_cut and len(memory.mentions) == MAX_PROVENANCE_ITEMS
    found = ada.recall("quarry inventory", mode="lexical").outcome.results
    assert [r.memory.id for r in found] == [memory.id]
    assert len(found[0].memory.mentions) == MAX_PROVENANCE_ITEMS
    assert found[0].memory.omitted.mentions == 3 * PER_WRITE - MAX_PROVENANCE_ITEMS

    plain = ada.remember("Small note", "Nothing much.", mention_names=["Quarry"]).memory
    small = ada.read([plain.id]).memories[0]
    assert not small.provenance_cut and small.omitted.mentions == 0
    assert [m.name for m in small.mentions] == ["Quarry"]


def test_a_read_past_the_budget_leaves_the_rest_to_another_call(team: Team) -> None:
    ada: Client = team.clients["ada"]
    # Four bytes a character: one memory's claims take about 800 kB, so
    # twelve pass the 8 MiB message limit a read answer once had to fit.
    wide = "\N{GRINNING FACE}" * MAX_CLAIM_VALUE
    ids = [
        ada.remember(
            f"Ledger {i}", f"Ledger page {i}.", claims=_claims(f"ledger {i}", wide)
        ).memory.id
        for i in range(12)
    ]

    answered: list[str] = []
    asked = ids
    while asked:
        answer = ada.read(asked)
        assert answer.memories, "every read answers at least one memory"
        assert answer.ByteSize() < 2 * ANSWER_BUDGET_BYTES
        for m in answer.memories:
            assert len(m.claims) == PER_WRITE and not m.provenance_cut
        answered += [m.id for m in answer.memories]
        # The rest, in the order asked.
        assert list(answer.more_ids) == asked[len(answer.memories) :]
        asked = list(answer.more_ids)
    assert answered == ids
    assert len(ada.read(ids).memories) < len(ids)
