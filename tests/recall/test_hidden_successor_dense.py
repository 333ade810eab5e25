"""The dense twin of test_hidden_successor.py (design §4, "Not found means not
found"): a memory superseded by one the caller may not see reads to them as
current and keeps its vector, so both arms find it, and its ranks are the
same with and without the successor the caller may not see. A recall asking
for superseded memories finds them in the dense arm too."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest

from recallatron.vocabulary import PURPOSES
from recallatron_devkit.stack import Stack
from services.store.domain import recall as r
from services.store.infrastructure.db import Caller
from tests.conftest import Team, wait_for
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

QUERY = "Which rack holds the build server?"


def _ranks(outcome: Any) -> list[tuple[str, int, int, float]]:
    return [
        (x.memory.id, x.scores.lexical_rank, x.scores.dense_rank, round(x.scores.dense_cosine, 5))
        for x in outcome.results
    ]


def _dense(client: Any, query: str, include_superseded: bool = False) -> Any:
    def probe() -> Any:
        outcome = client.recall(query, mode="dense", include_superseded=include_superseded)
        return outcome.outcome if outcome.outcome.dense_available else None

    return wait_for(probe, "the dense arm to take part")


def test_a_memory_whose_successor_the_caller_may_not_see_keeps_its_dense_rank(
    team: Team,
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    old = bob.remember("The build server is in rack four", audience_to="workspace").memory
    bob.remember("The build server has 64 GB of memory", audience_to="workspace")
    bob.remember("The coffee machine is in the kitchen", audience_to="workspace")
    ada.wait_embedded(timeout=120, poll=0.2)
    before = ada.recall(QUERY, skip_rerank=True).outcome
    assert old.id in [x.memory.id for x in before.results]

    successor = bob.supersede(
        old.id,
        old.revision,
        "The build server moved to rack nine",
        audience_to=team.members["bob"],
    ).memory
    ada.wait_embedded(timeout=120, poll=0.2)
    assert ada.read([old.id]).memories[0].superseded_by_id == ""

    # Ada's dense arm finds the memory she reads as current...
    dense = _dense(ada, QUERY)
    assert old.id in [x.memory.id for x in dense.results], _ranks(dense)
    # ...and her hybrid ranks are those she had before bob's private successor.
    after = ada.recall(QUERY, skip_rerank=True).outcome
    assert _ranks(after) == _ranks(before)
    assert (after.counts.lexical, after.counts.dense, after.counts.fused) == (
        before.counts.lexical,
        before.counts.dense,
        before.counts.fused,
    )

    # Bob, who sees the successor, finds the old memory densely only when he
    # asks for superseded ones.
    mine = [x.memory.id for x in _dense(bob, QUERY).results]
    assert successor.id in mine and old.id not in mine
    with_old = [x.memory.id for x in _dense(bob, QUERY, include_superseded=True).results]
    assert {successor.id, old.id} <= set(with_old)


def _unit(rng: np.random.Generator, query: np.ndarray, cosine: float, count: int) -> np.ndarray:
    noise = rng.normal(size=(count, 384)).astype(np.float32)
    noise -= np.outer(noise @ query, query)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    rows: np.ndarray = (cosine * query + np.sqrt(1 - cosine**2) * noise).astype(np.float32)
    return rows


def _workspace(stack: Stack, team: Team, query: np.ndarray) -> dict[str, Any]:
    """Per purpose: a memory superseded by ada's private one, one superseded
    by a memory for that purpose alone (hidden from a caller of every other
    purpose), one superseded by a workspace memory of every purpose, one
    superseded by ada's private one which a workspace memory superseded in
    turn (migration 0063: superseded for whoever sees a later one), and 40
    current ones farther from the query; every memory for every purpose,
    each with its vector, given here."""
    from pgvector.psycopg import register_vector

    ada = team.members["ada"]
    rng = np.random.default_rng(7)
    insert = (
        "INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id,"
        " purposes, created_by) SELECT gen_random_uuid(), 'note', %s, %s || i, 1, 'told', %s,"
        " %s::purpose[], %s FROM generate_series(1, %s) i RETURNING id"
    )
    every = "{" + ",".join(PURPOSES) + "}"
    made: dict[str, Any] = {"fillers": []}
    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        register_vector(conn)

        def one(title: str, audience: str | None, purposes: str) -> str:
            row = conn.execute(insert, (title, "Quokka ", audience, purposes, ada, 1)).fetchone()
            assert row is not None
            return str(row[0])

        def supersede(old: str, successor: str) -> None:
            conn.execute("UPDATE memory SET superseded_by_id = %s WHERE id = %s", (successor, old))

        for purpose in PURPOSES:
            by_private, by_purpose, by_shared = (
                one(f"Quokka {purpose} {n}", None, every) for n in ("private", "purpose", "shared")
            )
            supersede(by_private, one("Quokka private successor", ada, every))
            supersede(by_purpose, one("Quokka purpose successor", None, "{" + purpose + "}"))
            supersede(by_shared, one("Quokka shared successor", None, every))
            by_chain = one(f"Quokka {purpose} chain", None, every)
            middle = one("Quokka private middle", ada, every)
            supersede(by_chain, middle)
            supersede(middle, one("Quokka shared end", None, every))
            made[purpose] = (by_private, by_purpose, by_shared, by_chain)
        made["fillers"] = [
            str(row[0])
            for row in conn.execute(insert, ("Quokka filler", "Quokka ", None, every, ada, 40))
        ]
        conn.execute("DELETE FROM embedding_job")
        ids = [str(row[0]) for row in conn.execute("SELECT id FROM memory ORDER BY id")]
        near = set(ids) - set(made["fillers"])
        vectors = {
            memory_id: _unit(rng, query, 0.9 if memory_id in near else 0.5, 1)[0]
            for memory_id in ids
        }
        with conn.cursor().copy(
            "COPY memory_embedding (memory_id, model_id, input_version, embedding) FROM STDIN"
        ) as copy:
            for memory_id, vector in vectors.items():
                copy.write_row((memory_id, "m", "v", vector))
        conn.execute("ANALYZE")
        made["vectors"] = {
            str(row[0]) for row in conn.execute("SELECT memory_id FROM memory_embedding")
        }
    return made


def test_both_dense_paths_admit_a_superseded_memory_as_the_lexical_arm_does(
    one_connection: Any, stack: Stack, team: Team
) -> None:
    """For bob, of every purpose: the memory superseded by ada's private one
    is current, and so is the one superseded for another purpose alone; one
    superseded by a memory he sees, directly or along its chain, is not,
    unless he asks for superseded memories. The HNSW scan and the exact plan
    answer as the lexical arm."""
    rng = np.random.default_rng(3)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    made = _workspace(stack, team, query)
    # Every memory keeps its vector, superseded ones too.
    assert len(made["vectors"]) == len(made["fillers"]) + 9 * len(PURPOSES)
    vector: list[float] = [float(x) for x in query]
    hnsw = r.RecallQueries(one_connection, exact_rows=0)
    exact = r.RecallQueries(one_connection, exact_rows=100_000)
    for purpose in PURPOSES:
        caller = Caller(team.workspace_id, team.members["bob"], purpose)
        by_private, by_purpose, by_shared, by_chain = made[purpose]
        others = {made[p][1] for p in PURPOSES if p != purpose}
        for include in (False, True):
            filters = r.Filters(include_superseded=include)
            lexical = {c.id for c in hnsw.lexical(caller, "quokka", 100, filters).candidates}
            expected = {by_private, *others} | ({by_shared, by_chain} if include else set())
            assert expected <= lexical, (purpose, include, expected - lexical)
            assert (by_purpose in lexical) == include, (purpose, include)
            assert (by_chain in lexical) == include, (purpose, include)
            # The near rows first: the HNSW scan returns its limit, so it is
            # its own answer (no exact plan after it).
            limit = len(lexical - set(made["fillers"]))
            for arm in (hnsw, exact):
                found = arm.dense(caller, vector, "m", "v", limit, filters, floor=0.3)
                got = {c.id for c in found.candidates}
                assert got == lexical - set(made["fillers"]), (purpose, include, arm.exact_rows)
