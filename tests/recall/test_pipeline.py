"""The recall pipeline in isolation: RRF arithmetic, mode resolution, the
walk and the counts, degrade and rerank, with in-memory fakes of its peers."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from services.rank.pipeline import (
    Candidate,
    Degraded,
    DenseArm,
    Pipeline,
    PipelineConfig,
    QueryVector,
    Request,
    Walked,
    WorkspaceSettings,
    rrf,
)


def c(memory_id: str, rank: int, score: float = 0.5) -> Candidate:
    return Candidate(memory_id, rank, score)


# -- RRF --------------------------------------------------------------------------


def test_rrf_on_a_known_fixture() -> None:
    lexical = [c("a", 1, 0.9), c("b", 2, 0.5), c("c", 3, 0.1)]
    dense = [c("b", 1, 0.8), c("d", 2, 0.7)]
    fused = rrf(lexical, dense, k=60)
    assert [f.id for f in fused] == ["b", "a", "d", "c"]
    expected = {"b": 1 / 62 + 1 / 61, "a": 1 / 61, "d": 1 / 62, "c": 1 / 63}
    for f in fused:
        assert math.isclose(f.scores.fused_score, expected[f.id], rel_tol=1e-12)
    b = fused[0].scores
    assert (b.lexical_rank, b.lexical_score, b.dense_rank, b.dense_cosine) == (2, 0.5, 1, 0.8)
    assert fused[1].scores.dense_rank == 0 and fused[2].scores.lexical_rank == 0


def test_rrf_constant_and_ties() -> None:
    # Rank 1 of either arm alone scores the same; the better single rank,
    # then the lexical arm, then the id decide.
    fused = rrf([c("x", 1), c("y", 3)], [c("z", 1), c("w", 2)], k=1)
    assert [f.id for f in fused] == ["x", "z", "w", "y"]
    assert math.isclose(fused[0].scores.fused_score, 1 / 2)
    assert math.isclose(fused[3].scores.fused_score, 1 / 4)
    assert rrf([], []) == []
    # Equal sums from mirrored ranks: the better lexical rank first.
    mirrored = rrf([c("p", 3), c("q", 10)], [c("q", 3), c("p", 10)])
    assert [f.id for f in mirrored] == ["p", "q"]
    assert mirrored[0].scores.fused_score == mirrored[1].scores.fused_score


# -- fakes ------------------------------------------------------------------------


@dataclass
class Mem:
    id: str
    title: str
    body: str = ""


@dataclass
class FakeStore:
    lexical_rows: list[Candidate] = field(default_factory=list)
    dense_rows: list[Candidate] = field(default_factory=list)
    embeddings_available: bool = True
    dense_floor: float = 0.0
    refused: set[str] = field(default_factory=set)
    default_mode: str = "hybrid"
    rerank_depth: int = 20
    dense_error: Degraded | None = None
    cards_error: Degraded | None = None
    history_error: Degraded | None = None
    # Episode order as the store would read it: each memory's neighbours.
    episode: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    timeouts: list[float | None] = field(default_factory=list)
    # The query text each dense call carried (words), "" for none.
    dense_words: list[str] = field(default_factory=list)

    def settings(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        self.calls.append(("settings", workspace_id))
        self.timeouts.append(timeout)
        return WorkspaceSettings(self.default_mode, self.rerank_depth)

    def lexical(
        self, caller: Any, query: str, limit: int, filters: Any, timeout: float | None = None
    ) -> list[Candidate]:
        self.calls.append(("lexical", limit))
        self.timeouts.append(timeout)
        return self.lexical_rows[:limit]

    def dense(
        self,
        caller: Any,
        vector: QueryVector,
        limit: int,
        filters: Any,
        timeout: float | None = None,
        words: str = "",
    ) -> DenseArm:
        self.calls.append(("dense", limit))
        self.dense_words.append(words)
        self.timeouts.append(timeout)
        if self.dense_error is not None:
            raise self.dense_error
        return DenseArm(self.dense_rows[:limit], self.embeddings_available, self.dense_floor)

    def walk(
        self,
        caller: Any,
        ids: Sequence[str],
        hydrate: int,
        filters: Any,
        timeout: float | None = None,
        neighbours_of: int = 0,
    ) -> Walked[Mem]:
        self.calls.append(("admit", list(ids)))
        self.calls.append(("neighbours_of", neighbours_of))
        self.timeouts.append(timeout)
        admitted = [i for i in ids if i not in self.refused]
        seeds = admitted[:neighbours_of]
        near = [
            (s, n)
            for s in seeds
            for n in self.episode.get(s, [])
            if n in admitted and n not in seeds
        ]
        read = list(dict.fromkeys(admitted[:hydrate] + [n for _, n in near]))
        self.calls.append(("hydrate", read))
        return Walked(admitted, {i: Mem(i, f"title {i}", f"body {i}") for i in read}, near)

    def entity_cards(
        self, caller: Any, text: str, timeout: float | None = None
    ) -> Callable[[], Sequence[Any]]:
        self.calls.append(("cards", text))

        def cards() -> Sequence[Any]:
            if self.cards_error is not None:
                raise self.cards_error
            return [f"card for {text}"]

        return cards

    def history(
        self, caller: Any, query: str, limit: int, timeout: float | None = None
    ) -> Callable[[], Sequence[Any]]:
        self.calls.append(("history", limit))

        def turns() -> Sequence[Any]:
            if self.history_error is not None:
                raise self.history_error
            return [f"turn about {query}"]

        return turns

    def called(self, name: str) -> list[Any]:
        return [arg for n, arg in self.calls if n == name]


@dataclass
class FakeEmbed:
    embed_error: Degraded | None = None
    rerank_error: Degraded | None = None
    score: Callable[[str], float] = lambda passage: 0.0
    reranked: list[list[str]] = field(default_factory=list)
    # Every cross-encoder call, answered or failed.
    rerank_calls: int = 0

    def embed_query(self, text: str, timeout: float | None = None) -> QueryVector:
        if self.embed_error is not None:
            raise self.embed_error
        return QueryVector("model", np.zeros(384, dtype=np.float32))

    def rerank(
        self, query: str, passages: Sequence[str], timeout: float | None = None
    ) -> list[float]:
        self.rerank_calls += 1
        if self.rerank_error is not None:
            raise self.rerank_error
        self.reranked.append(list(passages))
        return [self.score(p) for p in passages]


def request(
    mode: str | None = "hybrid",
    limit: int = 10,
    skip_rerank: bool = True,
    deadline: float | None = None,
) -> Request:
    return Request(
        caller="caller",
        workspace_id="ws",
        query="where is the office",
        mode=mode,
        limit=limit,
        skip_rerank=skip_rerank,
        deadline=deadline,
    )


def pipeline(store: FakeStore, embed: FakeEmbed | None = None, **config: Any) -> Pipeline[Mem]:
    return Pipeline(store, embed or FakeEmbed(), PipelineConfig(settings_cache_seconds=0, **config))


def ids(outcome: Any) -> list[str]:
    return [r.memory.id for r in outcome.results]


# -- modes ------------------------------------------------------------------------


def test_modes_choose_the_arms() -> None:
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)], dense_rows=[c("c", 1), c("a", 2)])
    p = pipeline(store)

    lexical = p.recall(request("lexical"))
    assert lexical.mode == "lexical" and ids(lexical) == ["a", "b"]
    assert all(r.scores.dense_rank == 0 for r in lexical.results)
    assert not store.called("dense")

    dense = p.recall(request("dense"))
    assert dense.mode == "dense" and ids(dense) == ["c", "a"] and dense.dense_available
    assert all(r.scores.lexical_rank == 0 for r in dense.results)
    assert len(store.called("lexical")) == 1

    hybrid = p.recall(request("hybrid"))
    assert ids(hybrid) == ["a", "c", "b"]
    assert hybrid.results[0].scores.lexical_rank == 1 and hybrid.results[0].scores.dense_rank == 2


def test_workspace_default_applies_when_the_caller_does_not_choose() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)], dense_rows=[c("b", 1)], default_mode="dense")
    p = pipeline(store)
    assert p.recall(request(None)).mode == "dense"
    assert p.recall(request("lexical")).mode == "lexical"
    store.default_mode = ""
    assert p.recall(request(None)).mode == "hybrid"


def test_arm_limit_and_limit() -> None:
    store = FakeStore(lexical_rows=[c(f"m{i}", i) for i in range(1, 31)])
    outcome = pipeline(store, arm_limit=25).recall(request("lexical", limit=5))
    assert store.called("lexical") == [25]
    assert ids(outcome) == ["m1", "m2", "m3", "m4", "m5"]
    assert outcome.counts.lexical == 25
    with pytest.raises(ValueError):
        pipeline(store, arm_limit=300, walk_limit=500)


# -- the walk and the counts ------------------------------------------------------


def test_walk_in_rank_order_and_counts_after_it() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1), c("hidden", 2), c("b", 3)],
        dense_rows=[c("hidden", 1), c("c", 2), c("a", 3)],
        refused={"hidden"},
    )
    outcome = pipeline(store).recall(request("hybrid"))
    # One batched walk over the whole fused list, in fused order.
    assert store.called("admit") == [["hidden", "a", "c", "b"]]
    assert ids(outcome) == ["a", "c", "b"]
    assert "hidden" not in store.called("hydrate")[0]
    counts = outcome.counts
    assert (counts.lexical, counts.dense, counts.fused, counts.admitted) == (2, 2, 3, 3)


def test_nothing_found() -> None:
    store = FakeStore()
    outcome = pipeline(store).recall(request("hybrid", skip_rerank=False))
    assert outcome.results == [] and outcome.counts.admitted == 0
    assert not store.called("admit") and not store.called("hydrate")
    assert not outcome.reranked


# -- the page's order: the arms' agreement ------------------------------------------


def agreeing() -> FakeStore:
    # RRF puts b first (ranks 2 and 1) and a second (ranks 1 and 3); by the
    # scores a is the lexical arm's clear best and within 0.02 of the best
    # cosine, where b is a weak lexical match.
    return FakeStore(
        lexical_rows=[c("a", 1, 10.0), c("b", 2, 1.0)],
        dense_rows=[c("b", 1, 0.80), c("c", 2, 0.79), c("a", 3, 0.78)],
    )


def test_the_page_is_ordered_by_the_arms_agreement() -> None:
    store = agreeing()
    outcome = pipeline(store).recall(request("hybrid"))
    assert [f.id for f in rrf(store.lexical_rows, store.dense_rows)] == ["b", "a", "c"]
    assert ids(outcome) == ["a", "b", "c"]
    agreement = {r.memory.id: r.scores.agreement_score for r in outcome.results}
    assert agreement["a"] == pytest.approx(1.0 + 0.78 / 0.80)
    assert agreement["b"] == pytest.approx(0.1 + 1.0)
    assert agreement["c"] == pytest.approx(0.79 / 0.80)
    # The fused scores and every count are RRF's, as before.
    fused = {r.memory.id: r.scores.fused_score for r in outcome.results}
    assert fused["b"] > fused["a"] > fused["c"]
    counts = outcome.counts
    assert (counts.lexical, counts.dense, counts.fused, counts.admitted) == (2, 3, 3, 3)


def test_only_the_page_moves() -> None:
    # A page of one: RRF's first row, whatever the scores say below it.
    assert ids(pipeline(agreeing()).recall(request("hybrid", limit=1))) == ["b"]
    assert ids(pipeline(agreeing()).recall(request("hybrid", limit=2))) == ["a", "b"]


def test_the_best_scores_are_taken_among_the_admitted_rows() -> None:
    store = FakeStore(
        lexical_rows=[c("hidden", 1, 100.0), c("a", 2, 10.0), c("b", 3, 5.0)],
        refused={"hidden"},
    )
    outcome = pipeline(store).recall(request("lexical"))
    assert ids(outcome) == ["a", "b"]
    assert [r.scores.agreement_score for r in outcome.results] == [1.0, 0.5]


def test_a_cosine_counts_from_the_dense_floor() -> None:
    # Above a floor of 0.5, a cosine of 0.7 stands half as high as the best
    # 0.9 (0.5, where from 0 it would be 0.78); a lexical score counts from 0.
    store = FakeStore(
        lexical_rows=[c("l", 1, 8.0), c("c", 2, 4.0)],
        dense_rows=[c("c", 1, 0.9), c("d", 2, 0.7)],
        dense_floor=0.5,
    )
    outcome = pipeline(store).recall(request("hybrid"))
    agreement = {r.memory.id: r.scores.agreement_score for r in outcome.results}
    assert agreement == pytest.approx({"c": 1.5, "l": 1.0, "d": 0.5})
    assert ids(outcome) == ["c", "l", "d"]


# -- episode neighbours -------------------------------------------------------


def neighbouring() -> FakeStore:
    # RRF: a, b, then x (rank 3 lexical) and y (rank 3 dense), and z far
    # below; z was recorded right after a in its episode, x right before b.
    return FakeStore(
        lexical_rows=[c("a", 1, 9.0), c("x", 3, 1.0)]
        + [c(f"l{i}", i, 0.5) for i in range(4, 30)]
        + [c("z", 30, 0.4), c("b", 2, 2.0)],
        dense_rows=[c("a", 1, 0.9), c("b", 2, 0.8), c("y", 3, 0.7)],
        episode={"a": ["q", "z"], "b": ["x", "a"]},
    )


def test_the_first_rows_episode_neighbours_are_lifted() -> None:
    store = neighbouring()
    outcome = pipeline(store).recall(request("hybrid", limit=4))
    assert store.called("neighbours_of") == [2]
    scores = {r.memory.id: r.scores for r in outcome.results}
    # z (the neighbour of the first row) has rank 1 of the neighbour list, x
    # rank 2; q was never found by an arm and a is the other seed: not lifted.
    assert scores["z"].episode_rank == 1 and scores["x"].episode_rank == 2
    # Each lift follows its seed's agreement: a is both arms' best (2 of 2),
    # so z gains two arms' first rank; b (2 / 9 + 0.8 / 0.9) lends x less.
    assert scores["a"].agreement_score == pytest.approx(2.0)
    assert scores["b"].agreement_score == pytest.approx(2 / 9 + 0.8 / 0.9)
    lift_x = 2.0 * ((2 / 9 + 0.8 / 0.9) / 2) ** 3 / 62
    assert scores["z"].episode_lift == pytest.approx(2.0 / 61)
    assert scores["x"].episode_lift == pytest.approx(lift_x)
    assert scores["z"].fused_score == pytest.approx(1 / 90 + 2.0 / 61)
    assert scores["x"].fused_score == pytest.approx(1 / 63 + lift_x)
    assert scores["a"].episode_rank == 0 and scores["b"].episode_rank == 0
    # x now outranks y (1 / 63 alone) and the page holds z instead of y.
    assert set(ids(outcome)) == {"a", "b", "x", "z"}
    # Lifted rows past the hydrated head are read with the walk.
    assert "z" in store.called("hydrate")[0]
    counts = outcome.counts
    assert (counts.fused, counts.admitted) == (31, 31)


def test_neighbours_only_in_hybrid_with_both_arms() -> None:
    for mode in ("lexical", "dense"):
        store = neighbouring()
        outcome = pipeline(store).recall(request(mode, limit=4))
        assert store.called("neighbours_of") == [0]
        assert all(r.scores.episode_rank == 0 for r in outcome.results)
    off = neighbouring()
    outcome = pipeline(off, episode_neighbours_of=0).recall(request("hybrid", limit=4))
    assert off.called("neighbours_of") == [0]
    assert "z" not in ids(outcome)
    down = neighbouring()
    pipeline(down, FakeEmbed(embed_error=Degraded("unavailable", "down"))).recall(
        request("hybrid", limit=4)
    )
    assert down.called("neighbours_of") == [0]


def test_a_refused_neighbour_is_not_lifted() -> None:
    store = neighbouring()
    store.refused = {"z"}
    outcome = pipeline(store).recall(request("hybrid", limit=4))
    assert "z" not in ids(outcome)
    assert {r.memory.id: r.scores.episode_rank for r in outcome.results}["x"] == 1


def test_a_seed_the_arms_barely_agree_on_lends_little() -> None:
    # a is the first fused row (second in both arms) but far below each arm's
    # best: agreement 1 / 10 + 0.1 / 0.9. Its neighbour z (lexical rank 30)
    # gains a sliver and stays below l3 (1 / 63); a fixed third of an arm's
    # rank (0.3 / 61) would have put it on the page.
    store = FakeStore(
        lexical_rows=[c("L", 1, 10.0), c("a", 2, 1.0)]
        + [c(f"l{i}", i, 0.5) for i in range(3, 30)]
        + [c("z", 30, 0.4)],
        dense_rows=[c("D", 1, 0.9), c("a", 2, 0.1), c("y", 3, 0.05)],
        episode={"a": ["q", "z"]},
    )
    assert "z" not in ids(pipeline(store).recall(request("hybrid", limit=4)))
    everything = pipeline(store).recall(request("hybrid", limit=40))
    z = {r.memory.id: r.scores for r in everything.results}["z"]
    share = (1 / 10 + 0.1 / 0.9) / 2
    assert z.episode_rank == 1
    assert z.episode_lift == pytest.approx(2.0 * share**3 / 61)
    assert 1 / 90 + 0.3 / 61 > 1 / 63 > z.fused_score


@pytest.mark.parametrize("mode", ["lexical", "dense"])
def test_one_arm_keeps_its_own_order(mode: str) -> None:
    rows = [c("a", 1, 0.9), c("b", 2, 0.9), c("c", 3, 0.7), c("d", 4, 0.65)]
    store = FakeStore(lexical_rows=rows, dense_rows=rows)
    assert ids(pipeline(store).recall(request(mode))) == ["a", "b", "c", "d"]


# -- degrade ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_embed_down_degrades_to_the_lexical_rows(mode: str) -> None:
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)], dense_rows=[c("c", 1)])
    embed = FakeEmbed(embed_error=Degraded("unavailable", "the embed service is unavailable"))
    outcome = pipeline(store, embed).recall(request(mode))
    assert outcome.mode == mode
    assert not outcome.dense_available
    assert "embed service is unavailable" in outcome.dense_unavailable_reason
    assert ids(outcome) == ["a", "b"]
    assert outcome.counts.dense == 0 and outcome.counts.lexical == 2
    assert not store.called("dense")


def test_a_lexical_recall_says_why_the_dense_arm_did_not_contribute() -> None:
    """dense_available is false in mode lexical, as when the arm failed: the
    reason tells the two apart (it was empty, so an agent read a degrade)."""
    store = FakeStore(lexical_rows=[c("a", 1)], dense_rows=[c("b", 1)])
    embed = FakeEmbed()
    outcome = pipeline(store, embed).recall(request("lexical"))
    assert not outcome.dense_available
    assert outcome.dense_unavailable_reason == "not asked: the recall's mode is lexical"
    assert ids(outcome) == ["a"] and not store.called("dense")


def test_no_current_embeddings_degrades() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)], embeddings_available=False)
    outcome = pipeline(store).recall(request("hybrid"))
    assert not outcome.dense_available
    assert "embedded" in outcome.dense_unavailable_reason
    assert ids(outcome) == ["a"]


def test_dense_store_query_failing_degrades() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1)],
        dense_error=Degraded("timeout", "the store did not answer within 2 s"),
    )
    outcome = pipeline(store).recall(request("dense"))
    assert not outcome.dense_available and "2 s" in outcome.dense_unavailable_reason
    assert ids(outcome) == ["a"]


# -- rerank -----------------------------------------------------------------------


def test_rerank_reorders_only_the_admitted_head() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1), c("secret", 2), c("b", 3), c("c", 4), c("d", 5)],
        refused={"secret"},
        rerank_depth=3,
    )
    # The cross-encoder prefers later letters.
    embed = FakeEmbed(score=lambda passage: float(ord(passage.split()[1][0])))
    outcome = pipeline(store, embed).recall(request("lexical", limit=4, skip_rerank=False))
    assert outcome.reranked and outcome.rerank_unavailable_reason == ""
    assert embed.reranked == [["title a\nbody a", "title b\nbody b", "title c\nbody c"]]
    # The first three (admitted) rows re-ordered; the fourth keeps its fused place.
    assert ids(outcome) == ["c", "b", "a", "d"]
    assert [r.scores.rerank_score for r in outcome.results[:3]] == [99.0, 98.0, 97.0]
    assert outcome.results[3].scores.rerank_score == 0.0
    # Each row says whether the cross-encoder scored it (its 0.0 read as a score).
    assert [r.scores.reranked for r in outcome.results] == [True, True, True, False]


def test_rerank_deeper_than_the_limit_brings_rows_up() -> None:
    store = FakeStore(lexical_rows=[c(x, i) for i, x in enumerate("abcdef", start=1)])
    embed = FakeEmbed(score=lambda passage: float(ord(passage.split()[1][0])))
    outcome = pipeline(store, embed).recall(request("lexical", limit=2, skip_rerank=False))
    assert ids(outcome) == ["f", "e"]


def test_no_cross_encoder_keeps_the_fused_order() -> None:
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)])
    embed = FakeEmbed(rerank_error=Degraded("absent", "no cross-encoder configured"))
    outcome = pipeline(store, embed).recall(request("lexical", skip_rerank=False))
    assert not outcome.reranked
    assert outcome.rerank_unavailable_reason == "no cross-encoder configured"
    assert ids(outcome) == ["a", "b"]


def test_skip_rerank_and_depth_zero() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)])
    embed = FakeEmbed()
    skipped = pipeline(store, embed).recall(request("lexical", skip_rerank=True))
    assert not skipped.reranked and "request" in skipped.rerank_unavailable_reason
    store.rerank_depth = 0
    off = pipeline(store, embed).recall(request("lexical", skip_rerank=False))
    assert not off.reranked and "depth" in off.rerank_unavailable_reason
    assert embed.reranked == []


def test_a_query_embedding_the_service_did_not_answer_leaves_its_cross_encoder_unasked() -> None:
    # A hung embed service: the query embedding misses its deadline, and the
    # cross-encoder, which runs there, would wait out its own as well.
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)])
    late = Degraded("timeout", "the embed service did not answer within 0.5 s")
    embed = FakeEmbed(embed_error=late, score=lambda passage: 1.0)
    p = pipeline(store, embed)
    outcome = p.recall(request("hybrid", skip_rerank=False))
    assert not outcome.dense_available and ids(outcome) == ["a", "b"]
    assert embed.rerank_calls == 0 and not outcome.reranked
    assert "embed service" in outcome.rerank_unavailable_reason
    assert "0.5 s" in outcome.rerank_unavailable_reason
    # Nor in lexical recalls meanwhile; a query embedding answered opens it again.
    assert not p.recall(request("lexical", skip_rerank=False)).reranked
    assert embed.rerank_calls == 0
    embed.embed_error = None
    assert p.recall(request("hybrid", skip_rerank=False)).reranked
    assert embed.rerank_calls == 1


@pytest.mark.parametrize(
    "failure",
    [
        Degraded("absent", "no cross-encoder configured: set RECALLATRON_CROSS_ENCODER_DIR"),
        Degraded("timeout", "the cross-encoder did not answer within 2 s"),
        Degraded("unavailable", "the cross-encoder is unavailable"),
    ],
)
def test_a_cross_encoder_that_cannot_answer_is_asked_again_only_after_a_while(
    failure: Degraded,
) -> None:
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)])
    embed = FakeEmbed(rerank_error=failure, score=lambda passage: 1.0)
    p = pipeline(store, embed, cross_encoder_recheck_seconds=10.0)
    now = [100.0]
    p.cross_encoder.clock = lambda: now[0]
    first = p.recall(request("lexical", skip_rerank=False))
    assert embed.rerank_calls == 1 and first.rerank_unavailable_reason == failure.message
    for _ in range(3):
        again = p.recall(request("lexical", skip_rerank=False))
        assert not again.reranked and ids(again) == ["a", "b"]
        assert again.rerank_unavailable_reason.startswith(failure.message)
    assert embed.rerank_calls == 1
    now[0] += 10.0
    embed.rerank_error = None
    assert p.recall(request("lexical", skip_rerank=False)).reranked
    assert embed.rerank_calls == 2


def test_no_recheck_time_asks_on_every_recall() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)])
    embed = FakeEmbed(
        embed_error=Degraded("timeout", "the embed service did not answer within 0.5 s"),
        rerank_error=Degraded("absent", "no cross-encoder configured"),
    )
    p = pipeline(store, embed, cross_encoder_recheck_seconds=0)
    for _ in range(2):
        p.recall(request("hybrid", skip_rerank=False))
    assert embed.rerank_calls == 2


# -- deadlines --------------------------------------------------------------------


def test_calls_are_capped_by_the_callers_deadline() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)])
    embed = FakeEmbed()
    pipeline(store, embed).recall(request("hybrid", deadline=time.monotonic() + 3.0))
    assert store.timeouts and all(t is not None and 0 < t < 3.0 for t in store.timeouts)
    pipeline(store, embed).recall(request("hybrid"))
    assert store.timeouts[-1] is None


def test_no_time_left_skips_the_cross_encoder() -> None:
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)])
    embed = FakeEmbed(score=lambda passage: 1.0)
    outcome = pipeline(store, embed).recall(
        request("lexical", skip_rerank=False, deadline=time.monotonic())
    )
    assert not outcome.reranked and "deadline" in outcome.rerank_unavailable_reason
    assert embed.reranked == [] and ids(outcome) == ["a", "b"]


# -- the whole answer ---------------------------------------------------------------


def test_entity_cards_and_history_only_when_asked() -> None:
    store = FakeStore(lexical_rows=[c("a", 1)], dense_rows=[c("a", 1)])
    p = pipeline(store)
    plain = p.recall(request())
    assert not plain.entities and not plain.history
    assert not store.called("cards") and not store.called("history")

    asked = p.recall(
        Request(
            "caller", "ws", "where is Ada", "hybrid", 5, entity_cards=True, include_history=True
        )
    )
    assert ids(asked) == ["a"]
    assert list(asked.entities) == ["card for where is Ada"]
    assert list(asked.history) == ["turn about where is Ada"]
    assert store.called("history") == [5]


def test_entity_cards_failing_degrade_to_none() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1)], cards_error=Degraded("failed", "entity cards: unavailable")
    )
    outcome = pipeline(store).recall(
        Request("caller", "ws", "where is Ada", "lexical", 10, entity_cards=True)
    )
    assert ids(outcome) == ["a"] and list(outcome.entities) == []
    assert outcome.entities_unavailable_reason == "entity cards: unavailable"


def test_history_failing_degrades_to_none_and_says_so() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1)],
        history_error=Degraded("deadline_exceeded", "history: the store did not answer in time"),
    )
    outcome = pipeline(store).recall(
        Request("caller", "ws", "where is Ada", "lexical", 10, include_history=True)
    )
    assert ids(outcome) == ["a"] and list(outcome.history) == []
    assert outcome.history_unavailable_reason == "history: the store did not answer in time"


def test_a_late_cross_encoder_is_not_asked_again_because_the_query_embedding_answered() -> None:
    # The service answers query embeddings at once, but its cross-encoder
    # misses its deadline: in hybrid (the default mode) each recall's answered
    # embedding must not reopen the gate, or every recall waits out the
    # cross-encoder's deadline again (docs/recall.md, "Degrade, never refuse").
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2)])
    late = Degraded("timeout", "the cross-encoder did not answer within 2 s")
    embed = FakeEmbed(rerank_error=late, score=lambda passage: 1.0)
    p = pipeline(store, embed, cross_encoder_recheck_seconds=10.0)
    now = [100.0]
    p.cross_encoder.clock = lambda: now[0]
    assert not p.recall(request("hybrid", skip_rerank=False)).reranked
    for _ in range(3):
        again = p.recall(request("hybrid", skip_rerank=False))
        assert again.dense_available and not again.reranked
        assert again.rerank_unavailable_reason.startswith(late.message)
    assert embed.rerank_calls == 1
    now[0] += 10.0
    embed.rerank_error = None
    assert p.recall(request("hybrid", skip_rerank=False)).reranked
    assert embed.rerank_calls == 2


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_cross_encoder_answering_scores_that_are_not_numbers_is_failing(bad: float) -> None:
    # A broken cross-encoder export (an overflow in its graph) answers NaN or
    # infinity: no order can be read from that, and an infinite or NaN score
    # is no JSON number for an MCP or HTTP client. The fused order stands.
    store = FakeStore(lexical_rows=[c("a", 1), c("b", 2), c("c", 3)])
    embed = FakeEmbed(score=lambda passage: bad if "b" in passage.split()[1] else 1.0)
    outcome = pipeline(store, embed).recall(request("lexical", skip_rerank=False))
    assert not outcome.reranked
    assert "not a finite number" in outcome.rerank_unavailable_reason
    assert ids(outcome) == ["a", "b", "c"]
    assert all(not r.scores.reranked and r.scores.rerank_score == 0.0 for r in outcome.results)
