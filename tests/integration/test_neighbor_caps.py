"""neighbors' edge cap counts distinct edges (docs/graph.md): each hop asks for
the relations touching its frontier, which include the ones that led there;
those are not counted again, so a walk whose distinct edges fit under the
cap is whole and not marked truncated."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import Caller
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _relation(subject: str, obj: str) -> dict[str, Any]:
    return {"subject": {"name": subject}, "predicate": "works_with", "object": {"name": obj}}


def _graph_transaction(stack: Stack, team: Team) -> AbstractContextManager[psycopg.Connection]:
    """A transaction as the store opens one for Ada (an owner, for assist)."""
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    return dbutil.store_transaction(stack, caller)


def test_edges_that_led_to_a_hop_do_not_count_against_the_cap(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.store.domain import graph_traversal

    ada = team.clients["ada"]
    hub = ada.remember(
        "The hub's three",
        relations=[_relation("Hub", n) for n in ("Alba", "Bruno", "Carmen")],
        mention_names=["Hub"],
    ).memory
    start = next(m.entity_id for m in hub.mentions if m.name == "Hub")
    alba = next(r.object.id for r in hub.relations if r.object.name == "Alba")
    # Newer: Alba's own two edges, asked for at the second hop beside the
    # hub's edge to Alba, which led there.
    ada.remember(
        "Alba's pair",
        relations=[
            {"subject": {"entity_id": alba}, "predicate": "works_with", "object": {"name": n}}
            for n in ("Dara", "Emil")
        ],
    )
    monkeypatch.setattr(graph_traversal, "MAX_NEIGHBOR_EDGES", 5)
    with _graph_transaction(stack, team) as conn:
        walked = graph_traversal.neighborhood(conn, start, 2, [], datetime.now(UTC))
    pairs = sorted((e.subject.name, e.object.name) for e in walked.edges)
    assert pairs == [
        ("Alba", "Dara"), ("Alba", "Emil"), ("Hub", "Alba"), ("Hub", "Bruno"), ("Hub", "Carmen")
    ]  # fmt: skip
    assert not walked.truncated
