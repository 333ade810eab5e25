"""The lexical arm ranks by BM25 (migration 0017, docs/recall.md "Finding
more"): a rare term weighs more than repeats of a common one, a short memory
comes before a long one holding the term as often, and the weights come from
the memories the caller may see, never from others."""

from __future__ import annotations

import math

import pytest

from tests.conftest import Team

pytestmark = pytest.mark.integration


def _lexical(team: Team, who: str, query: str) -> list[tuple[str, float]]:
    outcome = team.clients[who].recall(query, mode="lexical", skip_rerank=True).outcome
    return [(x.memory.id, x.scores.lexical_score) for x in outcome.results]


def _bm25(tf: int, docs: int, visible: int) -> float:
    """BM25 (k1 1.2, b 0.75) of a memory whose length is the mean of the
    memories ranked: only the term count and the idf remain."""
    idf = math.log(1 + (visible - docs + 0.5) / (docs + 0.5))
    return idf * tf * 2.2 / (tf + 1.2)


def test_a_rare_term_outranks_repeats_of_a_common_one(team: Team) -> None:
    ada = team.clients["ada"]
    for i in range(8):
        ada.remember(f"Orchard note {i}", "The orchard needs pruning.", audience_to="workspace")
    repeated = ada.remember(
        "Orchard orchard", "Orchard, orchard and the orchard again.", audience_to="workspace"
    ).memory.id
    rare = ada.remember("Zephyrine", "Zephyrine called.", audience_to="workspace").memory.id
    ranked = [memory for memory, _ in _lexical(team, "ada", "orchard zephyrine")]
    assert ranked[0] == rare
    assert ranked.index(repeated) > 0 and len(ranked) == 10


def test_the_shorter_of_two_memories_holding_the_term_as_often_comes_first(team: Team) -> None:
    ada = team.clients["ada"]
    short = ada.remember("Quillfeather", "Quillfeather arrived.", audience_to="workspace")
    # Newer, so that an order blind to length would put it first.
    long = ada.remember(
        "Quillfeather",
        "Quillfeather arrived with the spring shipment of copper pipes, seven crates of "
        "tiles and a letter from the harbour master about the new berth fees.",
        audience_to="workspace",
    )
    ranked = _lexical(team, "ada", "quillfeather")
    assert [memory for memory, _ in ranked] == [short.memory.id, long.memory.id]
    assert ranked[0][1] > ranked[1][1] > 0


def test_the_weights_count_only_what_the_caller_may_see(team: Team) -> None:
    ada = team.clients["ada"]
    # Every memory holding the term is as long as the others (in characters):
    # the term twice and one more word.
    shared = ada.remember("Brindlewick", "Brindlewick opens.", audience_to="workspace").memory.id
    ada.remember("Fern", "Fern grows.", audience_to="workspace")
    hidden = {
        ada.remember("Brindlewick", f"Brindlewick {w}.").memory.id for w in ("shuts", "waits")
    }

    # Bob sees two memories, one holding the term; ada four, three holding it.
    bob_rows = _lexical(team, "bob", "brindlewick")
    assert [memory for memory, _ in bob_rows] == [shared]
    assert bob_rows[0][1] == pytest.approx(_bm25(2, 1, 2), rel=1e-6)
    ada_rows = dict(_lexical(team, "ada", "brindlewick"))
    assert set(ada_rows) == {shared, *hidden}
    for score in ada_rows.values():
        assert score == pytest.approx(_bm25(2, 3, 4), rel=1e-6)
