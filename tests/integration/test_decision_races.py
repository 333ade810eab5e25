"""Review decisions taken while a memory they name is forgotten at the same
moment (design §8.1, §8.5): the decision answers NOT_FOUND, as for a memory
or entity that does not exist, and writes nothing; never an internal error."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from recallatron import errors
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.dedup_data import NEAR_DUPLICATES
from tests.surfaces.entity_data import entity

pytestmark = pytest.mark.integration


class _Before:
    """A connection that runs ``hook`` once, just before ``statement``."""

    def __init__(
        self, conn: psycopg.Connection, statement: str, hook: Callable[[], object]
    ) -> None:
        self._conn, self._statement, self._hook = conn, statement, hook

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query is self._statement:
            self._hook()
        return self._conn.execute(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextlib.contextmanager
def _held_before(store: Any, statement: str, hook: Callable[[], object]) -> Iterator[None]:
    real = store.transaction

    @contextlib.contextmanager
    def transaction(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with real(*args, **kwargs) as conn:
            yield _Before(conn, statement, hook)

    store.transaction = transaction
    try:
        yield
    finally:
        del store.transaction


@contextlib.contextmanager
def _stores(stack: Stack) -> Iterator[tuple[Any, Any]]:
    from services.store.domain.control import ControlPlane
    from services.store.domain.dedup import DedupStore
    from services.store.domain.entity_merge import EntityMergeStore

    with dbutil.store_databases(stack) as dbs:
        control = ControlPlane(dbs)
        yield DedupStore(control), EntityMergeStore(control)


def test_keep_both_while_one_is_forgotten_is_not_found(stack: Stack, team: Team) -> None:
    from services.store.domain import dedup
    from services.store.infrastructure.db import Caller

    ada = team.clients["ada"]
    (first, second), *_ = NEAR_DUPLICATES
    a, b = ada.remember(*first).memory.id, ada.remember(*second).memory.id
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    with _stores(stack) as (pairs, _):
        forget = lambda: ada.forget(b, "a duplicate")  # noqa: E731
        with (
            _held_before(pairs, dedup.DISMISS, forget),
            pytest.raises(errors.NotFound) as refused,
        ):
            pairs.dismiss(caller, a, b)
    assert str(refused.value) == "second_id: memory not found"
    rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM dismissed_pair")
    assert rows == [(0,)]


@pytest.mark.parametrize("decision", ["merge", "keep_apart"])
def test_an_entity_decision_while_its_entity_goes_out_of_sight_is_not_found(
    stack: Stack, team: Team, decision: str
) -> None:
    from services.store.domain import entity_merge
    from services.store.infrastructure.db import Caller

    ada, bob = team.clients["ada"], team.clients["bob"]
    # Robin is known to ada from a workspace memory, and to bob from his own
    # private one as well: forgetting the first hides Robin from ada, and
    # leaves the entity in place.
    shared = bob.remember(
        "Robin is on call", "Robin is on call.", mention_names=["Robin"], audience_to="workspace"
    ).memory
    robin = entity(shared, "Robin")
    bob.remember("Robin's notes", "Robin keeps notes.", mention_ids=[robin])
    other = entity(ada.remember("Rob", "Rob joined.", mention_names=["Rob"]).memory, "Rob")
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    with _stores(stack) as (_, merges):
        hide = lambda: bob.forget(shared.id, "wrong")  # noqa: E731
        statement = {"merge": entity_merge.INSERT_MERGE, "keep_apart": entity_merge.KEEP_APART}
        with (
            _held_before(merges, statement[decision], hide),
            pytest.raises(errors.NotFound) as refused,
        ):
            getattr(merges, decision)(caller, other, robin)
    # The hidden entity is the second given: merged_id, second_id.
    named = {"merge": "merged_id", "keep_apart": "second_id"}[decision]
    assert str(refused.value) == f"{named}: entity not found"
    for table in ("entity_merge", "entity_pair_apart"):
        rows = dbutil.query(stack, team.database_name, f"SELECT count(*) FROM {table}")
        assert rows == [(0,)], table
