"""Recall's entity cards ask the name indexes first (migration 0022;
docs/graph.md, "Entity cards in recall"): a query that names no entity never
runs the cards' statement beneath the policies, and one naming an entity the
caller may see still gets its card."""

from __future__ import annotations

import pytest

from services.store.domain.control import ControlPlane
from services.store.domain.graph import GraphStore
from services.store.infrastructure.db import Caller
from services.store.sql import graph_queries as gq
from tests.conftest import Team

pytestmark = pytest.mark.integration

PREPARED = "SELECT statement FROM pg_prepared_statements"


def test_a_query_naming_no_entity_skips_the_cards_statement(
    one_connection: ControlPlane, team: Team
) -> None:
    ada = team.clients["ada"]
    ada.remember(
        "Robin leads Apollo",
        "Robin Goodwin leads the Apollo project.",
        mention_names=["Robin Goodwin"],
        aliases=[{"entity": {"name": "Robin Goodwin"}, "alias": "Robin"}],
    )
    # Bob's memory, private to him (the default audience), names an entity
    # Ada may not see.
    team.clients["bob"].remember(
        "Secret", "Quentin Marsh joins next week.", mention_names=["Quentin Marsh"]
    )
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    graph = GraphStore(one_connection)
    pool = one_connection.caller_pool(caller)
    # Past the driver's prepare threshold (5): a statement run that often is
    # in pg_prepared_statements.
    for _ in range(8):
        assert graph.named_in(caller, "what happened at the weekly sync?") == []
    with pool.connection() as conn:
        prepared = [row[0] for row in conn.execute(PREPARED).fetchall()]
    assert any("entity_keys_held" in s for s in prepared), prepared
    assert not any(s.strip() == gq.NAMED.strip() for s in prepared), prepared

    # A name held but hidden from the caller answers as no name at all...
    assert graph.named_in(caller, "is Quentin Marsh joining?") == []
    # ...and a name the caller may see still gets its card, by name or alias.
    for text in ("what does Robin Goodwin lead?", "ask Robin"):
        (card,) = graph.named_in(caller, text)
        assert card.entity.name == "Robin Goodwin" and card.mentioned_by
