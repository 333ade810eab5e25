"""Recall that holds for any corpus and any caller, against the real stack:
the lexical arm reads its GIN index under the app role, document frequencies
count only what the caller may see, the walk's snapshot decides what is
answered, and the walk reads one row per candidate however deep or wide the
provenance."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import grpc
import numpy as np
import psycopg
import pytest

from benchmarks.explain_lexical import explained_as_app_role
from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.vocabulary import PURPOSES
from recallatron_devkit.stack import Stack
from services.rank.peers import EmbedClient, StoreClient
from services.rank.pipeline import Pipeline, Request, Walked
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from services.store.settings import StoreSettings
from tests import internal
from tests.conftest import Team, remember_robin
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration


def _app_conn(stack: Stack, team: Team, member: str, purpose: str = "assist") -> psycopg.Connection:
    """A connection as the services' role, in a transaction set for a caller
    exactly as the store sets it."""
    conn = psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE)
    conn.execute(
        SET_LOCALS,
        (["recallatron.member_id", "recallatron.purpose"], [team.members[member], purpose]),
    )
    return conn


def _terms(conn: psycopg.Connection, query: str) -> dict[str, tuple[int, int]]:
    return {row[0]: (int(row[1]), int(row[2])) for row in conn.execute(r.TERMS, (query,))}


# -- the lexical arm on its index --------------------------------------------------


def _eligible(stack: Stack, team: Team, member: str, purpose: str, select: str) -> set[str]:
    """The ids `select` (a query over `memory m`, with or without a WHERE)
    gives that the caller may see, by the rule itself (design §4), read as the
    database owner: no policy involved."""
    rule = (
        "(m.audience_member_id IS NULL OR m.audience_member_id = %s)"
        " AND %s::purpose = ANY (m.purposes) AND m.invalidated_at IS NULL"
    )
    joiner = " AND " if " WHERE " in select else " WHERE "
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        rows = conn.execute(select + joiner + rule, (team.members[member], purpose)).fetchall()
    return {row[0] for row in rows}


def test_lexical_arm_reads_the_gin_index_under_the_app_role(stack: Stack, team: Team) -> None:
    """For every member and purpose, the arm reads the GIN index of the
    caller's purpose only (migration 0013; the other purposes' branches never
    run) and returns exactly the matches the caller may see."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        # A workspace of some size (direct inserts; the triggers keep the
        # statistics), analysed as autovacuum would: the planner's choice of
        # index is the one it makes at scale.
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)"
            " SELECT gen_random_uuid(), 'note', 'Weekly note ' || i, 'Nothing rare in here.',"
            "  1, 'told', (ARRAY['{assist}', '{audit}', '{assist,personalize}', '{automate}'])"
            "  [1 + i %% 4]::purpose[], %s::uuid FROM generate_series(1, 4000) AS i",
            (team.members["ada"],),
        )
        conn.execute("ANALYZE memory")
    shared = ada.remember("Quasarwick rollout", "Rare word.", audience_to="workspace").memory.id
    private = ada.remember("Quasarwick budget", "Only ada's.").memory.id
    mixes = [["audit"], ["assist", "automate"], ["personalize", "audit"]]
    for i, purposes in enumerate(mixes):
        author = ada if i % 2 else bob
        author.remember(f"Quasarwick audit {i}", "Rare word.", purposes=purposes)
        author.remember(
            f"Quasarwick review {i}", "Rare word.", audience_to="workspace", purposes=purposes
        )

    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        # auto_explain shows the plan of the statement inside the function.
        plans: list[str] = []
        explained_as_app_role(conn, plans)
        rows_for: dict[tuple[str, str], set[str]] = {}
        for who in ("ada", "bob", "cy"):
            for purpose in PURPOSES:
                plans.clear()
                with conn.transaction():
                    conn.execute(
                        SET_LOCALS,
                        (
                            ["recallatron.member_id", "recallatron.purpose"],
                            [team.members[who], purpose],
                        ),
                    )
                    params = {
                        **r._filter_params(r.Filters(), 0),
                        "limit": 50,
                        **r.QueryTerms(["quasarwick"], [], False, idfs=[1.0]).params(),
                    }
                    rows_for[(who, purpose)] = {row[0] for row in conn.execute(r.LEXICAL, params)}
                nested = [p for p in plans if "memory_search_" in p or "Seq Scan" in p]
                assert nested, plans
                for plan in nested:
                    assert f"Bitmap Index Scan on memory_search_{purpose}_idx" in plan, plan
                    assert "Seq Scan on memory" not in plan, plan
                    for line in plan.splitlines():
                        if "Index Scan on memory_search_" in line and purpose not in line:
                            assert "never executed" in line, plan
    for (who, purpose), got in rows_for.items():
        matches = "SELECT m.id::text FROM memory m WHERE m.search @@ 'quasarwick'::tsquery"
        assert got == _eligible(stack, team, who, purpose, matches), (who, purpose)
    assert {shared, private} <= rows_for[("ada", "assist")]
    # The function applies eligibility itself: bob never sees ada's private row.
    assert shared in rows_for[("bob", "assist")] and private not in rows_for[("bob", "assist")]
    got = {x.memory.id for x in bob.recall("quasarwick", mode="lexical").outcome.results}
    assert got == rows_for[("bob", "assist")]


def test_both_ways_of_the_capped_path_find_the_same_rows(stack: Stack, team: Team) -> None:
    """Many matches: reading the caller's matches from the GIN index of their
    purpose and walking the created_at index newest first give the same
    newest rows, for a caller of the common purpose and of a rare one, and
    only rows the caller may see."""
    ada, bob = team.members["ada"], team.members["bob"]
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        # Direct inserts (the triggers keep the statistics): 900 matches, a
        # third private to ada, some for audit only.
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin,"
            " audience_member_id, purposes, created_by)"
            " SELECT gen_random_uuid(), 'note', 'Capword item ' || i, 'Body ' || i, 1, 'told',"
            "  CASE WHEN i %% 3 = 0 THEN %s::uuid END,"
            "  CASE WHEN i %% 7 = 0 THEN '{audit}' ELSE '{assist}' END::purpose[], %s::uuid"
            " FROM generate_series(1, 900) AS i",
            (ada, ada),
        )
    for who, purpose in (("ada", "assist"), ("bob", "assist"), ("ada", "audit"), ("bob", "audit")):
        with _app_conn(stack, team, who, purpose) as conn:
            terms = r.query_terms(conn, "capword")
            assert terms is not None and (terms.capped or purpose == "audit")
            params = {
                **r._filter_params(r.Filters(), 0),
                "limit": 100,
                "cap": r.CANDIDATE_CAP,
                "prefilter": 2 * 100,
                **terms.params(),
            }
            found = {
                by_index: [
                    tuple(row)
                    for row in conn.execute(r.LEXICAL_CAPPED, {**params, "by_index": by_index})
                ]
                for by_index in (True, False)
            }
        assert found[True] == found[False], (who, purpose)
        matches = "SELECT m.id::text FROM memory m WHERE m.search @@ 'capword'::tsquery"
        eligible = _eligible(stack, team, who, purpose, matches)
        assert len(found[True]) == min(100, len(eligible))
        assert {str(row[0]) for row in found[True]} <= eligible
    del bob


def _dense_corpus(team: Team) -> None:
    """Workspace and private memories of several purpose mixes, embedded."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    topics = ["budget", "hiring", "launch", "travel", "security", "pricing"]
    mixes = [["assist"], ["assist", "audit"], ["audit"], ["automate", "personalize"]]
    for i in range(36):
        topic = topics[i % len(topics)]
        (bob if i % 5 == 0 else ada).remember(
            f"{topic.title()} note {i}",
            f"Notes about the {topic} plan, number {i}.",
            audience_to="workspace" if i % 3 else None,
            purposes=mixes[i % len(mixes)],
        )
    ada.wait_embedded(timeout=120, poll=0.2)


def _dense_params(stack: Stack, team: Team, purpose: str) -> dict[str, Any]:
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        model = conn.execute("SELECT model_id, input_version FROM memory_embedding LIMIT 1")
        model_id, version = model.fetchone()  # type: ignore[misc]
        probe = conn.execute("SELECT embedding::text FROM memory_embedding LIMIT 1").fetchone()
    return {
        **r._filter_params(r.Filters(), 0),
        "limit": 50,
        "vector": np.array(json.loads(probe[0]), dtype=np.float32),  # type: ignore[index]
        "model_id": model_id,
        "input_version": version,
        "floor": 0.0,
    }


def _eligible_vectors(stack: Stack, team: Team, member: str, purpose: str) -> set[str]:
    return _eligible(
        stack,
        team,
        member,
        purpose,
        "SELECT e.memory_id::text FROM memory_embedding e JOIN memory m ON m.id = e.memory_id",
    )


CALLERS = [(who, purpose) for who in ("ada", "bob", "cy") for purpose in PURPOSES]


def test_both_dense_plans_find_the_same_rows(stack: Stack, team: Team) -> None:
    """A caller's vectors ranked exactly, and the filtered HNSW scan of their
    purpose's graph, give the same rows on a corpus small enough for HNSW to
    be exact: every vector the caller may see, and none other, for every
    member and purpose."""
    _dense_corpus(team)
    from pgvector.psycopg import register_vector

    for who, purpose in CALLERS:
        params = _dense_params(stack, team, purpose)
        with _app_conn(stack, team, who, purpose) as conn:
            register_vector(conn)
            conn.execute(SET_LOCALS, (["hnsw.iterative_scan"], ["relaxed_order"]))
            hnsw = [row[0] for row in conn.execute(r.DENSE[purpose], params)]
            exact = [row[0] for row in conn.execute(r.DENSE_EXACT, params)]
        assert exact == hnsw, (who, purpose)
        assert set(exact) == _eligible_vectors(stack, team, who, purpose), (who, purpose)


def test_the_exact_plan_is_the_cosine_order_of_the_callers_vectors(
    stack: Stack, team: Team
) -> None:
    """The exact plan's first rows are the caller's nearest vectors by the
    rule itself (cosine computed here, over the vectors the caller may see),
    in cosine order, ties by id, for every member and purpose."""
    _dense_corpus(team)
    from pgvector.psycopg import register_vector

    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        stored = {
            str(row[0]): np.array(json.loads(row[1]), dtype=np.float64)
            for row in conn.execute("SELECT memory_id, embedding::text FROM memory_embedding")
        }
    for who, purpose in CALLERS:
        params = {**_dense_params(stack, team, purpose), "limit": 5}
        with _app_conn(stack, team, who, purpose) as conn:
            register_vector(conn)
            got = [(str(row[0]), row[1]) for row in conn.execute(r.DENSE_EXACT, params)]
        query = np.asarray(params["vector"], dtype=np.float64)
        cosine = {
            i: float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
            for i, v in stored.items()
            if i in _eligible_vectors(stack, team, who, purpose)
        }
        assert len(got) == min(5, len(cosine)), (who, purpose)
        for memory_id, value in got:
            assert value == pytest.approx(cosine[memory_id], abs=1e-5), (who, purpose)
        assert got == sorted(got, key=lambda row: (-row[1], row[0])), (who, purpose)
        if got:  # none left out is nearer than the last one answered
            rest = set(cosine) - {memory_id for memory_id, _ in got}
            assert all(cosine[i] <= got[-1][1] + 1e-5 for i in rest), (who, purpose)


def test_the_dense_scan_walks_the_graph_of_the_callers_purpose(stack: Stack, team: Team) -> None:
    """Under the app role, the HNSW scan reads the partial index of the
    caller's purpose (migration 0013), also once the driver prepares the
    statement and Postgres caches a generic plan (the purpose is written into
    the purpose's own statement, so that plan proves the index's predicate),
    and still returns only vectors the caller may see."""
    _dense_corpus(team)
    from pgvector.psycopg import register_vector

    for who, purpose in CALLERS:
        params = _dense_params(stack, team, purpose)
        with _app_conn(stack, team, who, purpose) as conn:
            register_vector(conn)
            # As the store sets them; the other plans off, so that a corpus
            # this small still shows which index the scan would take.
            keys = ["hnsw.iterative_scan", "enable_seqscan", "enable_bitmapscan"]
            conn.execute(SET_LOCALS, (keys, ["relaxed_order", "off", "off"]))
            index = f"Index Scan using memory_embedding_{purpose}_hnsw_idx"
            # Prepared, and run past the point where Postgres would try a
            # generic plan.
            for _ in range(8):
                plan = "\n".join(
                    row[0]
                    for row in conn.execute("EXPLAIN " + r.DENSE[purpose], params, prepare=True)
                )
                assert index in plan, plan
                got = {row[0] for row in conn.execute(r.DENSE[purpose], params, prepare=True)}
                assert got == _eligible_vectors(stack, team, who, purpose), (who, purpose)


def test_the_dense_plan_follows_the_callers_share() -> None:
    # Every caller who sees at most the store's dense_exact_rows: a workspace
    # of 10,000 memories and its graph's.
    rows = StoreSettings().dense_exact_rows
    assert r.dense_exact(500, -1, rows)  # never analysed
    assert r.dense_exact(10_500, 10_500, rows)
    assert not r.dense_exact(rows + 1, rows + 1, rows)
    # Beyond it, a narrow caller: the narrow caller at 100k sees 5,563 of the
    # 9,910 vectors of the audit graph, the graph's scan visits about
    # 1/share as many vectors.
    assert not r.dense_exact(5_563, 9_910, exact_rows=2_000)
    assert r.dense_exact(5_563, 100_300, exact_rows=2_000)  # 5.5% of the graph
    assert not r.dense_exact(54_000, 97_000, rows)  # the owner at 100k
    assert not r.dense_exact(25_000, 1_000_000, rows)  # never more than EXACT_MAX_ROWS
    assert r.dense_exact(25_000, 25_000, exact_rows=30_000)  # unless the store says


def test_the_app_role_cannot_bypass_row_security(stack: Stack, team: Team) -> None:
    with _app_conn(stack, team, "bob") as conn:
        role = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert role == (False, False)
        # The candidate functions are the only way past it, and they run as a
        # role that may (their owner), with search_path pinned.
        rows = conn.execute(
            "SELECT p.proname, p.prosecdef, o.rolsuper OR o.rolbypassrls, p.proconfig"
            " FROM pg_proc p JOIN pg_roles o ON o.oid = p.proowner"
            " WHERE p.proname LIKE 'lexical_candidates%'"
        ).fetchall()
    # Migration 0048 dropped the older ones (no supported store calls them).
    assert {row[0] for row in rows} == {"lexical_candidates_bm25", "lexical_candidates_bm25_capped"}
    for _, definer, owner_bypasses, config in rows:
        assert definer and owner_bypasses
        assert "search_path=public" in config


# -- statistics that reveal nothing ---------------------------------------------------


def _snapshot(outcome: Any) -> Any:
    return (
        [
            (
                x.memory.id,
                x.scores.lexical_rank,
                round(x.scores.lexical_score, 6),
                x.scores.dense_rank,
                round(x.scores.dense_cosine, 6),
                round(x.scores.fused_score, 9),
            )
            for x in outcome.results
        ],
        (
            outcome.counts.lexical,
            outcome.counts.dense,
            outcome.counts.fused,
            outcome.counts.admitted,
        ),
    )


def test_private_terms_change_nothing_in_another_members_recall(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    texts = [
        ("Launch plan", "The launch is on Monday."),
        ("Review notes", "The review found two issues."),
        ("Plan for Q3", "The plan covers hiring."),
    ] + [(f"Errand {i}", f"Buy item number {i} at the shop.") for i in range(17)]
    for title, body in texts:
        bob.remember(title, body, audience_to="workspace")
    query = "launch plan review"
    ada.wait_embedded(timeout=120, poll=0.2)

    def bobs_view() -> Any:
        return {
            mode: _snapshot(bob.recall(query, mode=mode, limit=20, skip_rerank=True).outcome)
            for mode in ("lexical", "hybrid")
        }

    before = bobs_view()
    assert before["lexical"][0], "bob's query finds his memories"
    with _app_conn(stack, team, "bob") as conn:
        bob_terms = _terms(conn, query)
    # Ada's private memories hold one of the query's words, many times: counted
    # workspace-wide it would pass the 15% rule's threshold and be dropped.
    for i in range(12):
        ada.remember(f"Launch checklist {i}", "Private launch notes.")
    ada.wait_embedded(timeout=120, poll=0.2)
    assert bobs_view() == before
    with _app_conn(stack, team, "bob") as conn:
        assert _terms(conn, query) == bob_terms
    with _app_conn(stack, team, "ada") as conn:
        # Ada's own figures count her private memories (and bob's workspace ones).
        ada_terms = _terms(conn, query)
    assert ada_terms["launch"][0] == bob_terms["launch"][0] + 12
    # Another purpose sees other statistics: none of these are for audit.
    with _app_conn(stack, team, "bob", "audit") as conn:
        assert all(docs == (0, 0) for docs in _terms(conn, query).values())


def test_statistics_rows_are_the_callers_only(stack: Stack, team: Team) -> None:
    """Row security on the statistics: even a query that asks for every row
    gets only the workspace's and the caller's own."""
    team.clients["ada"].remember("Zanzibarite secret", "Private.")
    with _app_conn(stack, team, "bob") as conn:
        lexemes = {row[0] for row in conn.execute("SELECT lexeme FROM term_stat")}
        audiences = {str(row[0]) for row in conn.execute("SELECT audience FROM corpus_stat")}
    assert "zanzibarit" not in lexemes
    assert audiences <= {"00000000-0000-0000-0000-000000000000", team.members["bob"]}
    with _app_conn(stack, team, "ada") as conn:
        assert "zanzibarit" in {row[0] for row in conn.execute("SELECT lexeme FROM term_stat")}


# -- one view per recall ------------------------------------------------------------------


class _RacingStore:
    """The rank service's own store client, with a change made between the
    arms and the walk: the race this test makes happen every time."""

    def __init__(self, inner: StoreClient, between: list[Any]) -> None:
        self.inner = inner
        self.between = between

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def walk(
        self,
        caller: Any,
        ids: Sequence[str],
        hydrate: int,
        filters: Any,
        timeout: float | None = None,
        neighbours_of: int = 0,
    ) -> Walked[cpb.Memory]:
        while self.between:
            self.between.pop()()
        return self.inner.walk(caller, ids, hydrate, filters, timeout, neighbours_of)


def test_a_memory_changed_between_the_arms_and_the_walk_is_never_answered(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    between: list[Any] = []
    store = _RacingStore(StoreClient(internal.channel(stack, "store"), 10.0), between)
    embed = EmbedClient(internal.channel(stack, "embed"), 10.0, 10.0)
    pipeline: Pipeline[cpb.Memory] = Pipeline(store, embed)  # type: ignore[arg-type]
    caller = cpb.Caller(
        workspace_id=team.workspace_id,
        member_id=team.members["ada"],
        role=cpb.ROLE_OWNER,
        purpose=cpb.PURPOSE_ASSIST,
    )
    seen = 0
    rounds = 40
    for i in range(rounds):
        word = f"racemark{uuid.uuid4().hex[:8]}"
        m = ada.remember(f"Note {word}", f"About {word}.", audience_to="workspace").memory
        if i % 2:
            between.append(lambda m=m: ada.forget(m.id, "race"))
        else:
            between.append(
                lambda m=m, w=word: ada.supersede(m.id, m.revision, f"Newer {w}", "replaced")
            )
        outcome = pipeline.recall(
            Request(caller, team.workspace_id, word, "lexical", 10, cpb.RecallFilters())
        )
        assert not between, "the change ran between the arms and the walk"
        answered = [x.memory.id for x in outcome.results]
        seen += answered.count(m.id)
        assert outcome.counts.admitted == len(answered)
    assert seen == 0, f"{seen} of {rounds} changed memories answered"
    # Asked for, a superseded memory is still admitted by the walk.
    m = ada.remember("Keepsake quillory", "Old.", audience_to="workspace").memory
    between.append(lambda: ada.supersede(m.id, m.revision, "Keepsake quillory v2", "new"))
    outcome = pipeline.recall(
        Request(
            caller,
            team.workspace_id,
            "quillory",
            "lexical",
            10,
            cpb.RecallFilters(include_superseded=True),
        )
    )
    assert m.id in [x.memory.id for x in outcome.results]


# -- a bounded walk ------------------------------------------------------------------------


def _chain(client: Client, word: str, depth: int) -> list[str]:
    ids = [client.remember(f"{word} root", "", audience_to="workspace").memory.id]
    for i in range(depth):
        ids.append(client.derive([ids[-1]], f"{word} step {i + 1}", "").memory.id)
    return ids


def test_a_deep_chain_is_admitted_whole_until_a_link_is_forgotten(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    chain = _chain(ada, "deepchain", 80)
    outcome = ada.recall("deepchain", mode="lexical", limit=50).outcome
    # Counts are taken after the walk: every one of the 81 is admitted.
    assert outcome.counts.admitted == len(chain)
    # A hidden source anywhere refuses everything derived from it.
    ada.forget(chain[3], "gone")
    for client in (ada, bob):
        outcome = client.recall("deepchain", mode="lexical", limit=50).outcome
        assert {x.memory.id for x in outcome.results} == set(chain[:3])
        assert outcome.counts.admitted == 3


def test_provenance_through_about_links_to_a_private_memory(stack: Stack, team: Team) -> None:
    ada, bob, cy = team.clients["ada"], team.clients["bob"], team.clients["cy"]
    secret = ada.remember("Aboutmark secret", "Ada's own.").memory.id
    about = ada.remember("Aboutmark note", "Open.", audience_to="workspace", about=[secret])
    derived = cy.derive([about.memory.id], "Aboutmark digest", "From the note.").memory.id

    def found(client: Client) -> set[str]:
        outcome = client.recall("aboutmark", mode="lexical", limit=50).outcome
        return {x.memory.id for x in outcome.results}

    # Ada sees all three; bob and cy cannot see the memory the note is about,
    # so neither the note nor what is derived from it is theirs to recall
    # (cy's own digest included: its provenance reaches ada's secret).
    assert found(ada) == {secret, about.memory.id, derived}
    assert found(bob) == set()
    assert found(cy) == set()


def test_derive_racing_forget_never_leaves_a_recallable_orphan(stack: Stack, team: Team) -> None:
    import threading

    ada = team.clients["ada"]
    rounds = 12
    failures: list[grpc.RpcError] = []
    for i in range(rounds):
        word = f"orphanmark{uuid.uuid4().hex[:6]}"
        source = ada.remember(f"{word} source", "", audience_to="workspace").memory.id
        made: list[str] = []

        def derive(source: str = source, word: str = word, made: list[str] = made) -> None:
            try:
                made.append(ada.derive([source], f"{word} derived", "").memory.id)
            except grpc.RpcError as exc:
                # The forget won: the source is not found; nothing else may fail.
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    failures.append(exc)

        threads = [threading.Thread(target=derive) for _ in range(3)]
        threads.append(threading.Thread(target=lambda s=source: ada.forget(s, "race")))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
        # Whichever won, nothing derived from the forgotten source is recalled.
        outcome = ada.recall(word, mode="lexical", limit=50).outcome
        assert not {x.memory.id for x in outcome.results}, (i, made)
        if made:
            with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
                marked = conn.execute(
                    "SELECT bool_and(provenance_forgotten) FROM memory WHERE id = ANY(%s::uuid[])",
                    (made,),
                ).fetchone()
            assert marked == (True,), (i, made)


def test_a_wide_fan_in_is_walked_once(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    sources = [
        ada.remember(f"Fanin source {i}", "wideword", audience_to="workspace").memory.id
        for i in range(49)
    ]
    secret = ada.remember("Fanin secret", "wideword").memory.id
    open_summary = ada.derive(sources, "Fanin summary", "wideword").memory.id
    ada_summary = ada.derive([*sources, secret], "Fanin private summary", "wideword").memory.id
    outcome = bob.recall("wideword", mode="lexical", limit=50).outcome
    assert {x.memory.id for x in outcome.results} == {*sources, open_summary}
    assert outcome.counts.admitted == 50
    outcome = ada.recall("wideword", mode="lexical", limit=50).outcome
    assert outcome.counts.admitted == 52
    assert {x.memory.id for x in outcome.results} <= {*sources, open_summary, secret, ada_summary}


# -- planned once per connection ---------------------------------------------------

# The tables the lexical arm's statistics and the entity cards read.
_CARD_TABLES = (
    "memory",
    "mention",
    "entity",
    "entity_alias",
    "attribute_claim",
    "relation_claim",
    "term_stat",
    "corpus_stat",
)
_CARD_STATEMENTS = (
    "FROM term_stat",
    "FROM entity_group(",
    "FROM attribute_claim",
    "FROM relation_claim",
    "FROM entity_alias",
    "FROM mention mn",
)


def assert_generic_plans(
    conn: psycopg.Connection, member_id: str, markers: Sequence[str], tables: Sequence[str]
) -> None:
    """Each prepared statement of the session, by what it reads (``markers``),
    planned only generically; and each generic plan, with sequential scans
    off, reads none of ``tables`` whole."""
    prepared = conn.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    ).fetchall()
    conn.rollback()
    ours = {marker: [row for row in prepared if marker in row[0]] for marker in markers}
    for marker, rows in ours.items():
        assert rows, (marker, prepared)
        for statement, generic, custom in rows:
            assert custom == 0 and generic >= 1, (statement, generic, custom)
    with conn.transaction():
        conn.execute(
            SET_LOCALS,
            (
                ["recallatron.member_id", "recallatron.purpose", "enable_seqscan"],
                [member_id, "assist", "off"],
            ),
        )
        for statement in {row[0] for rows in ours.values() for row in rows}:
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN (GENERIC_PLAN) {statement}"))
            for table in tables:
                assert f"Seq Scan on {table} " not in plan + " ", plan


def test_the_term_statistics_and_the_entity_cards_run_on_generic_plans(
    one_connection: Any, team: Team
) -> None:
    """Once the driver has prepared them, the statements of the lexical arm's
    transaction and of the entity cards are never planned again per execution
    (db.GENERIC_PLANS: custom plans cost more planning than running), and each
    generic plan can still read the indexes: with sequential scans disabled,
    none is left in it."""
    from services.store.domain.graph import GraphStore
    from services.store.infrastructure.db import Caller

    ada = team.clients["ada"]
    remember_robin(ada, "Robin Goodwin leads the Apollo project from Lisbon.")
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    queries = r.RecallQueries(one_connection, StoreSettings().dense_exact_rows)
    graph = GraphStore(one_connection)
    for _ in range(8):  # past the driver's prepare threshold (5)
        (card,) = graph.named_in(caller, "what does Robin Goodwin lead?")
        assert card.attributes and card.relations and card.aliases and card.mentioned_by
        assert queries.lexical(caller, "Apollo project Lisbon", 50, r.Filters()).candidates
    with one_connection.caller_pool(caller).connection() as conn:
        assert_generic_plans(conn, caller.member_id, _CARD_STATEMENTS, _CARD_TABLES)


# What a read (and every write's read-back) runs, by what each statement reads.
_READ_STATEMENTS = (
    "WITH RECURSIVE newer",
    "FROM memory_link l",
    "FROM mention mn",
    "FROM memory_revision",
    "FROM attribute_claim",
    "FROM relation_claim",
    "FROM entity_alias",
)


def test_a_read_runs_on_generic_plans(one_connection: Any, team: Team) -> None:
    """A read of one memory with its provenance, as each write reads its
    memory back: once the driver has prepared the statements, none is planned
    again per execution (GENERIC_PLANS; before, each was, costing several
    times its running), and each generic plan still reads the indexes."""
    from services.store.domain.memories import MemoryStore
    from services.store.infrastructure.db import Caller

    ada = team.clients["ada"]
    first = ada.remember("Apollo kickoff", "The kickoff is in Lisbon.", audience_to="workspace")
    made = remember_robin(
        ada,
        "Robin Goodwin leads the Apollo project.",
        audience_to="workspace",
        about=[first.memory.id],
    ).memory
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    memories = MemoryStore(one_connection.dbs, one_connection)
    for _ in range(8):  # past the driver's prepare threshold (5)
        (view,) = memories.read(caller, [made.id])
        assert view.links and view.mentions and view.claims and view.relations and view.aliases
    with one_connection.caller_pool(caller).connection() as conn:
        tables = (*_CARD_TABLES, "memory_link", "memory_revision")
        assert_generic_plans(conn, caller.member_id, _READ_STATEMENTS, tables)


def test_a_selective_filter_on_the_graph_still_finds_every_row(
    one_connection: Any, stack: Stack, team: Team
) -> None:
    """On the HNSW plan, a filter that few of the graph's vectors pass (60
    decisions among 25,060 memories, the notes all nearer the query) still
    returns every decision above the floor: the filtered scan gives up after
    hnsw.max_scan_tuples visited vectors (it returned none), and the arm then
    ranks the caller's vectors exactly."""
    from pgvector.psycopg import register_vector

    from services.store.infrastructure.db import Caller

    rng = np.random.default_rng(7)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)

    def near(cosine: float, count: int) -> np.ndarray:
        noise = rng.normal(size=(count, 384)).astype(np.float32)
        noise -= np.outer(noise @ query, query)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        return (cosine * query + np.sqrt(1 - cosine**2) * noise).astype(np.float32)

    decisions, notes = 60, 25_000
    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        register_vector(conn)
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)"
            " SELECT gen_random_uuid(),"
            " CASE WHEN i <= %s THEN 'decision' ELSE 'note' END::memory_kind,"
            " 'Weekly note ' || i, 'Nothing rare in here.', 1, 'told', '{assist}', %s"
            " FROM generate_series(1, %s) i",
            (decisions, team.members["ada"], decisions + notes),
        )
        rows = conn.execute("SELECT id, kind FROM memory ORDER BY kind, id").fetchall()
        vectors = {"decision": near(0.5, decisions), "note": near(0.9, notes)}
        taken = {"decision": 0, "note": 0}
        # The graph built once over the vectors (as an import does), not
        # vector by vector.
        conn.execute("DROP INDEX memory_embedding_assist_hnsw_idx")
        with conn.cursor().copy(
            "COPY memory_embedding (memory_id, model_id, input_version, embedding) FROM STDIN"
        ) as copy:
            for memory_id, kind in rows:
                copy.write_row((memory_id, "m", "v", vectors[kind][taken[kind]]))
                taken[kind] += 1
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute(
            "CREATE INDEX memory_embedding_assist_hnsw_idx ON memory_embedding"
            " USING hnsw (embedding vector_cosine_ops) WHERE purposes @> '{assist}'::purpose[]"
        )
        conn.execute("ANALYZE")
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    # exact_rows=0: the plan this caller gets at any size past the setting.
    arm = r.RecallQueries(one_connection, exact_rows=0)
    found = arm.dense(caller, query, "m", "v", 100, r.Filters(kinds=["decision"]), floor=0.3)
    assert len(found.candidates) == decisions
    assert all(c.score == pytest.approx(0.5, abs=1e-3) for c in found.candidates)
    unfiltered = arm.dense(caller, query, "m", "v", 100, r.Filters(), floor=0.3)
    assert len(unfiltered.candidates) == 100
