"""neighbors answers a subgraph (docs/graph.md): its nodes and every relation
among them the caller may see and the walk asked for, those between two nodes
of the last hop too, within the node and edge caps; finding those costs the
pairs among the answer, not every relation of a busy node of the last hop."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from recallatron.vocabulary import MAX_RELATIONS
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import Caller
from tests import dbutil
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration


def _relation(subject: str, predicate: str, obj: str) -> dict[str, Any]:
    return {"subject": {"name": subject}, "predicate": predicate, "object": {"name": obj}}


def _pairs(edges: Any) -> list[tuple[str, str, str]]:
    return sorted((e.subject.name, e.predicate, e.object.name) for e in edges)


def _graph_transaction(stack: Stack, team: Team) -> AbstractContextManager[psycopg.Connection]:
    """A transaction as the store opens one for Ada (an owner, for assist)."""
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    return dbutil.store_transaction(stack, caller)


def test_a_relation_between_two_nodes_of_the_last_hop_is_answered(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = ada.remember(
        "A triangle and a tail",
        audience_to="workspace",
        relations=[
            _relation("A", "knows", "B"),
            _relation("A", "knows", "C"),
            _relation("B", "reports_to", "C"),
            _relation("C", "knows", "D"),
            _relation("B", "knows", "E"),
            _relation("D", "knows", "E"),
        ],
    ).memory
    ids = {m.name: m.entity_id for m in shared.mentions}
    # Between two nodes of the first hop too, but Ada's alone.
    ada.remember(
        "Private link",
        mention_ids=[ids["B"], ids["C"]],
        relations=[
            {
                "subject": {"entity_id": ids["C"]},
                "predicate": "distrusts",
                "object": {"entity_id": ids["B"]},
            }
        ],
    )
    one = bob.neighbors(ids["A"], hops=1)
    assert [(n.entity.name, n.depth) for n in one.nodes] == [("A", 0), ("B", 1), ("C", 1)]
    assert _pairs(one.edges) == [
        ("A", "knows", "B"), ("A", "knows", "C"), ("B", "reports_to", "C")
    ]  # fmt: skip
    assert not one.truncated
    # Two hops: D and E are both at depth 2, and so is their relation.
    two = bob.neighbors(ids["A"], hops=2)
    assert [(n.entity.name, n.depth) for n in two.nodes] == [
        ("A", 0), ("B", 1), ("C", 1), ("D", 2), ("E", 2)
    ]  # fmt: skip
    assert ("D", "knows", "E") in _pairs(two.edges) and len(two.edges) == 6
    # Only the predicates asked for, among the nodes as on the way.
    only = bob.neighbors(ids["A"], hops=1, predicates=["knows"])
    assert _pairs(only.edges) == [("A", "knows", "B"), ("A", "knows", "C")]
    # What only Ada may see is hers alone.
    assert ("C", "distrusts", "B") in _pairs(ada.neighbors(ids["A"], hops=1).edges)
    assert ("C", "distrusts", "B") not in _pairs(bob.neighbors(ids["A"], hops=2).edges)


def test_the_last_hops_relations_hold_to_the_edge_cap(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.store.domain import graph_traversal

    ada = team.clients["ada"]
    triangle = ada.remember(
        "A triangle",
        relations=[_relation("A", "knows", "B"), _relation("A", "knows", "C")],
    ).memory
    ids = {m.name: m.entity_id for m in triangle.mentions}
    ada.remember(
        "B and C",
        mention_ids=[ids["B"], ids["C"]],
        relations=[
            {
                "subject": {"entity_id": ids["B"]},
                "predicate": pred,
                "object": {"entity_id": ids["C"]},
            }
            for pred in ("knows", "reports_to")
        ],
    )
    # The hop fills the cap exactly (2), or the last hop's relations
    # overflow it (3): cut, and said to be; at 4 the whole subgraph fits.
    for cap, whole in ((2, False), (3, False), (4, True)):
        monkeypatch.setattr(graph_traversal, "MAX_NEIGHBOR_EDGES", cap)
        with _graph_transaction(stack, team) as conn:
            walked = graph_traversal.neighborhood(conn, ids["A"], 1, [], datetime.now(UTC))
        assert len(walked.edges) == cap and walked.truncated != whole, cap


def test_a_busy_node_of_the_last_hop_costs_its_pairs_not_its_relations(
    stack: Stack, team: Team
) -> None:
    from services.store.domain import graph_traversal

    ada = team.clients["ada"]
    first = ada.remember("Hub and spoke", relations=[_relation("Hub", "links", "Spoke")]).memory
    ids = {m.name: m.entity_id for m in first.mentions}
    # Relations both ways, so that neither end alone finds the pair cheaply.
    for batch in range(10):
        hub, spoke = {"entity_id": ids["Hub"]}, {"name": f"Spoke {batch}"}
        ends = (hub, spoke) if batch % 2 else (spoke, hub)
        ada.remember(
            f"More spokes {batch}",
            mention_ids=[ids["Hub"]],
            relations=[
                {"subject": ends[0], "predicate": f"links_{k}", "object": ends[1]}
                for k in range(MAX_RELATIONS)
            ],
        )
    with _graph_transaction(stack, team) as conn:
        conn.execute("ANALYZE relation_claim")
        before = bulk.rows_read(conn, ("relation_claim",))
        walked = graph_traversal.neighborhood(conn, ids["Spoke"], 1, [], datetime.now(UTC))
        read = bulk.rows_read(conn, ("relation_claim",)) - before
    assert [n.name for n, _ in walked.nodes] == ["Spoke", "Hub"]
    assert len(walked.edges) == 1 and not walked.truncated
    # The spoke's one relation, and the hub's pairs with the spoke: not the
    # hub's thousand relations, either way.
    assert read <= 20, read
