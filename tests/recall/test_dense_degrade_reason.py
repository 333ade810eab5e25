"""The reason recall gives when the dense arm finds no vector: the store
looks only at the vectors the caller may see for the recall's purpose, so the
reason speaks of those, and reads the same whether or not the workspace holds
vectors the caller may not see (design §4, "not found means not found")."""

from __future__ import annotations

import pytest

from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

QUERY = "harbour crane schedule"


def test_no_vector_the_caller_may_see_is_not_said_of_the_workspace(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    before = bob.recall(QUERY, mode="dense", skip_rerank=True).outcome
    ada.remember("Harbour crane schedule", "The harbour crane runs at dawn.")
    wait_for(
        lambda: ada.recall(QUERY, mode="dense", skip_rerank=True).outcome.dense_available or None,
        "ada's private memory embedded",
    )
    # The workspace now holds an embedded memory: bob may not see it, and
    # ada may not for another purpose than its own (assist).
    asked = [
        bob.recall(QUERY, mode="dense", skip_rerank=True).outcome,
        ada.recall(QUERY, mode="dense", purpose="automate", skip_rerank=True).outcome,
    ]
    for outcome in asked:
        assert not outcome.dense_available and not outcome.results
        reason = outcome.dense_unavailable_reason
        assert "of this workspace" not in reason, reason
        assert reason.startswith("no memory you may see for this purpose is embedded yet"), reason
    # Nothing tells bob that a memory he may not see was embedded meanwhile.
    assert asked[0].dense_unavailable_reason == before.dense_unavailable_reason
