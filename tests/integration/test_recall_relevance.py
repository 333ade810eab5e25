"""``nothing_relevant`` end to end (design §5.8): through the gateway, the
rank service judges the rows it returns; the results come back either way."""

from __future__ import annotations

import pytest

from services.rank.relevance import RELEVANT_COSINE
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

MEMORIES = [
    ("Office move", "The Lisbon office moves to the harbour building in March."),
    ("Budget review", "The quarterly budget review is on Thursday with the finance team."),
    ("Cats", "Caroline adopted two cats named Oscar and Luna last spring."),
    ("Backups", "The staging database is backed up every night at two o'clock."),
]


def test_a_question_about_a_memory_is_not_flagged_and_an_unrelated_one_is(team: Team) -> None:
    ada = team.clients["ada"]
    for title, body in MEMORIES:
        ada.remember(title, body, audience_to="workspace")
    ada.wait_embedded(timeout=120)

    on_topic = ada.recall("When does the Lisbon office move to the harbour?").outcome
    assert on_topic.dense_available and on_topic.results
    assert not on_topic.nothing_relevant

    # A word in common ("office"), nothing about it: flagged, and still answered
    # (a signal, never a refusal).
    off_topic = ada.recall("office chairs").outcome
    assert off_topic.dense_available
    assert off_topic.nothing_relevant
    assert off_topic.results

    # Without the dense arm there is no cosine to judge by: matched rows are not flagged.
    lexical = ada.recall("Lisbon office harbour", mode="lexical").outcome
    assert lexical.results and not lexical.nothing_relevant
    empty = ada.recall("zzyzx qwertyuiop", mode="lexical").outcome
    assert not empty.results and empty.nothing_relevant


def test_a_floor_above_the_threshold_does_not_flag_the_rows_it_kept_out(team: Team) -> None:
    """An owner's dense floor above the rule's cosine keeps out of the dense
    arm rows the rule would judge relevant (a cosine between the two): such a
    row, found by its words, cannot be judged, so it is not flagged."""
    ada = team.clients["ada"]
    for title, body in MEMORIES:
        ada.remember(title, body, audience_to="workspace")
    ada.wait_embedded(timeout=120)
    question = "When does the Lisbon office move to the harbour?"
    found = ada.recall(question).outcome
    assert found.results[0].scores.dense_cosine < 0.95 and not found.nothing_relevant

    ada.update_settings(dense_floor=0.95)

    def dense_rows_gone() -> bool:  # the services read settings within seconds
        return not any(r.scores.dense_rank for r in ada.recall(question).outcome.results)

    wait_for(dense_rows_gone, "the floor's change to reach recall", timeout=60)
    outcome = ada.recall(question).outcome
    assert outcome.dense_available and outcome.results
    assert outcome.results[0].memory.title == "Office move"
    assert not outcome.nothing_relevant


KEYWORD_MEMORIES = [
    ("Daily standup", "The daily standup moves to 10am from Monday."),
    ("Postgres upgrade", "We decided to upgrade Postgres to version 18 in the spring."),
    ("Budget review", "The quarterly budget review is on Thursday with the finance team."),
    ("Cats", "Caroline adopted two cats named Oscar and Luna last spring."),
]


def test_a_query_of_words_one_memory_holds_is_not_flagged(team: Team) -> None:
    """A query of a few words (as a person types into a search box) lies far
    from any memory's meaning: a bare word's cosine to the memory about it is
    under the threshold. A memory holding every word asked for is judged
    relevant all the same; one holding only some of them is not."""
    ada = team.clients["ada"]
    for title, body in KEYWORD_MEMORIES:
        ada.remember(title, body, audience_to="workspace")
    ada.wait_embedded(timeout=120)

    dense_judged = 0
    for query, title in [
        ("standup", "Daily standup"),
        ("postgres", "Postgres upgrade"),
        ("Oscar", "Cats"),
        ("finance team", "Budget review"),
        ("the cats", "Cats"),
    ]:
        outcome = ada.recall(query).outcome
        assert outcome.dense_available
        top = outcome.results[0]
        assert top.memory.title == title, query
        # The cosine alone would have flagged the answer.
        assert all(r.scores.dense_cosine < RELEVANT_COSINE for r in outcome.results), query
        assert top.scores.matches_every_term, query
        assert not outcome.nothing_relevant, query
        # The dense arm alone says it too (no lexical arm to ask), of the rows
        # above its floor ("Oscar" lies under it).
        dense = ada.recall(query, mode="dense").outcome
        if top.scores.dense_rank:
            dense_judged += 1
            assert dense.results[0].memory.title == title, query
            assert dense.results[0].scores.lexical_rank == 0
            assert dense.results[0].scores.matches_every_term, query
            assert not dense.nothing_relevant, query
        else:
            assert not dense.results and dense.nothing_relevant, query
    assert dense_judged >= 3

    # Some of the words, never all in one memory: flagged, still answered.
    for query in ["budget cats", "standup chairs", "team spirit"]:
        outcome = ada.recall(query).outcome
        assert outcome.dense_available and outcome.results, query
        assert not any(r.scores.matches_every_term for r in outcome.results), query
        assert outcome.nothing_relevant, query
        assert ada.recall(query, mode="dense").outcome.nothing_relevant, query
