"""The pipeline with fakes: the store's count of the memories the caller may
see without a vector reaches the outcome, with a reason when the dense arm
answered all the same (the stack's end of it: tests/faults/test_dense_behind.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from recallatron.vocabulary import MAX_NOT_EMBEDDED_COUNTED
from services.rank.dense_outcome import dense_behind
from services.rank.pipeline import DenseArm, QueryVector
from tests.recall.test_pipeline import FakeStore, c, ids, pipeline, request


@dataclass
class BehindStore(FakeStore):
    not_embedded: int = 0

    def dense(
        self,
        caller: Any,
        vector: QueryVector,
        limit: int,
        filters: Any,
        timeout: float | None = None,
        words: str = "",
    ) -> DenseArm:
        arm = super().dense(caller, vector, limit, filters, timeout, words)
        return DenseArm(arm.candidates, arm.embeddings_available, arm.floor, self.not_embedded)


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_an_answering_dense_arm_behind_the_writes_says_so(mode: str) -> None:
    store = BehindStore(lexical_rows=[c("a", 1)], dense_rows=[c("b", 1)], not_embedded=3)
    outcome = pipeline(store).recall(request(mode))
    assert outcome.dense_available and outcome.dense_unavailable_reason == ""
    assert outcome.not_embedded == 3
    assert outcome.dense_behind_reason.startswith("3 memories you may see are not embedded yet")
    assert "b" in ids(outcome)


def test_a_dense_arm_caught_up_says_nothing() -> None:
    outcome = pipeline(BehindStore(dense_rows=[c("b", 1)])).recall(request("dense"))
    assert outcome.not_embedded == 0 and outcome.dense_behind_reason == ""


def test_a_lexical_recall_does_not_ask() -> None:
    store = BehindStore(lexical_rows=[c("a", 1)], not_embedded=3)
    outcome = pipeline(store).recall(request("lexical"))
    assert outcome.not_embedded == 0 and outcome.dense_behind_reason == ""


def test_with_nothing_embedded_the_count_stands_beside_the_degrade() -> None:
    store = BehindStore(lexical_rows=[c("a", 1)], embeddings_available=False, not_embedded=4)
    outcome = pipeline(store).recall(request("hybrid"))
    assert not outcome.dense_available and "embedded" in outcome.dense_unavailable_reason
    # The degrade already says why; the count says how many wait.
    assert outcome.not_embedded == 4 and outcome.dense_behind_reason == ""


def test_the_reason_reads_the_count_and_its_cap() -> None:
    assert dense_behind(0) == ""
    assert dense_behind(1).startswith("1 memory you may see is not embedded yet")
    assert dense_behind(MAX_NOT_EMBEDDED_COUNTED).startswith(
        "at least 1,000 memories you may see are not embedded yet"
    )


def test_a_row_that_may_have_no_vector_is_not_judged() -> None:
    """Found by its words while memories wait for their vectors, a row the
    dense arm did not return may never have been compared with the query."""
    far = 0.1
    store = BehindStore(lexical_rows=[c("new", 1, 2.0)], dense_rows=[c("old", 1, far)])
    assert pipeline(store).recall(request("hybrid")).nothing_relevant
    store.not_embedded = 1
    outcome = pipeline(store).recall(request("hybrid"))
    assert not outcome.nothing_relevant and ids(outcome) == ["new", "old"]
    # Rows the dense arm returned are judged as before; an empty answer is flagged.
    only_dense = BehindStore(dense_rows=[c("old", 1, far)], not_embedded=1)
    assert pipeline(only_dense).recall(request("dense")).nothing_relevant
    assert pipeline(BehindStore(not_embedded=1)).recall(request("hybrid")).nothing_relevant
