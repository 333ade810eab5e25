"""A memory superseded by one the caller may not see reads to them as current
(design §4): no answer may say that a successor exists. Its revision history
(read's `revisions`) and the timelines (the workspace's, an
entity's, an episode's) held the supersede, with who made it and the reason
given, for every reader of the memory. A supersede shows only to a caller who
sees the memory as superseded through it: its successor, or one after it, is
one they may see (or was, when it has been forgotten since)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp, Session
from tests.conftest import Team, remember_robin, wait_for
from tests.recall.test_expiry_gate import MODES, backdate, found, in_no_mode
from tests.surfaces.dedup_data import NEAR_DUPLICATES, wait_embedded
from tests.surfaces.entity_data import write_robins

pytestmark = pytest.mark.integration

SECRET = "reorg kept quiet until Friday"
START = "2026-01-05T09:00:00Z"


def _revisions(client: Client, memory_id: str) -> list[tuple[int, int, str]]:
    (m,) = client.read([memory_id]).memories
    return [(r.revision, r.action, r.reason) for r in m.revisions]


def _supersedes(client: Client, memory_id: str) -> list[str]:
    (m,) = client.read([memory_id]).memories
    return [r.reason for r in m.revisions if r.action == cpb.REVISION_ACTION_SUPERSEDE]


def _timelines(client: Client, entity: str, episode: str) -> dict[str, list[Any]]:
    def events(**subject: str) -> list[Any]:
        return [(e.kind, e.memory_id, e.summary) for e in client.timeline(**subject).events]

    return {
        "workspace": events(),
        "entity": events(entity_id=entity),
        "episode": events(episode_id=episode),
    }


def _memory_in_episode(team: Team) -> tuple[Any, str, str]:
    """Bob's workspace memory M about Robin, in an episode everyone sees."""
    bob = team.clients["bob"]
    episode = bob.create_episode("Kickoff", START, audience_to="workspace").episode_id
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace", episode_id=episode)
    robin = next(x.entity_id for x in m.memory.mentions if x.name == "Robin Goodwin")
    return m.memory, robin, episode


def test_a_supersede_by_a_successor_hidden_from_the_reader_is_in_no_answer(
    team: Team,
) -> None:
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m, robin, episode = _memory_in_episode(team)
    before = {who: _timelines(team.clients[who], robin, episode) for who in ("bob", "cy")}
    history = _revisions(bob, m.id)

    s = ada.supersede(
        m.id, m.revision, "Robin hands Apollo over", reason=SECRET,
        audience_to=team.members["ada"],
    ).memory  # fmt: skip

    for who, client in (("bob", bob), ("cy", cy)):
        # As before the supersede, its revision number too.
        assert _revisions(client, m.id) == history, who
        (read,) = client.read([m.id]).memories
        assert read.superseded_by_id == ""
        assert _timelines(client, robin, episode) == before[who], who
        found = client.recall("Robin leads Apollo", mode="lexical", skip_rerank=True).outcome
        (row,) = [r.memory for r in found.results if r.memory.id == m.id]
        assert SECRET not in [r.reason for r in row.revisions], who
    # Ada sees her successor, and so the supersede, with its reason.
    assert ada.read([m.id]).memories[0].superseded_by_id == s.id
    assert _supersedes(ada, m.id) == [SECRET]
    for kind, events in _timelines(ada, robin, episode).items():
        assert ("supersession", m.id, f"superseded: {SECRET}") in events, kind

    # Bob, who reads M as current, supersedes it in turn (M -> his -> Ada's):
    # his own supersede shows to him and to cy, Ada's still to neither.
    (current,) = bob.read([m.id]).memories
    bob.supersede(
        m.id, current.revision, "Robin leads Apollo and Hermes", reason="Hermes joined",
        audience_to="workspace",
    )  # fmt: skip
    for who, client in (("bob", bob), ("cy", cy)):
        assert _supersedes(client, m.id) == ["Hermes joined"], who
        timelines = _timelines(client, robin, episode)
        for kind, events in timelines.items():
            summaries = [e[2] for e in events if e[0] == "supersession"]
            assert summaries == ["superseded: Hermes joined"], (who, kind)
    assert _supersedes(ada, m.id) == [SECRET, "Hermes joined"]


def test_a_supersede_shows_to_whoever_sees_a_successor_along_its_chain(team: Team) -> None:
    """M superseded by Ada's private draft, the draft by a workspace memory:
    M reads to Bob as superseded by that memory, and so its supersede shows."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    m = bob.remember("The build server is in rack four", audience_to="workspace").memory
    draft = ada.supersede(
        m.id, m.revision, "Rack nine, maybe", reason="draft", audience_to=team.members["ada"]
    ).memory
    assert _supersedes(bob, m.id) == []
    final = ada.supersede(
        draft.id, draft.revision, "The build server is in rack nine", reason="moved",
        audience_to="workspace",
    ).memory  # fmt: skip
    (read,) = bob.read([m.id]).memories
    assert read.superseded_by_id == final.id
    assert _supersedes(bob, m.id) == ["draft"]
    assert "superseded: draft" in [e.summary for e in bob.timeline().events]


def test_a_forgotten_successor_leaves_the_supersede_to_those_who_saw_it(team: Team) -> None:
    """Its revision history keeps the supersede (the memory is current again):
    for whoever might see the successor, never for whoever might not."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    shared = bob.remember("Standup at nine", audience_to="workspace").memory
    s = bob.supersede(shared.id, shared.revision, "Standup at ten", reason="later").memory
    hidden = bob.remember("Retro on Friday", audience_to="workspace").memory
    h = ada.supersede(
        hidden.id, hidden.revision, "Retro on Monday", reason=SECRET,
        audience_to=team.members["ada"],
    ).memory  # fmt: skip
    bob.forget(s.id, "wrong")
    ada.forget(h.id, "wrong")
    for client in (bob, cy):
        assert _supersedes(client, shared.id) == ["later"]
        assert _supersedes(client, hidden.id) == []
        assert f"superseded: {SECRET}" not in [e.summary for e in client.timeline().events]
    assert _supersedes(ada, hidden.id) == [SECRET]


def test_the_owners_status_counts_a_memory_current_for_her_as_current(team: Team) -> None:
    """GetStatus counts the memories the owner may see: one whose successors
    are all hidden from her is current to her (listed, recalled), so it is
    counted as before the supersede, and its vector with it; one superseded
    for her is not."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    runbook = bob.remember("Restart the gateway first", audience_to="workspace").memory
    bob.remember("Lunch is at noon", audience_to="workspace")
    before = ada.wait_embedded(timeout=120)
    assert (before.memories, before.embedded) == (2, 2)

    bob.supersede(
        runbook.id, runbook.revision, "Restart the store first", reason="drafting",
        audience_to=team.members["bob"],
    )  # fmt: skip
    listed = [m.id for m in ada.list_memories().memories]
    assert runbook.id in listed and len(listed) == 2
    after = ada.wait_embedded(timeout=120)
    assert (after.memories, after.embedded) == (before.memories, before.embedded)

    # Superseded by one she sees, it is no longer counted; its successor is.
    (current,) = ada.read([runbook.id]).memories
    ada.supersede(current.id, current.revision, "Restart everything", audience_to="workspace")
    assert ada.wait_embedded(timeout=120).memories == 2


def test_a_hidden_supersede_renews_nothing_for_whoever_reads_the_memory_current(
    stack: Stack, team: Team
) -> None:
    """A supersede set the old memory's updated_at to its time: behind the
    workspace's expiry gate, Bob's old memory came back into Cy's recall the
    moment Ada superseded it by a draft only she may see, and Cy's read showed
    it changed that day: both told of a successor hidden from Cy."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    tag = uuid.uuid4().hex[:8]
    old = bob.remember(f"Harbour office {tag}", f"zq{tag} We move to 22 Harbour Street.",
                       audience_to="workspace").memory  # fmt: skip
    new = bob.remember(f"Harbour parking {tag}", f"zq{tag} Harbour Street has 12 spaces.",
                       audience_to="workspace").memory  # fmt: skip
    query = f"zq{tag} Harbour Street"
    ada.wait_embedded(timeout=120)
    backdate(stack, team, old.id, 40)
    was = cy.read([old.id]).memories[0].updated_at.ToDatetime()
    ada.update_settings(expiry_days=30)
    wait_for(lambda: in_no_mode(cy, query, old.id), "the gate", 30)

    ada.supersede(old.id, old.revision, "Harbour office, draft", audience_to=team.members["ada"])
    for mode in MODES:
        got = found(cy, query, mode)
        assert new.id in got, mode
        assert old.id not in got, mode
    assert cy.read([old.id]).memories[0].updated_at.ToDatetime() == was


def _pairs(client: Client) -> set[frozenset[str]]:
    return {frozenset((p.first.id, p.second.id)) for p in client.duplicate_pairs().pairs}


def _on_the_page(stack: Stack, client: Client, form: dict[str, str]) -> None:
    """One decision of the review page, as a signed-in session sends it."""
    now = time.monotonic()
    session = Session(client, "csrf", now, now)
    ReviewApp(stack.gateway).decide(session, form, "assist")
    assert session.flash and session.flash[-1][0] == "ok", session.flash


def test_duplicate_review_takes_a_memory_with_hidden_successors_as_current(
    stack: Stack, team: Team
) -> None:
    """Cy's duplicate pairs left out a memory Ada superseded by a draft only
    she may see, and keeping both on the revisions Cy read was refused as
    superseded: both told Cy of the draft. For Cy the memory is current:
    proposed as before, and each of the page's decisions on it is taken."""
    ada, cy = team.clients["ada"], team.clients["cy"]
    texts = NEAR_DUPLICATES[:3]
    pairs = [
        tuple(cy.remember(*side, audience_to="workspace").memory for side in pair) for pair in texts
    ]
    wait_embedded(stack, team, [m.id for pair in pairs for m in pair])
    proposed = _pairs(cy)
    assert {frozenset(m.id for m in pair) for pair in pairs} <= proposed

    drafts = {}
    for first, _ in pairs:
        drafts[first.id] = ada.supersede(
            first.id, first.revision, f"Draft {uuid.uuid4().hex}", reason=SECRET,
            audience_to=team.members["ada"],
        ).memory.id  # fmt: skip
    assert _pairs(cy) == proposed
    (kept, other), (retired, keep), (forgotten, _) = (
        [cy.read([m.id]).memories[0] for m in pair] for pair in pairs
    )

    # Keep both, on the revisions Cy read.
    _on_the_page(stack, cy, {
        "action": "keep", "first_id": kept.id, "second_id": other.id,
        "first_revision": str(kept.revision), "second_revision": str(other.revision),
    })  # fmt: skip
    assert frozenset((kept.id, other.id)) not in _pairs(cy)
    # Supersede one by the other's text: Cy's successor goes where her view
    # of the chain ends, before Ada's draft.
    _on_the_page(stack, cy, {
        "action": "supersede", "retire_id": retired.id, "keep_id": keep.id,
        "retire_revision": str(retired.revision), "keep_revision": str(keep.revision),
    })  # fmt: skip
    successor = cy.read([retired.id]).memories[0].superseded_by_id
    assert cy.read([successor]).memories[0].body == keep.body
    assert ada.read([successor]).memories[0].superseded_by_id == drafts[retired.id]
    # Forget one, on the revision Cy read.
    _on_the_page(stack, cy, {
        "action": "forget", "target_id": forgotten.id,
        "target_revision": str(forgotten.revision), "reason": "a duplicate",
    })  # fmt: skip
    with pytest.raises(grpc.RpcError) as gone:
        cy.read([forgotten.id])
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    assert not _pairs(cy) & {frozenset(m.id for m in pair) for pair in pairs}


def test_entity_pairs_are_drawn_from_memories_current_for_the_owner(
    stack: Stack, team: Team
) -> None:
    """The entity pairs were drawn from the newest memories with no successor
    at all: Bob superseding his workspace memory by a draft only he may see
    took it out, and with it the pair Ada was proposed (Robin and Robin
    Goodwin), though the memory reads to her as current."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    robins = write_robins(bob, audience_to="workspace")
    # Embedded first: the pair's context cosine reads the window's vectors.
    wait_embedded(stack, team, [robins["first_memory"], robins["second_memory"]])
    before = json_format.MessageToDict(ada.entity_pairs())
    proposed = [{p["first"]["id"], p["second"]["id"]} for p in before.get("pairs", [])]
    assert {robins["goodwin"], robins["robin"]} in proposed

    (second,) = bob.read([robins["second_memory"]]).memories
    draft = bob.supersede(
        second.id, second.revision, "Robin on Apollo, draft", reason=SECRET,
        audience_to=team.members["bob"],
    ).memory  # fmt: skip
    wait_embedded(stack, team, [draft.id])
    assert json_format.MessageToDict(ada.entity_pairs()) == before


def test_the_revision_a_reader_sees_counts_only_the_changes_they_see(team: Team) -> None:
    """A supersede moved the memory's revision on for every reader, so one
    who may not see the successor read revision 2 beside a history of one
    revision (a change they were not shown), and a correct after it as
    revision 3: the number told of the hidden successor. Each reader now
    reads the revision as the changes they see number it, everywhere a
    revision shows (read, recall, its history, the timelines, a refused
    compare-and-set), and gives that number back to change it."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m = bob.remember("The build server is in rack four", audience_to="workspace").memory
    ada.supersede(
        m.id, m.revision, "Rack nine, maybe", reason=SECRET, audience_to=team.members["ada"]
    )

    def seen(client: Client) -> tuple[int, list[tuple[int, int]]]:
        (read,) = client.read([m.id]).memories
        return read.revision, [(r.revision, r.action) for r in read.revisions]

    create, correct = cpb.REVISION_ACTION_CREATE, cpb.REVISION_ACTION_CORRECT
    for client in (bob, cy):
        assert seen(client) == (1, [(1, create)])
        hits = client.recall("build server rack", mode="lexical", skip_rerank=True).outcome
        assert [r.memory.revision for r in hits.results if r.memory.id == m.id] == [1]

    fixed = bob.correct(m.id, 1, "typo", body="It is in rack four, shelf two.").memory
    assert fixed.revision == 2
    for client in (bob, cy):
        assert seen(client) == (2, [(1, create), (2, correct)])
        summaries = [e.summary for e in client.timeline().events if e.kind == "correction"]
        assert summaries == ["corrected to revision 2: typo"]
    assert seen(ada) == (
        3, [(1, create), (2, cpb.REVISION_ACTION_SUPERSEDE), (3, correct)],
    )  # fmt: skip
    assert [e.summary for e in ada.timeline().events if e.kind == "correction"] == [
        "corrected to revision 3: typo"
    ]

    # A stale revision is refused with the reader's own current one.
    with pytest.raises(grpc.RpcError) as refused:
        bob.correct(m.id, 1, "again", body="Shelf three.")
    assert refused.value.code() == grpc.StatusCode.ABORTED
    assert "is at revision 2, not 1" in str(refused.value.details())
    assert bob.forget(m.id, "moved", expected_revision=2).forgotten_at.seconds > 0
