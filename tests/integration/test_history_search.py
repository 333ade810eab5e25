"""History search (design §3.2, §8.4) on its index: beneath the owner-only
policy `@@` is not leakproof, so a search could not use the GIN index and
matched every turn of the owner's history, its cost growing with the history
rather than with what it finds (migration 0019)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron.vocabulary import PURPOSE, PURPOSES
from recallatron_devkit.stack import Stack
from services.store.domain.history import SEARCH_HISTORY
from services.store.infrastructure.db import APP_ROLE, CONTROL_DATABASE, SET_LOCALS
from tests import dbutil
from tests.conftest import Team, wait_for
from tests.dbutil import workspace_url
from tests.internal import channel
from tests.replicas import second_gateway as second_gateway  # the fixture

pytestmark = pytest.mark.integration

TURNS = 20_000
# Imported history, as the migration writes it: the owner's turns, one in
# 5,000 holding a rare word.
HISTORY = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT gen_random_uuid(), %s, 'chat-' || (i / 50), 'user',
       'turn ' || i || ' about the weekly sync'
           || CASE WHEN i %% 5000 = 0 THEN ' quetzal' ELSE '' END,
       now() - make_interval(secs => i)
FROM generate_series(1, %s) AS i
"""
# Rows of history_entry this transaction read (pg_stat_xact_* counts the
# backend's own work, SECURITY DEFINER functions included).
ROWS_READ = """
SELECT seq_scan, seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
WHERE relname = 'history_entry'
"""


def search(stack: Stack, team: Team, member: str, word: str) -> tuple[list[str], tuple[int, int]]:
    """The store's search as the services' role for ``member``, sequential
    scans off: the texts found and (sequential scans, rows read)."""
    with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
        conn.execute(
            SET_LOCALS,
            (["recallatron.member_id", "enable_seqscan"], [team.members[member], "off"]),
        )
        rows = conn.execute(SEARCH_HISTORY, {"tsquery": word, "limit": 10}).fetchall()
        read = conn.execute(ROWS_READ).fetchone()
    assert read is not None
    return [r[3] for r in rows], (int(read[0]), int(read[1]))


def test_history_search_reads_its_matches_not_the_whole_history(stack: Stack, team: Team) -> None:
    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        conn.execute(HISTORY, (team.members["ada"], TURNS))
        conn.execute("ANALYZE history_entry")
    found, (scans, read) = search(stack, team, "ada", "quetzal")
    assert len(found) == TURNS // 5000 and all("quetzal" in text for text in found)
    assert (scans, read) == (0, len(found))
    # The policy's rule holds inside the search: another member finds nothing.
    assert search(stack, team, "bob", "quetzal")[0] == []


def _scoped(stack: Stack, operator: Client, member_id: str, purposes: list[str]) -> Client:
    return Client(
        stack.gateway, operator.create_token(member_id, "scoped", purposes=purposes).token
    )


def test_history_is_evidence_for_assist_and_audit_only(
    stack: Stack, operator: Client, team: Team
) -> None:
    """The owner's imported turns are conversation evidence (docs/api.md,
    History): a recall for assist or audit gets them; one for automate or
    personalize (all a token scoped to those can ask for) gets its memories
    without them, told why; the store's own search answers such a caller
    nothing either."""
    ada = team.members["ada"]
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
        " VALUES (%s, %s, 'c1', 'user', 'the kayak is booked for the lake', now()) RETURNING id",
        (str(uuid.uuid4()), ada),
    )
    clients = {p: _scoped(stack, operator, ada, [p]) for p in PURPOSES}
    try:
        for purpose in ("assist", "audit"):
            got = clients[purpose].recall("kayak", purpose=purpose, include_history=True)
            assert [h.text for h in got.outcome.history] == ["the kayak is booked for the lake"]
            assert got.outcome.history_unavailable_reason == ""
        for purpose in ("automate", "personalize"):
            # The scoped token and the owner's own unscoped one alike.
            for client in (clients[purpose], team.clients["ada"]):
                got = client.recall("kayak", purpose=purpose, include_history=True)
                assert list(got.outcome.history) == [], purpose
                reason = got.outcome.history_unavailable_reason
                assert purpose in reason and "assist" in reason and "audit" in reason, reason
    finally:
        for client in clients.values():
            client.close()
    store = store_pb2_grpc.StoreServiceStub(channel(stack, "store"))
    for purpose in PURPOSES:
        who = cpb.Caller(
            workspace_id=team.workspace_id,
            member_id=ada,
            purpose=PURPOSE.value(purpose),
            role=cpb.ROLE_OWNER,
        )
        found = store.SearchHistory(store_pb2.SearchHistoryRequest(caller=who, query="kayak"))
        assert len(found.entries) == (1 if purpose in ("assist", "audit") else 0), purpose


def _refused(call: Callable[[], Any]) -> bool:
    """True once the call is UNAUTHENTICATED; False while it is answered."""
    try:
        call()
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, (exc.code(), exc.details())
        return True
    return False


def test_a_removed_owner_has_no_history_search_nor_settings_change(
    stack: Stack, operator: Client, team: Team, second_gateway: str
) -> None:
    """A second owner removed (their history handed to the first): their
    token, cached at two gateways, is refused before the history search and
    the settings change, at this gateway on the next call and at the other
    once the store's revocation stream reaches it; the settings stay."""
    cy = operator.create_member(team.workspace_id, f"cy-{uuid.uuid4().hex[:8]}", owner=True)
    cy_id = cy.member.id
    token = operator.create_token(cy_id, "cy").token
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
        " VALUES (%s, %s, 'c1', 'user', 'cy booked the quokka tour', now()) RETURNING id",
        (str(uuid.uuid4()), cy_id),
    )
    here, there = Client(stack.gateway, token), Client(second_gateway, token)
    try:
        for client in (here, there, here, there):
            got = client.recall("quokka", include_history=True).outcome.history
            assert [h.text for h in got] == ["cy booked the quokka tour"]
            client.update_settings(rerank_depth=11)
        team.clients["ada"].remove_member(cy_id, "transfer", team.members["ada"])
        for client in (here, there):
            history = partial(client.recall, "quokka", include_history=True)
            for call in (history, partial(client.update_settings, rerank_depth=3)):
                if client is here:
                    assert _refused(call)
                else:
                    wait_for(partial(_refused, call), "the removed owner refused", 30)
    finally:
        here.close()
        there.close()
    settings = dbutil.query(
        stack,
        CONTROL_DATABASE,
        "SELECT settings FROM workspace WHERE id = %s",
        (team.workspace_id,),
    )
    assert settings[0][0]["rerank_depth"] == 11, settings
    # Handed over: the remaining owner finds the turn.
    got = team.clients["ada"].recall("quokka", include_history=True).outcome.history
    assert [h.text for h in got] == ["cy booked the quokka tour"]
