"""Rows the permission walk is certain to refuse take no place in an arm
(design §5 steps 1 and 5; §4 "not found means not found"): each arm keeps
only its first rows, so a refused row ranked among them would push out a
memory the caller may see, and the caller's answer would change with rows
they may not see. Eligibility in SQL is the walk's condition on the memory's
provenance too (migration 0045), on every path of both arms."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import recall as r
from services.store.infrastructure.db import Caller
from tests.conftest import Team, wait_for
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration


def test_memories_about_a_private_one_never_crowd_out_what_the_caller_may_see(
    team: Team,
) -> None:
    """The probe: 120 workspace memories about ada's private one, each
    matching the query better than bob's own memory, fill both arms' first
    rows; bob must still recall his own, in every mode."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    secret = ada.remember("Private appraisal", "Only for ada.").memory.id
    for i in range(120):
        ada.remember("Zephyr zephyr", f"zephyr {i}", audience_to="workspace", about=[secret])
    mine = bob.remember(
        "Zephyr plan", "The zephyr plan for the spring launch.", audience_to="workspace"
    ).memory.id
    ada.wait_embedded(timeout=120, poll=0.2)

    lexical = bob.recall("zephyr", mode="lexical").outcome
    assert [x.memory.id for x in lexical.results] == [mine]
    counts = lexical.counts
    assert (counts.lexical, counts.fused, counts.admitted) == (1, 1, 1)

    def dense() -> Any:
        outcome = bob.recall("zephyr", mode="dense").outcome
        return outcome if outcome.dense_available else None

    got = wait_for(dense, "the dense arm to take part")
    assert [x.memory.id for x in got.results] == [mine]
    assert (got.counts.dense, got.counts.admitted) == (1, 1)
    # Ada, who may see everything, still recalls the rows as before.
    assert ada.recall("zephyr", mode="lexical").outcome.counts.lexical == 100


def _unit(rng: np.random.Generator, query: np.ndarray, cosine: float, count: int) -> np.ndarray:
    noise = rng.normal(size=(count, 384)).astype(np.float32)
    noise -= np.outer(noise @ query, query)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    rows: np.ndarray = (cosine * query + np.sqrt(1 - cosine**2) * noise).astype(np.float32)
    return rows


def test_every_path_of_both_arms_leaves_out_what_the_walk_refuses(
    one_connection: Any, stack: Stack, team: Team
) -> None:
    """600 workspace memories about ada's private one, newer than bob's and
    nearer the query: the lexical arm's capped path (walking the created_at
    index, and reading the GIN index under a filter), the HNSW scan and the
    exact dense plan each find bob's memory, and no refused row."""
    from pgvector.psycopg import register_vector

    ada, bob = team.members["ada"], team.members["bob"]
    rng = np.random.default_rng(11)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    url = workspace_url(stack, team.database_name)
    insert = (
        "INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id,"
        " purposes, created_by) SELECT gen_random_uuid(), 'note', %s, %s || i, 1, 'told', %s,"
        " '{assist}', %s FROM generate_series(1, %s) i RETURNING id"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        (mine,) = conn.execute(insert, ("Zephyr plan", "The zephyr plan ", None, bob, 1))
        (secret,) = conn.execute(insert, ("Private appraisal", "Only ada ", ada, ada, 1))
        crowd = [
            row[0] for row in conn.execute(insert, ("Zephyr zephyr", "zephyr ", None, ada, 600))
        ]
        conn.execute(
            "INSERT INTO memory_link (memory_id, kind, target_id)"
            " SELECT unnest(%s::uuid[]), 'about', %s",
            (crowd, secret[0]),
        )
        # The stack's job need not embed them: the vectors are given here.
        conn.execute("DELETE FROM embedding_job")
        with conn.cursor().copy(
            "COPY memory_embedding (memory_id, model_id, input_version, embedding) FROM STDIN"
        ) as copy:
            copy.write_row((mine[0], "m", "v", _unit(rng, query, 0.6, 1)[0]))
            for memory_id, near in zip(crowd, _unit(rng, query, 0.9, len(crowd)), strict=True):
                copy.write_row((memory_id, "m", "v", near))
        conn.execute("ANALYZE")
    mine_id = str(mine[0])
    vector: list[float] = [float(x) for x in query]
    caller = Caller(team.workspace_id, bob, "assist")
    arm = r.RecallQueries(one_connection, exact_rows=0)
    for filters in (r.Filters(), r.Filters(kinds=["note"])):
        found = arm.lexical(caller, "zephyr", 100, filters)
        assert [c.id for c in found.candidates] == [mine_id], filters
    hnsw = arm.dense(caller, vector, "m", "v", 100, r.Filters(), floor=0.3)
    assert [c.id for c in hnsw.candidates] == [mine_id]
    exact = r.RecallQueries(one_connection, exact_rows=100_000)
    found_exact = exact.dense(caller, vector, "m", "v", 100, r.Filters(), floor=0.3)
    assert [c.id for c in found_exact.candidates] == [mine_id]
    # The owner, whom the walk admits, is given the rows as before.
    owner = Caller(team.workspace_id, ada, "assist")
    assert len(arm.lexical(owner, "zephyr", 100, r.Filters()).candidates) == 100
    assert len(arm.dense(owner, vector, "m", "v", 100, r.Filters(), floor=0.3).candidates) == 100


def _copies(stack: Stack, team: Team) -> list[tuple[Any, ...]]:
    """Each vector's copy of its memory's provenance beside the memory's own."""
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        return conn.execute(
            "SELECT e.memory_id, e.provenance_audience, e.provenance_purposes::text,"
            " e.provenance_forgotten, m.provenance_audience, m.provenance_purposes::text,"
            " m.provenance_forgotten FROM memory_embedding e JOIN memory m ON m.id = e.memory_id"
        ).fetchall()


def test_the_vectors_copies_of_provenance_follow_their_memory(stack: Stack, team: Team) -> None:
    """The dense arm filters on each vector's copy of its memory's provenance:
    it is the memory's after a link, a forget of something the memory reaches
    and a removed member's hand-over."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    source = bob.remember("Kestrel source", "Kestrel figures.", audience_to="workspace").memory.id
    private = bob.remember("Kestrel private", "Only bob.").memory.id
    derived = ada.derive([source], "Kestrel digest", "From the figures.").memory.id
    about = bob.remember("Kestrel note", "Open.", audience_to="workspace", about=[private])
    ada.wait_embedded(timeout=120, poll=0.2)

    def check() -> dict[str, tuple[Any, ...]]:
        rows = _copies(stack, team)
        assert rows and all(row[1:4] == row[4:7] for row in rows), rows
        return {str(row[0]): row[1:4] for row in rows}

    assert check()[about.memory.id][0] == uuid.UUID(team.members["bob"])
    bob.forget(source, reason="wrong figures")
    assert check()[derived][2] is True
    ada.remove_member(team.members["bob"], "transfer", transfer_to=team.members["cy"])
    assert check()[about.memory.id][0] == uuid.UUID(team.members["cy"])
