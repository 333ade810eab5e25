"""A removed member authors nothing new (design §10; migration 0035): a memory
or episode whose author the workspace lists as removed is refused by the
database whatever its audience, so an old-store migration whose owner is
removed while it writes workspace memories stops and says so; what they wrote
before stays theirs and is read, corrected, superseded and forgotten as
before."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.security.test_removed_member_history import migrate_removing_owner, old_store

pytestmark = pytest.mark.integration

INSERT_MEMORY = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by,
                    audience_member_id)
VALUES (gen_random_uuid(), 'note', %s, '', 1, 'told', '{assist}', %s, %s)
"""
INSERT_EPISODE = """
INSERT INTO episode (id, title, started_at, ended_at, audience_member_id, purposes, created_by)
VALUES (gen_random_uuid(), %s, now(), now(), %s, '{assist}', %s)
"""


def refusal(stack: Stack, team: Team, statement: str, params: tuple[Any, ...]) -> str | None:
    """The column the database names refusing the row (None: it went in)."""
    try:
        with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
            conn.execute(statement, params)
    except psycopg.errors.InvalidParameterValue as exc:
        return exc.diag.column_name
    return None


def test_no_row_is_authored_by_a_removed_member_whatever_its_audience(
    stack: Stack, team: Team
) -> None:
    ada, bob, cy = team.members["ada"], team.members["bob"], team.members["cy"]
    team.clients["ada"].remove_member(bob, "erase")
    refused = {
        "workspace memory": refusal(stack, team, INSERT_MEMORY, ("by bob", bob, None)),
        "memory for cy": refusal(stack, team, INSERT_MEMORY, ("by bob for cy", bob, cy)),
        "memory for bob": refusal(stack, team, INSERT_MEMORY, ("by ada for bob", ada, bob)),
        "workspace episode": refusal(stack, team, INSERT_EPISODE, ("by bob", None, bob)),
    }
    assert refused == {
        "workspace memory": "created_by",
        "memory for cy": "created_by",
        "memory for bob": "audience.member_id",
        "workspace episode": "created_by",
    }
    left = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM memory WHERE created_by = %s OR audience_member_id = %s",
        (bob, bob),
    )
    assert left == [(0,)]
    # A current member's rows go in as before.
    assert refusal(stack, team, INSERT_MEMORY, ("by cy", cy, None)) is None
    assert refusal(stack, team, INSERT_EPISODE, ("by cy", None, cy)) is None


def test_what_a_removed_member_wrote_before_is_read_corrected_and_forgotten(
    team: Team,
) -> None:
    ada, bob, cy = team.clients["ada"], team.clients["bob"], team.clients["cy"]
    tag = uuid.uuid4().hex[:10]
    shared = bob.remember(f"Shared {tag}", "Kept for the team", audience_to="workspace").memory
    other = bob.remember(f"Other {tag}", "Also kept", audience_to="workspace").memory
    private = bob.remember(f"Private {tag}", "Handed over to cy").memory
    ada.remove_member(team.members["bob"], "transfer", transfer_to=team.members["cy"])
    # Kept: an owner reads, corrects and supersedes it; it stays bob's.
    corrected = ada.correct(shared.id, shared.revision, "typo", body="Kept for the whole team")
    assert corrected.memory.created_by == team.members["bob"]
    assert corrected.memory.body == "Kept for the whole team"
    successor = ada.supersede(other.id, other.revision, f"Newer {tag}", reason="newer").memory
    assert successor.created_by == team.members["ada"]
    # Handed over: its receiver reads, corrects and forgets it.
    got = cy.read([private.id]).memories[0]
    assert got.created_by == team.members["bob"]
    again = cy.correct(private.id, got.revision, "clearer", title=f"Private {tag}, cy's now")
    assert again.memory.title == f"Private {tag}, cy's now"
    cy.forget(private.id, "no longer needed")
    assert ada.forget(corrected.memory.id, "done with it").id == shared.id


def test_a_migration_of_workspace_memories_whose_owner_is_removed_meanwhile_stops(
    stack: Stack,
    operator: Client,
    team: Team,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner is removed once the first of three one-item batches (each a
    workspace memory) has committed: the next is refused by the database,
    the command says why, and nothing is written under them after."""
    dee = operator.create_member(team.workspace_id, "dee", owner=True).member.id
    store = old_store(tmp_path, turns=0, items=3, scope="workspace")
    migrate_removing_owner(stack, operator, team, dee, store, monkeypatch, removed_after=1)
    written = dbutil.query(
        stack, team.database_name, "SELECT count(*) FROM memory WHERE created_by = %s", (dee,)
    )
    # The first batch committed before the removal: kept, as what they shared is.
    assert written == [(1,)], "memories were written under the removed owner after the removal"
