"""Recall's episode neighbours against the real stack (docs/recall.md,
"Episode neighbours"): the store's walk names, for the first admitted rows,
the memory just before and just after each in its episode among those the
caller may see; hybrid recall lifts those the arms found."""

from __future__ import annotations

import math
from typing import Any

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron.vocabulary import EPISODE_NEIGHBOUR_WEIGHT, EPISODE_SEED_POWER
from services.rank.peers import StoreClient
from tests import internal
from tests.recall.conftest import RecallStack, Workspace

pytestmark = pytest.mark.integration


def caller(ws: Workspace, member_id: str, owner: bool) -> cpb.Caller:
    return cpb.Caller(
        workspace_id=ws.id,
        member_id=member_id,
        role=cpb.ROLE_OWNER if owner else cpb.ROLE_MEMBER,
        purpose=cpb.PURPOSE_ASSIST,
    )


def test_the_walk_names_visible_admitted_neighbours_only(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace("bea")
    owner = ws.owner.client
    episode = owner.create_episode(
        "Boat club meeting", "2026-05-02T18:00:00Z", audience_to="workspace"
    ).episode_id

    def note(title: str, private: bool = False) -> str:
        return str(
            owner.remember(
                title,
                f"{title}.",
                audience_to=None if private else "workspace",
                episode_id=episode,
            ).memory.id
        )

    first = note("Kayak storage moves to boathouse B")
    hidden = note("Owner's own salary note", private=True)
    second = note("Trailer booked for the regatta")
    third = note("Life jackets need checking")
    outside = str(
        owner.remember("Regatta results", "Third place.", audience_to="workspace").memory.id
    )
    store = StoreClient(internal.channel(recall_stack.stack, "store"), 10.0)
    bea = caller(ws, ws.members["bea"].id, owner=False)

    # Bea cannot see the private note: the neighbour after the first note is
    # the next one she may see, and nothing tells her a note lay between.
    candidates = [first, second, third, outside, hidden]
    walked = store.walk(bea, candidates, 0, None, neighbours_of=1)
    assert walked.admitted == [first, second, third, outside]
    assert list(walked.neighbours) == [(first, second)]
    # Neighbours past the hydrated head are read with the walk.
    assert set(walked.memories) == {second}

    # The owner sees the private note: it is the neighbour, when it is a candidate.
    me = caller(ws, ws.owner.id, owner=True)
    assert list(store.walk(me, candidates, 0, None, neighbours_of=1).neighbours) == [
        (first, hidden)
    ]
    # A neighbour the arms did not find is not named.
    assert list(store.walk(me, [first, second], 0, None, neighbours_of=1).neighbours) == []
    # Two seeds: each one's neighbours, the one before first; a seed is never
    # another seed's neighbour.
    walked = store.walk(bea, [second, third, first, outside], 2, None, neighbours_of=2)
    assert list(walked.neighbours) == [(second, first)]
    # A memory outside any episode has none; none asked, none given.
    assert list(store.walk(bea, [outside, first], 0, None, neighbours_of=1).neighbours) == []
    assert list(store.walk(bea, candidates, 0, None).neighbours) == []
    # A forgotten neighbour is passed over like a hidden one.
    owner.forget(second, reason="trailer cancelled")
    assert list(store.walk(bea, [first, third], 0, None, neighbours_of=1).neighbours) == [
        (first, third)
    ]


def test_a_neighbour_the_walk_refuses_is_passed_over(recall_stack: RecallStack) -> None:
    """A memory the caller may read but the walk refuses (it is about one
    they may not see) is passed over like a hidden one: the next memory the
    walk admits is the neighbour, so the lift does not depend on what the
    caller may not see (docs/recall.md, step 5a)."""
    ws = recall_stack.workspace("bea")
    owner = ws.owner.client
    episode = owner.create_episode(
        "Boat club meeting", "2026-05-02T18:00:00Z", audience_to="workspace"
    ).episode_id
    private = str(owner.remember("Owner's appraisal", "Only the owner.").memory.id)

    def note(title: str, about: tuple[str, ...] = ()) -> str:
        return str(
            owner.remember(
                title, f"{title}.", audience_to="workspace", episode_id=episode, about=about
            ).memory.id
        )

    first = note("Kayak storage moves to boathouse B")
    refused = note("Kayak budget, from the appraisal", about=(private,))
    second = note("Trailer booked for the regatta")
    store = StoreClient(internal.channel(recall_stack.stack, "store"), 10.0)
    bea = caller(ws, ws.members["bea"].id, owner=False)
    walked = store.walk(bea, [first, second, refused], 0, None, neighbours_of=1)
    assert walked.admitted == [first, second]
    assert list(walked.neighbours) == [(first, second)]
    # The owner, whom the walk admits it, gets it as the neighbour.
    me = caller(ws, ws.owner.id, owner=True)
    assert list(store.walk(me, [first, second, refused], 0, None, neighbours_of=1).neighbours) == [
        (first, refused)
    ]


def test_an_episode_the_caller_may_not_see_lends_no_neighbours(
    recall_stack: RecallStack,
) -> None:
    """Shared memories in an episode private to their author (as capture
    files a speaker's turns): another member reads them with no episode, and
    the walk names no neighbour of theirs, so no score tells they sit
    together in it."""
    ws = recall_stack.workspace("bea")
    owner = ws.owner.client
    episode = owner.create_episode("Owner's own day", "2026-05-03T09:00:00Z").episode_id
    shared = [
        str(owner.remember(t, f"{t}.", audience_to="workspace", episode_id=episode).memory.id)
        for t in ("Boathouse keys are with the harbour master", "Boathouse alarm code changed")
    ]
    store = StoreClient(internal.channel(recall_stack.stack, "store"), 10.0)
    bea = caller(ws, ws.members["bea"].id, owner=False)
    walked = store.walk(bea, shared, 0, None, neighbours_of=1)
    assert walked.admitted == shared
    assert list(walked.neighbours) == []
    # The owner, who sees the episode, gets them as neighbours.
    me = caller(ws, ws.owner.id, owner=True)
    assert list(store.walk(me, shared, 0, None, neighbours_of=1).neighbours) == [
        (shared[0], shared[1])
    ]


@pytest.mark.parametrize("bad", [-1, 11])
def test_neighbours_of_out_of_range_names_the_field(recall_stack: RecallStack, bad: int) -> None:
    ws = recall_stack.workspace()
    memory_id = str(ws.owner.client.remember("Anything", "At all.").memory.id)
    stub = store_pb2_grpc.StoreServiceStub(internal.channel(recall_stack.stack, "store"))
    with pytest.raises(grpc.RpcError) as info:
        stub.AdmitCandidates(
            store_pb2.AdmitCandidatesRequest(
                caller=caller(ws, ws.owner.id, owner=True), ids=[memory_id], neighbours_of=bad
            ),
            timeout=10,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "neighbours_of" in (info.value.details() or "")


def arms_only(scores: Any) -> float:
    return float(sum(1.0 / (60 + r) for r in (scores.lexical_rank, scores.dense_rank) if r))


def test_hybrid_recall_lifts_the_first_rows_neighbours(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    # A dated conversation, remembered as it was said: it becomes one episode.
    said = [
        "The regatta starts at nine on Saturday",
        "Mia will bring the club's two kayaks",
        "The kayaks go on the trailer on Friday evening",
        "Tom asked who has the trailer keys",
        "The keys hang in the boathouse office",
        "Lunch after the regatta is at the harbour cafe",
    ]
    order = [
        str(
            c.remember(
                line, f"{line}.", audience_to="workspace", occurred_at="2026-05-01T18:00:00Z"
            ).memory.id
        )
        for line in said
    ]
    for line in ("The printer on floor two is out of toner", "Invoices are due on the 5th"):
        c.remember(line, f"{line}.", audience_to="workspace")
    c.wait_embedded()

    query = "when do the kayaks go on the trailer"
    hybrid = recall_stack.dense_recall(c, query, mode="hybrid", limit=50)
    rows = {r.memory.id: r.scores for r in hybrid.results}
    for s in rows.values():
        assert math.isclose(s.fused_score, arms_only(s) + s.episode_lift, rel_tol=1e-9)

    # The first two rows of RRF over the arms alone are the seeds; the rows
    # next to them in the conversation, when returned, are the lifted ones,
    # each by its seed's agreement (a share of 2) cubed.
    def rrf_key(item: tuple[str, Any]) -> tuple[float, int, int, str]:
        memory_id, s = item
        ranks = [r for r in (s.lexical_rank, s.dense_rank) if r]
        return (-arms_only(s), min(ranks), s.lexical_rank or 10**9, memory_id)

    seeds = [i for i, _ in sorted(rows.items(), key=rrf_key)[:2]]
    expected: list[str] = []
    seed_of: dict[str, str] = {}
    for seed in seeds:
        if seed in order:
            at = order.index(seed)
            for near in order[max(at - 1, 0) : at] + order[at + 1 : at + 2]:
                if near in rows and near not in seeds and near not in expected:
                    expected.append(near)
                    seed_of[near] = seed
    for rank, near in enumerate(expected, start=1):
        share = rows[seed_of[near]].agreement_score / 2
        lift = EPISODE_NEIGHBOUR_WEIGHT * share**EPISODE_SEED_POWER / (60 + rank)
        assert math.isclose(rows[near].episode_lift, lift, rel_tol=1e-9)
    assert all(rows[i].episode_lift == 0.0 for i in rows if i not in seed_of)
    lifted = sorted((s.episode_rank, i) for i, s in rows.items() if s.episode_rank)
    assert [i for _, i in lifted] == expected
    assert [rank for rank, _ in lifted] == list(range(1, len(expected) + 1))
    assert expected, "the conversation's first rows have neighbours the arms found"

    # The single arms are their own: nothing lifted.
    lexical = c.recall(query, mode="lexical", limit=50).outcome
    dense = recall_stack.dense_recall(c, query, mode="dense", limit=50)
    for outcome in (lexical, dense):
        assert outcome.results
        assert all(r.scores.episode_rank == 0 for r in outcome.results)
