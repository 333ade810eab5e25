"""`lookup` and `neighbors` as of a time through a merge (docs/graph.md,
"Time" and "Reading through a merge"): an entity first mentioned after that
time did not exist then, so it names no card and no node then, not even as
the head or a merged member of a group it has joined since."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_an_entity_merged_in_after_as_of_is_not_in_the_answer_then(team: Team) -> None:
    ada = team.clients["ada"]
    early = ada.remember(
        "Nell at the harbour",
        "Nell works at the harbour with Ola.",
        audience_to="workspace",
        relations=[
            {"subject": {"name": "Nell"}, "predicate": "works_with", "object": {"name": "Ola"}}
        ],
    ).memory
    ids = {m.name: m.entity_id for m in early.mentions}
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    later = ada.remember(
        "Nell Ward", "Nell Ward runs the harbour office.", mention_names=["Nell Ward"]
    ).memory
    ward = later.mentions[0].entity_id
    # The newer entity kept, the older merged into it: the group answers as
    # "Nell Ward" now.
    ada.merge_entities(ward, ids["Nell"])
    assert [(c.id, [m.id for m in c.merged]) for c in ada.lookup("Nell").entities] == [
        (ward, [ids["Nell"]])
    ]

    then = ada.lookup("Nell", as_of=between).entities
    assert [(c.id, c.name, [m.id for m in c.merged]) for c in then] == [
        (ids["Nell"], "Nell", [])
    ], "lookup as of a time named an entity first mentioned after it"
    walked = ada.neighbors(ids["Ola"], hops=1, as_of=between)
    assert sorted((n.entity.id, n.depth) for n in walked.nodes) == sorted(
        [(ids["Ola"], 0), (ids["Nell"], 1)]
    ), "neighbors as of a time reached a node first mentioned after it"
    assert {(e.subject.id, e.object.id) for e in walked.edges} == {(ids["Nell"], ids["Ola"])}
    start = ada.neighbors(ids["Nell"], hops=1, as_of=between)
    assert start.nodes[0].entity.id == ids["Nell"] and not start.nodes[0].merged
