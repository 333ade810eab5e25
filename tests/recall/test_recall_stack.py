"""Recall end to end through the gateway, against real processes: embedded
Postgres, store, embed (ONNX), rank, gateway and the embedding job."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, embed_pb2_grpc
from recallatron.vocabulary import EPISODE_NEIGHBOUR_WEIGHT
from tests import internal
from tests.recall.conftest import RecallStack, Workspace, wait_for

pytestmark = pytest.mark.integration

LEXICAL, DENSE, HYBRID = cpb.RECALL_MODE_LEXICAL, cpb.RECALL_MODE_DENSE, cpb.RECALL_MODE_HYBRID


def remember(client: Client, title: str, body: str = "", **kwargs: Any) -> str:
    kwargs.setdefault("audience_to", "workspace")
    return str(client.remember(title, body, **kwargs).memory.id)


def ids(outcome: Any) -> list[str]:
    return [r.memory.id for r in outcome.results]


def fused_of(scores: Any) -> float:
    arms = sum(1.0 / (60 + r) for r in (scores.lexical_rank, scores.dense_rank) if r)
    # The lift's own rule is checked where the seeds are known
    # (test_episode_neighbours); here only its bounds: never more than a seed
    # in full agreement gives at its rank, and only with a rank.
    most = EPISODE_NEIGHBOUR_WEIGHT / (60 + scores.episode_rank) if scores.episode_rank else 0.0
    assert 0.0 <= scores.episode_lift <= most
    return arms + scores.episode_lift


# -- the lexical arm: the 15% rule ----------------------------------------------------


def test_the_fifteen_percent_rule(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    m = {
        "kickoff": remember(c, "Project alpha kickoff", "The alpha kickoff is on Monday."),
        "notes": remember(c, "Project notes", "General project notes for the team."),
        "retro": remember(c, "Project retro", "Retro notes: what went well for the team."),
        "staffing": remember(c, "Project staffing", "Who in the team works on which project."),
        "budget": remember(c, "Budget for travel", "The travel budget is 2000 euros."),
    }
    for title, body in [
        ("Cat food", "The cat eats salmon flavoured kibble."),
        ("Garden hose", "The garden hose leaks near the tap."),
        ("Piano lessons", "Piano lessons are on Thursday evenings."),
        ("Bicycle repair", "The bicycle needs a new chain."),
        ("Tea selection", "Green tea and oolong are in the cupboard."),
    ]:
        remember(c, title, body)

    def found(query: str) -> set[str]:
        outcome = c.recall(query, mode="lexical", limit=50).outcome
        assert outcome.counts.lexical == len(outcome.results)
        return set(ids(outcome))

    # Ten memories: a term in two or more (>= 15%) is dropped from three terms up.
    # "project" is in four, so only "alpha" and "budget" are searched.
    assert found("project alpha budget") == {m["kickoff"], m["budget"]}
    # Two terms: nothing is dropped.
    assert found("project alpha") == {m["kickoff"], m["notes"], m["retro"], m["staffing"]}
    # All three common: the rarest ("notes", in two) is kept.
    assert found("project team notes") == {m["notes"], m["retro"]}
    # "zebra", in none, is no stand-in for the rarest term some memory holds
    # ("team", in three): searched alone it found nothing.
    assert found("project team zebra") == {m["notes"], m["retro"], m["staffing"]}

    def holding_every_term(query: str) -> set[str]:
        outcome = c.recall(query, mode="lexical", limit=50).outcome
        return {r.memory.id for r in outcome.results if r.scores.matches_every_term}

    # Every term of the query, the dropped ones included, in any form.
    assert holding_every_term("alpha kickoff project") == {m["kickoff"]}
    assert holding_every_term("the Projects ALPHA kickoffs") == {m["kickoff"]}
    # "team" is dropped (in three), and the kickoff memory does not hold it.
    assert found("alpha kickoff team") == {m["kickoff"]}
    assert holding_every_term("alpha kickoff team") == set()
    assert holding_every_term("project alpha budget") == set()
    assert holding_every_term("budget") == {m["budget"]}


# -- the dense arm: the floor ---------------------------------------------------------


def test_the_dense_floor(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    forecast = remember(c, "Quarterly revenue forecast", "Revenue should grow 12% next quarter.")
    for title, body in [
        ("Cat food", "The cat eats salmon flavoured kibble."),
        ("Garden hose", "The garden hose leaks near the tap."),
        ("Piano lessons", "Piano lessons are on Thursday evenings."),
        ("Bicycle repair", "The bicycle needs a new chain."),
    ]:
        remember(c, title, body)
    c.wait_embedded()
    query = "how much will sales go up next quarter"

    def dense(floor: float) -> Any:
        c.update_settings(dense_floor=floor)
        outcome = recall_stack.dense_recall(c, query, mode="dense", limit=50)
        assert all(r.scores.dense_cosine >= floor for r in outcome.results)
        return outcome

    try:
        default = dense(0.30)
        assert ids(default)[0] == forecast
        assert len(default.results) < 5, "unrelated rows fall under the default floor"
        lowest = dense(0.0)
        assert ids(lowest)[0] == forecast and len(lowest.results) > len(default.results)
        nothing = dense(0.99)
        assert nothing.results == [] and nothing.dense_available
    finally:
        c.update_settings(dense_floor=0.30)


# -- modes and the workspace default ---------------------------------------------------


@pytest.fixture(scope="module")
def office(recall_stack: RecallStack) -> Iterator[tuple[Workspace, dict[str, str]]]:
    """A small embedded workspace shared by the read-only tests below."""
    ws = recall_stack.workspace("bea")
    c = ws.owner.client
    m = {
        "move": remember(c, "Office move", "We move to 22 Harbour Street on 4 November."),
        "parking": remember(c, "Parking", "Only 12 parking spaces at the new building."),
        "bikes": remember(c, "Bike room", "A locked room in the basement holds 30 bicycles."),
        "lunch": remember(c, "Friday lunch", "The company pays for a team lunch every Friday."),
        "allergy": remember(c, "Ada's allergy", "Ada has a severe peanut allergy."),
    }
    # Ten memories in all, so that a term found in one of them (10%) stays
    # under the 15% rule.
    for title, body in [
        ("Support hours", "Support answers from 08:00 to 20:00 on weekdays."),
        ("Code review rule", "Every change needs one approving review."),
        ("Laptop refresh", "Laptops are replaced every three years."),
        ("Conference budget", "Each engineer may spend 1,500 euros a year on courses."),
        ("Coffee machine", "The coffee machine on the third floor is broken."),
    ]:
        remember(c, title, body)
    c.wait_embedded()
    yield ws, m


def test_each_mode(recall_stack: RecallStack, office: tuple[Workspace, dict[str, str]]) -> None:
    ws, m = office
    c = ws.owner.client
    query = "where can I leave my bicycle at the new building"

    lexical = c.recall(query, mode="lexical", limit=20).outcome
    assert lexical.mode == LEXICAL
    assert lexical.results and all(
        r.scores.lexical_rank > 0 and r.scores.dense_rank == 0 for r in lexical.results
    )
    assert [r.scores.lexical_rank for r in lexical.results] == sorted(
        r.scores.lexical_rank for r in lexical.results
    )
    assert lexical.counts.dense == 0 and lexical.counts.lexical == len(lexical.results)

    dense = recall_stack.dense_recall(c, query, mode="dense", limit=20)
    assert dense.mode == DENSE
    assert ids(dense)[0] == m["bikes"]
    assert all(r.scores.dense_rank > 0 and r.scores.lexical_rank == 0 for r in dense.results)
    assert dense.counts.lexical == 0 and dense.counts.dense == len(dense.results)

    hybrid = recall_stack.dense_recall(c, query, mode="hybrid", limit=20)
    assert hybrid.mode == HYBRID
    lexical_ranks = {r.memory.id: r.scores.lexical_rank for r in lexical.results}
    dense_ranks = {r.memory.id: r.scores.dense_rank for r in dense.results}
    assert set(ids(hybrid)) == set(lexical_ranks) | set(dense_ranks)
    for r in hybrid.results:
        # The same arm ranks as the single-arm runs, fused by RRF (k = 60).
        assert r.scores.lexical_rank == lexical_ranks.get(r.memory.id, 0)
        assert r.scores.dense_rank == dense_ranks.get(r.memory.id, 0)
        assert math.isclose(r.scores.fused_score, fused_of(r.scores), rel_tol=1e-9)
    # The page is in the arms' agreement's order (design §5.4): each arm's
    # score from its zero (the dense floor, 0.30 here) over the best one's.
    best_lexical = max(r.scores.lexical_score for r in hybrid.results if r.scores.lexical_rank)
    best_cosine = max(r.scores.dense_cosine for r in hybrid.results if r.scores.dense_rank)
    for r in hybrid.results:
        s = r.scores
        expected = (s.lexical_score / best_lexical if s.lexical_rank else 0.0) + (
            (s.dense_cosine - 0.30) / (best_cosine - 0.30) if s.dense_rank else 0.0
        )
        assert math.isclose(s.agreement_score, expected, rel_tol=1e-6)
    agreement = [r.scores.agreement_score for r in hybrid.results]
    assert agreement == sorted(agreement, reverse=True)
    counts = hybrid.counts
    assert counts.lexical == len(lexical_ranks) and counts.dense == len(dense_ranks)
    assert counts.fused == counts.admitted == len(hybrid.results)


def test_workspace_default_mode(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    remember(c, "Office move", "We move to 22 Harbour Street on 4 November.")
    assert c.recall("office move").outcome.mode == HYBRID, "the package default"
    c.update_settings(default_recall_mode="lexical")
    wait_for(lambda: c.recall("office move").outcome.mode == LEXICAL, "the new default")
    assert c.recall("office move", mode="dense").outcome.mode == DENSE
    c.update_settings(default_recall_mode="dense")
    wait_for(lambda: c.recall("office move").outcome.mode == DENSE, "the new default")


# -- the permission walk and the counts ------------------------------------------------


def test_walk_drops_a_derived_memory_whose_source_is_forgotten(
    recall_stack: RecallStack,
) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    s1 = remember(c, "Zephyr supplier quote", "The zephyr valves cost 40 euros each.")
    s2 = remember(c, "Zephyr delivery date", "Zephyr valves arrive in week 12.")
    d1 = c.derive([s1], "Zephyr budget", "Zephyr valves for the pilot cost 400 euros.").memory.id
    d2 = c.derive([s2], "Zephyr schedule", "The zephyr pilot starts after week 12.").memory.id
    before = c.recall("zephyr", mode="lexical", limit=50).outcome
    assert set(ids(before)) == {s1, s2, d1, d2}

    c.forget(s1, reason="quote withdrawn")
    after = c.recall("zephyr", mode="lexical", limit=50).outcome
    assert set(ids(after)) == {s2, d2}
    counts = after.counts
    assert (counts.lexical, counts.dense, counts.fused, counts.admitted) == (2, 0, 2, 2)


def test_counts_never_include_what_the_caller_may_not_see(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace("bea")
    owner, bea = ws.owner.client, ws.members["bea"].client
    private = remember(owner, "Zephyr salary review", "Zephyr pay bands.", audience_to=None)
    # Visible to the workspace, but about a memory only the owner may see: the
    # walk refuses it for everyone else.
    about = remember(owner, "Zephyr review prep", "Prepare the zephyr review.", about=[private])
    audit = remember(owner, "Zephyr audit trail", "Zephyr changes logged.", purposes=["audit"])
    shared = remember(owner, "Zephyr launch", "The zephyr launch is in May.")
    owner.wait_embedded()

    mine = owner.recall("zephyr", mode="lexical", limit=50).outcome
    assert set(ids(mine)) == {private, about, shared}
    assert mine.counts.lexical == mine.counts.admitted == 3
    assert set(ids(owner.recall("zephyr", mode="lexical", purpose="audit").outcome)) == {audit}

    theirs = bea.recall("zephyr", mode="lexical", limit=50).outcome
    assert ids(theirs) == [shared]
    counts = theirs.counts
    assert (counts.lexical, counts.dense, counts.fused, counts.admitted) == (1, 0, 1, 1)

    hybrid = recall_stack.dense_recall(bea, "zephyr", mode="hybrid", limit=50)
    assert ids(hybrid) == [shared]
    counts = hybrid.counts
    assert counts.lexical <= 1 and counts.dense <= 1
    assert counts.fused == counts.admitted == 1


# -- degrade ---------------------------------------------------------------------------


def test_embed_down_degrades_and_recovers(
    recall_stack: RecallStack, office: tuple[Workspace, dict[str, str]]
) -> None:
    ws, m = office
    c = ws.members["bea"].client
    query = "Harbour Street office move"
    assert recall_stack.dense_recall(c, query, mode="hybrid").dense_available
    lexical = ids(c.recall(query, mode="lexical").outcome)

    recall_stack.stack.stop_service("embed")
    try:
        for mode, expected in (("hybrid", HYBRID), ("dense", DENSE)):
            outcome = c.recall(query, mode=mode).outcome
            assert outcome.mode == expected
            assert not outcome.dense_available
            assert "embed" in outcome.dense_unavailable_reason
            assert ids(outcome) == lexical and m["move"] in lexical
            assert outcome.counts.dense == 0
    finally:
        recall_stack.stack.start_service("embed")
        recall_stack.stack.wait_serving("embed")
    back = recall_stack.dense_recall(c, query, mode="hybrid")
    assert back.dense_available and back.dense_unavailable_reason == ""


def test_embed_too_slow_degrades(
    recall_stack: RecallStack, office: tuple[Workspace, dict[str, str]]
) -> None:
    ws, _ = office
    c = ws.owner.client
    query = "who pays for lunch"
    recall_stack.dense_recall(c, query, mode="hybrid")
    embed = recall_stack.stack.processes["embed"]
    # A frozen process keeps its connections: the call waits out its deadline.
    os.kill(embed.pid, signal.SIGSTOP)
    try:
        outcome = c.recall(query, mode="hybrid").outcome
    finally:
        os.kill(embed.pid, signal.SIGCONT)
    assert not outcome.dense_available
    assert "did not answer within" in outcome.dense_unavailable_reason
    assert outcome.results, "the lexical rows answer"
    assert recall_stack.dense_recall(c, query, mode="hybrid").dense_available


def test_a_hung_embed_service_is_not_asked_to_rerank_too(
    recall_stack: RecallStack, office: tuple[Workspace, dict[str, str]]
) -> None:
    """The cross-encoder runs in the embed service: once its query embedding
    missed the deadline, asking the cross-encoder too only waited out its own
    (2 s more on every recall, lexical ones included, cross-encoder or not)."""
    ws, _ = office
    c = ws.owner.client
    query = "who pays for lunch"
    recall_stack.dense_recall(c, query, mode="hybrid")
    embed = recall_stack.stack.processes["embed"]
    os.kill(embed.pid, signal.SIGSTOP)
    try:
        hybrid = c.recall(query, mode="hybrid").outcome
        lexical = c.recall(query, mode="lexical").outcome
    finally:
        os.kill(embed.pid, signal.SIGCONT)
    assert not hybrid.dense_available and hybrid.results and lexical.results
    for outcome in (hybrid, lexical):
        assert not outcome.reranked
        assert "cross-encoder did not answer" not in outcome.rerank_unavailable_reason
    back = recall_stack.dense_recall(c, query, mode="hybrid")
    assert "no cross-encoder configured" in back.rerank_unavailable_reason


# -- the cross-encoder -----------------------------------------------------------------


def test_no_cross_encoder_keeps_the_fused_order(
    recall_stack: RecallStack, office: tuple[Workspace, dict[str, str]]
) -> None:
    ws, _ = office
    c = ws.owner.client
    recall_stack.use_cross_encoder(None)
    query = "new building parking and bicycles"
    fused = recall_stack.dense_recall(c, query, mode="hybrid", skip_rerank=True)
    outcome = recall_stack.dense_recall(c, query, mode="hybrid")
    assert not outcome.reranked
    assert "no cross-encoder" in outcome.rerank_unavailable_reason
    assert ids(outcome) == ids(fused)


@pytest.fixture
def with_tiny_cross_encoder(recall_stack: RecallStack, tiny_cross_encoder: Path) -> Iterator[None]:
    recall_stack.use_cross_encoder(tiny_cross_encoder)
    try:
        yield
    finally:
        recall_stack.use_cross_encoder(None)


def test_tiny_cross_encoder_reorders_the_admitted_rows(
    recall_stack: RecallStack,
    office: tuple[Workspace, dict[str, str]],
    with_tiny_cross_encoder: None,
) -> None:
    ws, _ = office
    c = ws.owner.client
    query = "new building parking and bicycles"

    def reranked() -> Any:
        outcome = c.recall(query, mode="hybrid", limit=50).outcome
        return outcome if outcome.reranked and outcome.dense_available else None

    outcome = wait_for(reranked, "the cross-encoder to take part")
    # Every admitted row fits within the rerank depth (20) and the limit.
    fused = recall_stack.dense_recall(c, query, mode="hybrid", limit=50, skip_rerank=True)
    assert not fused.reranked and "request" in fused.rerank_unavailable_reason
    assert set(ids(outcome)) == set(ids(fused))

    # The order is the cross-encoder's own, asked directly for the fused rows.
    passages = [f"{r.memory.title}\n{r.memory.body}" for r in fused.results]
    with internal.channel(recall_stack.stack, "embed") as channel:
        scores = (
            embed_pb2_grpc.EmbedServiceStub(channel)
            .Rerank(embed_pb2.RerankRequest(query=query, passages=passages), timeout=30)
            .scores
        )
    expected = [
        fused.results[i].memory.id for i in sorted(range(len(scores)), key=lambda i: -scores[i])
    ]
    assert ids(outcome) == expected
    assert [r.scores.rerank_score for r in outcome.results] == sorted(
        (r.scores.rerank_score for r in outcome.results), reverse=True
    )
    for r in outcome.results:
        assert math.isclose(r.scores.fused_score, fused_of(r.scores), rel_tol=1e-9)
