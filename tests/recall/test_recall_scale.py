"""Recall that holds for any corpus and any caller, against the real stack:
the lexical arm reads its GIN index under the app role, document frequencies
count only what the caller may see, the walk's snapshot decides what is
answered, and the walk is bounded."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from recallatron.client import Client
from recallatron.grpcclient import make_channel
from recallatron.v1 import common_pb2 as cpb
from recallatron_cli.stack import Stack
from services.rank.peers import EmbedClient, StoreClient
from services.rank.pipeline import Pipeline, Request, Walked
from services.store import recall as r
from services.store.db import APP_ROLE, SET_LOCALS
from services.store.memories import MAX_WALK_DEPTH
from tests.conftest import Team
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


def test_lexical_arm_reads_the_gin_index_under_the_app_role(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    for i in range(40):
        ada.remember(f"Weekly note {i}", "Nothing rare in here.", audience_to="workspace")
    shared = ada.remember("Quasarwick rollout", "Rare word.", audience_to="workspace").memory.id
    private = ada.remember("Quasarwick budget", "Only ada's.").memory.id

    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        # auto_explain shows the plan of the statement inside the function.
        plans: list[str] = []
        conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for name, value in [
            ("auto_explain.log_min_duration", "0"),
            ("auto_explain.log_nested_statements", "on"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_level", "notice"),
        ]:
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        conn.execute(f"SET ROLE {APP_ROLE}")
        rows_for: dict[str, set[str]] = {}
        for who in ("ada", "bob"):
            with conn.transaction():
                conn.execute(
                    SET_LOCALS,
                    (
                        ["recallatron.member_id", "recallatron.purpose"],
                        [team.members[who], "assist"],
                    ),
                )
                params = {
                    **r._filter_params(r.Filters(), 0),
                    "limit": 50,
                    "tsquery": r.tsquery_text(["quasarwick"]),
                }
                rows_for[who] = {row[0] for row in conn.execute(r.LEXICAL, params)}
    nested = [p for p in plans if "memory_search_idx" in p or "Seq Scan" in p]
    assert nested, plans
    for plan in nested:
        assert "Bitmap Index Scan on memory_search_idx" in plan, plan
        assert "Seq Scan on memory" not in plan, plan
    assert rows_for["ada"] == {shared, private}
    # The function applies eligibility itself: bob never sees ada's private row.
    assert rows_for["bob"] == {shared}
    got = {x.memory.id for x in bob.recall("quasarwick", mode="lexical").outcome.results}
    assert got == {shared}


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
    assert {row[0] for row in rows} == {"lexical_candidates", "lexical_candidates_newest"}
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
    ) -> Walked[cpb.Memory]:
        while self.between:
            self.between.pop()()
        return self.inner.walk(caller, ids, hydrate, filters, timeout)


def test_a_memory_changed_between_the_arms_and_the_walk_is_never_answered(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    between: list[Any] = []
    store = _RacingStore(StoreClient(make_channel(stack.address("store")), 10.0), between)
    embed = EmbedClient(make_channel(stack.address("embed")), 10.0, 10.0)
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


def test_the_walk_refuses_provenance_deeper_than_its_cap(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    chain = _chain(ada, "deepchain", MAX_WALK_DEPTH + 2)
    depths = {
        str(row[0]): row[1]
        for row in psycopg.connect(workspace_url(stack, team.database_name))
        .execute("SELECT id, link_depth FROM memory WHERE id = ANY(%s::uuid[])", (chain,))
        .fetchall()
    }
    assert [depths[i] for i in chain] == list(range(len(chain)))
    outcome = ada.recall("deepchain", mode="lexical", limit=50).outcome
    # Counts are taken after the walk: the lexical arm found all 67.
    assert outcome.counts.admitted == MAX_WALK_DEPTH + 1
    assert {x.memory.id for x in outcome.results} <= set(chain[: MAX_WALK_DEPTH + 1])
    # Still readable by id: the cap is recall's, not read's.
    assert ada.read([chain[-1]]).memories[0].id == chain[-1]
    # A hidden source anywhere refuses everything derived from it, as before.
    ada.forget(chain[3], "gone")
    got = {x.memory.id for x in bob.recall("deepchain", mode="lexical", limit=50).outcome.results}
    assert got == set(chain[:3])


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
