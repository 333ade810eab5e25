"""What recall's walk answers past the size budget (services/store/domain/
answer_budget.keep_within, memory_reads.walk), on views of chosen sizes: the
rows in rank order, as many as fit without their provenance (at least one);
the higher-ranked keep their provenance first, a lower-ranked row never keeping
what a higher-ranked one lost; the answer within the budget. Through the stack:
tests/integration/test_answer_sizes.py and test_provenance_budget.py."""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any, cast

import psycopg

from recallatron.vocabulary import ANSWER_BUDGET_BYTES
from services.store.domain import answer_budget
from services.store.domain.answer_budget import ITEM_BYTES, memory_bytes, provenance_bytes
from services.store.domain.memory_reads import MemoryReads, MemoryView
from services.store.infrastructure.db import Caller

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def view(text: int, provenance: int = 0) -> MemoryView:
    """A memory whose text takes ``text`` bytes of an answer and whose
    provenance (one mention, or none) ``provenance``."""
    memory_id = str(uuid.uuid4())
    made = MemoryView(
        memory_id, "note", "", "x" * (text - ITEM_BYTES), 1.0, "human", 1, None,
        ["assist"], memory_id, NOW, NOW, None,
    )  # fmt: skip
    if provenance:
        entity = str(uuid.uuid4())
        made.mentions = [(entity, "n" * (provenance - ITEM_BYTES - len(entity)))]
    assert (memory_bytes(made) - provenance_bytes(made), provenance_bytes(made)) == (
        text,
        provenance,
    )
    return made


def with_provenance(views: list[MemoryView]) -> list[bool]:
    return [bool(v.mentions) for v in views]


def test_the_rows_that_fit_without_provenance_are_kept_in_order() -> None:
    views = [view(400), view(400, 300), view(400), view(400)]
    assert answer_budget.keep_within(views, 1_000) == 2
    # Within the budget once the kept rows' provenance is left out.
    assert sum(memory_bytes(v) for v in views[:2]) <= 1_000
    assert with_provenance(views[:2]) == [False, False]
    assert views[1].omitted == {"mentions": 1}


def test_at_least_one_row_is_kept() -> None:
    views = [view(5_000, 300), view(200)]
    assert answer_budget.keep_within(views, 1_000) == 1
    assert views[0].omitted == {"mentions": 1}


def test_the_higher_ranked_keep_their_provenance_first() -> None:
    views = [view(200, 300), view(200, 300), view(200, 300)]
    assert answer_budget.keep_within(views, 1_300) == 3
    assert with_provenance(views) == [True, True, False]
    assert sum(memory_bytes(v) for v in views) <= 1_300


def test_a_lower_ranked_row_never_keeps_provenance_a_higher_ranked_one_lost() -> None:
    # The second's provenance would fit beside the rows' text, the first's not.
    views = [view(2_000, 9_000), view(2_000, 1_000), view(2_000)]
    assert answer_budget.keep_within(views, 10_000) == 3
    assert with_provenance(views) == [False, False, False]
    assert [v.omitted for v in views] == [{"mentions": 1}, {"mentions": 1}, {}]


class Rows:
    def __init__(self, rows: list[tuple[str, bool]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[str, bool]]:
        return self.rows


class Conn:
    """The walk's admission statement, every candidate admitted, none in an episode."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def execute(self, query: object, params: dict[str, Any]) -> Rows:
        return Rows([(i, False) for i in self.ids])


class Reads(MemoryReads):
    """The walk over ``views`` (as read with provenance) instead of a database."""

    def __init__(self, views: list[MemoryView]) -> None:
        self.views = {v.id: v for v in views}

    def transaction(
        self, caller: Caller, settings: Any = None
    ) -> AbstractContextManager[psycopg.Connection]:
        return cast(
            "AbstractContextManager[psycopg.Connection]", nullcontext(Conn(list(self.views)))
        )

    def _read(self, conn: object, wanted: list[str], *_: Any, **__: Any) -> list[MemoryView]:
        return [self.views[i] for i in wanted]


def test_the_walk_answers_as_keep_within_does() -> None:
    budget = ANSWER_BUDGET_BYTES
    # The first's provenance passes the budget; the second's fits beside the
    # text of the three rows that fit, but a lower-ranked row does not keep
    # provenance the first lost; the fourth's text is past the budget.
    views = [
        view(budget // 8, budget * 15 // 16),
        view(budget // 8, budget // 4),
        view(budget // 2),
        view(budget // 2),
    ]
    ids = [v.id for v in views]
    walk = Reads(views).walk(Caller("w", "m", "assist"), ids, hydrate=len(ids))
    assert walk.admitted == ids
    assert [m.id for m in walk.memories] == ids[:3]
    assert with_provenance(walk.memories) == [False, False, False]
    assert [m.omitted for m in walk.memories] == [{"mentions": 1}, {"mentions": 1}, {}]
    assert sum(memory_bytes(m) for m in walk.memories) <= budget
