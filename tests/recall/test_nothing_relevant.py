"""``nothing_relevant`` (design §5.8): judged from the returned rows only, a
signal beside the results, never instead of them."""

from __future__ import annotations

import pytest

from services.rank.fusion import Scores
from services.rank.ports import Candidate
from services.rank.relevance import RELEVANT_COSINE, nothing_relevant
from tests.recall.test_pipeline import FakeEmbed, FakeStore, c, ids, pipeline, request

NEAR = RELEVANT_COSINE + 0.05
FAR = RELEVANT_COSINE - 0.15


def test_a_close_dense_row_is_relevant_and_only_far_rows_are_flagged() -> None:
    store = FakeStore(lexical_rows=[c("a", 1, 2.0)], dense_rows=[c("b", 1, NEAR), c("a", 2, FAR)])
    assert not pipeline(store).recall(request("hybrid")).nothing_relevant
    store.dense_rows = [c("b", 1, FAR), c("a", 2, FAR - 0.01)]
    outcome = pipeline(store).recall(request("hybrid"))
    # Flagged, yet every row still comes back in the fused order.
    assert outcome.nothing_relevant
    assert ids(outcome) == ["a", "b"]


def test_the_threshold_is_inclusive() -> None:
    at = Scores(dense_rank=1, dense_cosine=RELEVANT_COSINE)
    below = Scores(dense_rank=1, dense_cosine=RELEVANT_COSINE - 1e-6)
    assert not nothing_relevant([at], dense_available=True)
    assert nothing_relevant([below], dense_available=True)
    # A cosine on a row the dense arm did not return is no evidence.
    assert nothing_relevant([Scores(lexical_rank=1, dense_cosine=0.9)], dense_available=True)


def test_a_row_holding_every_term_of_the_query_is_relevant_at_any_cosine() -> None:
    every = Candidate("a", 1, 2.0, matches_every_term=True)
    store = FakeStore(lexical_rows=[every], dense_rows=[c("b", 1, FAR), c("a", 2, FAR - 0.01)])
    outcome = pipeline(store).recall(request("hybrid"))
    assert outcome.results[0].scores.matches_every_term and not outcome.nothing_relevant
    # Found by some of the words only: the cosine alone judges.
    store.lexical_rows = [c("a", 1, 2.0)]
    outcome = pipeline(store).recall(request("hybrid"))
    assert not outcome.results[0].scores.matches_every_term and outcome.nothing_relevant
    # Every term, yet not among the rows returned: no evidence.
    store.lexical_rows = [c("x", 1, 2.0), Candidate("a", 2, 1.0, matches_every_term=True)]
    store.dense_rows = [c("b", 1, FAR), c("x", 2, FAR - 0.01)]
    assert pipeline(store).recall(request("hybrid", limit=2)).nothing_relevant
    assert not pipeline(store).recall(request("hybrid", limit=3)).nothing_relevant


def test_the_dense_arm_alone_is_asked_which_rows_hold_every_term() -> None:
    every = Candidate("b", 1, FAR, matches_every_term=True)
    store = FakeStore(lexical_rows=[c("a", 1, 2.0)], dense_rows=[every])
    outcome = pipeline(store).recall(request("dense"))
    assert store.dense_words == ["where is the office"]
    assert ids(outcome) == ["b"] and not outcome.nothing_relevant
    # In hybrid the lexical arm says it: the dense arm is not asked again.
    store.dense_words.clear()
    pipeline(store).recall(request("hybrid"))
    assert store.dense_words == [""]


def test_a_row_the_walk_refused_does_not_count() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1)],
        dense_rows=[c("hidden", 1, 0.95), c("a", 2, FAR)],
        refused={"hidden"},
    )
    outcome = pipeline(store).recall(request("hybrid"))
    assert ids(outcome) == ["a"]
    assert outcome.nothing_relevant


def test_only_the_returned_rows_are_judged() -> None:
    store = FakeStore(
        lexical_rows=[c("a", 1), c("b", 2)], dense_rows=[c("c", 1, FAR), c("d", 2, NEAR)]
    )
    # Fused order: a and c (rank 1 each), then b and d; the near row is fourth.
    assert pipeline(store).recall(request("hybrid", limit=2)).nothing_relevant
    assert not pipeline(store).recall(request("hybrid", limit=4)).nothing_relevant


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_without_the_dense_arm_only_an_empty_answer_is_flagged(mode: str) -> None:
    from services.rank.ports import Degraded

    store = FakeStore(lexical_rows=[c("a", 1)], dense_rows=[c("b", 1, 0.9)])
    embed = FakeEmbed(embed_error=Degraded("unavailable", "down"))
    outcome = pipeline(store, embed).recall(request(mode))
    assert not outcome.dense_available and ids(outcome) == ["a"]
    assert not outcome.nothing_relevant
    store.lexical_rows = []
    assert pipeline(store, embed).recall(request(mode)).nothing_relevant


def test_an_empty_answer_is_flagged() -> None:
    assert pipeline(FakeStore()).recall(request("hybrid")).nothing_relevant


def test_a_floor_above_the_threshold_leaves_the_rows_it_kept_out_unjudged() -> None:
    # The dense arm returned nothing at its floor: a lexical row lies under
    # the floor, which may still be at or above the threshold.
    store = FakeStore(lexical_rows=[c("a", 1)], dense_floor=RELEVANT_COSINE + 0.2)
    outcome = pipeline(store).recall(request("hybrid"))
    assert outcome.dense_available and ids(outcome) == ["a"]
    assert not outcome.nothing_relevant
    # A floor at or under the threshold says the row is under it: flagged.
    for floor in (RELEVANT_COSINE, 0.30):
        store.dense_floor = floor
        assert pipeline(store).recall(request("hybrid")).nothing_relevant
    # Nothing returned is flagged whatever the floor.
    store.lexical_rows, store.dense_floor = [], 0.95
    assert pipeline(store).recall(request("hybrid")).nothing_relevant
