"""An entity card's lists are capped where they are read (docs/graph.md): an
entity with thousands of aliases costs a card no more rows than the cap, and
the card shows the aliases it always showed, newest statement first."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, cast

import psycopg
import pytest

from recallatron.vocabulary import MAX_CARD_ITEMS
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import Caller
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

MANY_ALIASES = 2_000


class _ReadRows:
    """A cursor that keeps what was fetched from it."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor
        self.rows: list[Any] = []

    def fetchall(self) -> list[Any]:
        self.rows = self._cursor.fetchall()
        return self.rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Recording:
    """A connection that keeps, per statement, the rows its callers fetched."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self.read: dict[str, list[_ReadRows]] = {}

    def execute(self, query: Any, params: Any = None) -> _ReadRows:
        cursor = _ReadRows(self._conn.execute(query, params))
        self.read.setdefault(str(query), []).append(cursor)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _graph_transaction(stack: Stack, team: Team) -> AbstractContextManager[psycopg.Connection]:
    """A transaction as the store opens one for Ada (an owner, for assist)."""
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    return dbutil.store_transaction(stack, caller)


def _alias_order(stack: Stack, team: Team, entity_id: str) -> list[str]:
    """Every current alias of the entity in the card's order: newest
    statement first, then by alias, then by id."""
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT alias FROM entity_alias WHERE entity_id = %s AND retired_at IS NULL"
        " ORDER BY stated_at DESC, alias, id",
        (entity_id,),
    )
    return [r[0] for r in rows]


def test_an_entity_with_thousands_of_aliases_reads_at_most_the_cap(
    stack: Stack, team: Team
) -> None:
    from services.store.domain import graph
    from services.store.sql import graph_queries as gq

    ada = team.clients["ada"]
    crowded = ada.remember(
        "Many names",
        mention_names=["Crowded"],
        aliases=[{"entity": {"name": "Crowded"}, "alias": "C"}],
    ).memory
    crowded_id = crowded.mentions[0].entity_id
    small = ada.remember(
        "A few names",
        mention_names=["Sparse"],
        aliases=[{"entity": {"name": "Sparse"}, "alias": a} for a in ("Spa", "Sp", "S.")],
    ).memory
    small_id = small.mentions[0].entity_id
    ada.remember(
        "One more name",
        mention_ids=[small_id],
        aliases=[{"entity": {"entity_id": small_id}, "alias": "Sparsely"}],
    )
    # Several aliases share each statement time, so the order within a time
    # counts too.
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO entity_alias (id, memory_id, entity_id, alias, alias_key, stated_at)"
        " SELECT gen_random_uuid(), %s, %s, 'n' || md5(g::text), 'n' || md5(g::text),"
        "        now() - (g %% 400) * interval '1 minute'"
        " FROM generate_series(1, %s) g RETURNING 1",
        (crowded.id, crowded_id, MANY_ALIASES),
    )

    with _graph_transaction(stack, team) as conn:
        recording = _Recording(conn)
        cards = graph.cards_by_id(cast(psycopg.Connection, recording), [crowded_id, small_id])

    (read,) = recording.read[gq.CARD_ALIASES]
    per_entity: dict[str, int] = {}
    for row in read.rows:
        per_entity[str(row[0])] = per_entity.get(str(row[0]), 0) + 1
    assert per_entity[crowded_id] <= MAX_CARD_ITEMS + 1, (
        f"{per_entity[crowded_id]} aliases read for a card that shows {MAX_CARD_ITEMS}"
    )
    crowded_card, small_card = cards[crowded_id], cards[small_id]
    assert crowded_card.truncated
    assert [a.alias for a in crowded_card.aliases] == _alias_order(stack, team, crowded_id)[
        :MAX_CARD_ITEMS
    ]
    assert not small_card.truncated
    assert [a.alias for a in small_card.aliases] == ["Sparsely", "S.", "Sp", "Spa"]
    assert [a.alias for a in small_card.aliases] == _alias_order(stack, team, small_id)
