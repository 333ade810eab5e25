"""Forgetting a memory in the middle of a supersession chain (design §7.1):
the memory it replaced is replaced by its own successor, not current again.
Office in Lyon, superseded by Paris (a typo), superseded by Nice: forgetting
Paris must leave Nice the one current memory, not bring Lyon back beside it
(two offices at once, and the supersede of Lyon lost)."""

from __future__ import annotations

import threading

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, remember_robin, wait_for

pytestmark = pytest.mark.integration


def test_forgetting_the_middle_of_a_chain_keeps_the_first_replaced(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    lyon = remember_robin(ada, "Office in Lyon", audience_to="workspace").memory
    paris = ada.supersede(lyon.id, 1, "Office in Paris", reason="moved").memory
    nice = ada.supersede(paris.id, 1, "Office in Nice", reason="a typo").memory

    ada.forget(paris.id, "Paris was never the office")

    first, last = bob.read([lyon.id, nice.id]).memories
    assert first.superseded_by_id == nice.id
    assert [m.id for m in first.superseded_by] == [nice.id]
    assert [m.id for m in last.supersedes] == [lyon.id]
    assert last.superseded_by_id == ""
    found = bob.recall("office", mode="lexical").outcome.results
    assert [r.memory.id for r in found] == [nice.id]
    # The graph states Robin's city once, by the current memory.
    (card,) = bob.lookup("Robin Goodwin").entities
    assert [(a.value, a.memory_id) for a in card.attributes] == [("Lisbon", nice.id)]
    # Lyon is still superseded: it cannot change.
    lyon_now = ada.read([lyon.id]).memories[0]
    assert lyon_now.revision == 2


def test_forgetting_the_last_of_a_chain_makes_the_one_before_current(team: Team) -> None:
    ada = team.clients["ada"]
    lyon = ada.remember("Office in Lyon", audience_to="workspace").memory
    paris = ada.supersede(lyon.id, 1, "Office in Paris", reason="moved").memory
    nice = ada.supersede(paris.id, 1, "Office in Nice", reason="moved again").memory

    ada.forget(nice.id, "never moved to Nice")

    first, middle = ada.read([lyon.id, paris.id]).memories
    assert first.superseded_by_id == paris.id
    assert middle.superseded_by_id == ""
    found = ada.recall("office", mode="lexical").outcome.results
    assert [r.memory.id for r in found] == [paris.id]


def _waiting(stack: Stack, database: str) -> int:
    """Backends of the workspace's database waiting for a lock."""
    rows = dbutil.query(
        stack, database,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'",
    )  # fmt: skip
    return int(rows[0][0])


def test_two_forgets_along_a_chain_at_once_leave_no_link_to_a_tombstone(
    stack: Stack, team: Team
) -> None:
    """Paris and Nice forgotten at once, Nice's forget looking for what Nice
    replaced while Paris's forget, uncommitted, relinks Lyon to Nice: Lyon must
    end current, not linked to Nice's tombstone (which reads as current yet
    refuses every change as superseded). The test holds Lyon's row so that
    Paris's forget stops there, mid-way, while Nice's runs."""
    ada = team.clients["ada"]
    lyon = ada.remember("Office in Lyon", audience_to="workspace").memory
    paris = ada.supersede(lyon.id, 1, "Office in Paris", reason="moved").memory
    nice = ada.supersede(paris.id, 1, "Office in Nice", reason="moved again").memory
    errors: list[BaseException] = []

    def forget(memory_id: str) -> None:
        try:
            ada.forget(memory_id, "never")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as holder:
        holder.execute("SELECT 1 FROM memory WHERE id = %s FOR UPDATE", (lyon.id,))
        first = threading.Thread(target=forget, args=(paris.id,))
        first.start()
        wait_for(lambda: _waiting(stack, team.database_name) >= 1, "Paris's forget at Lyon")
        second = threading.Thread(target=forget, args=(nice.id,))
        second.start()
        wait_for(lambda: _waiting(stack, team.database_name) >= 2, "Nice's forget waiting")
        holder.rollback()
    first.join(60)
    second.join(60)
    assert errors == []
    rows = dbutil.query(
        stack, team.database_name, "SELECT superseded_by_id FROM memory WHERE id = %s",
        (lyon.id,),
    )  # fmt: skip
    assert rows == [(None,)]
    assert ada.read([lyon.id]).memories[0].superseded_by_id == ""
    assert ada.correct(lyon.id, 2, "still here", body="Rue de la Paix").memory.revision == 3


def test_a_chain_hidden_in_the_middle_is_superseded_for_who_sees_a_later_one(
    team: Team,
) -> None:
    """Lyon (the workspace's) superseded by Paris (Ada's own draft), Paris by
    Nice (published to the workspace): Bob, who may not see Paris, sees Nice
    replace Lyon, one office, not two current at once."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    lyon = remember_robin(ada, "Office in Lyon", audience_to="workspace").memory
    draft = ada.supersede(
        lyon.id, 1, "Office in Paris", reason="draft", audience_to=team.members["ada"]
    ).memory
    nice = ada.supersede(draft.id, 1, "Office in Nice", reason="publish", audience_to="workspace")

    first = bob.read([lyon.id]).memories[0]
    assert first.superseded_by_id == nice.memory.id
    assert [m.id for m in first.superseded_by] == [nice.memory.id]
    found = [r.memory.id for r in bob.recall("office", mode="lexical").outcome.results]
    assert found == [nice.memory.id]
    every = bob.recall("office", mode="lexical", include_superseded=True).outcome.results
    assert {r.memory.id for r in every} == {lyon.id, nice.memory.id}
    # Ada, who sees the draft, reads it as Lyon's successor, as before.
    assert ada.read([lyon.id]).memories[0].superseded_by_id == draft.id
    assert [m.id for m in ada.read([lyon.id]).memories[0].superseded_by] == [
        draft.id,
        nice.memory.id,
    ]
    # A chain hidden all the way still reads as current (the draft alone).
    alone = ada.remember("Desk by the window", audience_to="workspace").memory
    ada.supersede(alone.id, 1, "Desk by the door", audience_to=team.members["ada"])
    assert bob.read([alone.id]).memories[0].superseded_by_id == ""
    assert [r.memory.id for r in bob.recall("desk", mode="lexical").outcome.results] == [alone.id]


def test_a_chain_hidden_in_the_middle_reads_the_same_both_ways(team: Team) -> None:
    """Bob reads Lyon as superseded by Nice past Ada's hidden draft, so he
    reads Nice as superseding Lyon (design §5.10: the chain both ways)."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    lyon = ada.remember("Office in Lyon", audience_to="workspace").memory
    draft = ada.supersede(lyon.id, 1, "Office in Paris", audience_to=team.members["ada"]).memory
    mid = ada.supersede(draft.id, 1, "Office in Nice", audience_to="workspace").memory
    last = ada.supersede(mid.id, 1, "Office in Nice, 2nd floor").memory

    nice, newest = bob.read([mid.id, last.id]).memories
    assert [m.id for m in nice.supersedes] == [lyon.id]
    assert [m.id for m in newest.supersedes] == [mid.id, lyon.id]
    # Ada, who sees the draft, reads it in its place.
    assert [m.id for m in ada.read([last.id]).memories[0].supersedes] == [
        mid.id,
        draft.id,
        lyon.id,
    ]
