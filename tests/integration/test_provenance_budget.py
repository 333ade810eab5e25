"""An answer stays bounded however a memory grew over its life: each
provenance list is capped per memory with what was left out counted, and a
read past the size budget leaves the rest of its ids to another call, so no
memory (nor a member who wrote one) can make reads or recalls fail for
everyone by outgrowing the gRPC message limit."""

from __future__ import annotations

import psycopg
import pytest

from recallatron.client import Client
from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_CLAIM_VALUE, MAX_PROVENANCE_ITEMS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.dbutil import workspace_url

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


def test_a_supersession_chain_past_the_cap_is_cut_and_says_so(stack: Stack, team: Team) -> None:
    """A memory superseded more times than an answer lists: its chain, both
    ways, shows the nearest MAX_PROVENANCE_ITEMS steps, and the read says the
    list was cut (it showed 100 and said nothing left out). A chain of
    exactly the cap is whole and not cut."""
    ada: Client = team.clients["ada"]
    steps = MAX_PROVENANCE_ITEMS + 2
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        rows = conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'note', 'Version ' || i, '', 1, 'told', '{assist}',"
            "  %(ada)s::uuid, timestamptz '2025-01-01' + i * interval '1 minute',"
            "  timestamptz '2025-01-01' + i * interval '1 minute'"
            " FROM generate_series(0, %(steps)s) AS i RETURNING id, title",
            {"ada": team.members["ada"], "steps": steps},
        ).fetchall()
        ids = [str(i) for i, _ in sorted(rows, key=lambda r: int(r[1].split()[1]))]
        # Each version superseded by the next: version 0 is the oldest.
        conn.execute(
            "UPDATE memory m SET superseded_by_id = n.next::uuid"
            " FROM unnest(%s::text[], %s::text[]) AS n(id, next) WHERE m.id = n.id::uuid",
            (ids[:-1], ids[1:]),
        )
    newest, oldest = ada.read([ids[-1]]).memories[0], ada.read([ids[0]]).memories[0]
    assert [r.id for r in newest.supersedes] == ids[-2 : -2 - MAX_PROVENANCE_ITEMS : -1]
    assert newest.provenance_cut and newest.omitted.supersedes >= 1
    assert [r.id for r in oldest.superseded_by] == ids[1 : 1 + MAX_PROVENANCE_ITEMS]
    assert oldest.provenance_cut and oldest.omitted.superseded_by >= 1
    middle = ada.read([ids[1]]).memories[0]
    assert [r.id for r in middle.supersedes] == [ids[0]]
    assert len(middle.superseded_by) == MAX_PROVENANCE_ITEMS
    assert middle.provenance_cut and middle.omitted.superseded_by >= 1
    # Exactly the cap: the whole chain, nothing cut.
    exact = ada.read([ids[2]]).memories[0]
    assert len(exact.superseded_by) == MAX_PROVENANCE_ITEMS
    assert not exact.provenance_cut and exact.omitted.superseded_by == 0
    assert [r.id for r in exact.supersedes] == [ids[1], ids[0]]
