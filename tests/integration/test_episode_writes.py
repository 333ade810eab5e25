"""CreateEpisode's refusals and its trust (docs/graph.md, "Episodes and
timelines"): each participant and the audience must be live members of the
workspace, refused by name as a memory's audience is; an episode's purposes
are its own, as a memory's are."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain import episodes
from services.store.domain.trust import Trust
from services.store.infrastructure.db import Caller
from services.store.sql import leaving_queries as lq
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

WHEN = "2026-11-30T10:00:00Z"


def test_a_removed_member_is_refused_as_a_participant_by_name(team: Team, operator: Client) -> None:
    """A removed member reads nothing more: they are refused among member_ids
    exactly as they are as the audience, and nothing is written."""
    ada = team.clients["ada"]
    operator.remove_member(team.members["cy"], "erase")
    with pytest.raises(grpc.RpcError) as as_audience:
        ada.create_episode("Retro", WHEN, audience_to=team.members["cy"])
    with pytest.raises(grpc.RpcError) as as_member:
        ada.create_episode("Retro", WHEN, member_ids=[team.members["bob"], team.members["cy"]])
    assert as_audience.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert as_audience.value.details() == "audience.member_id: no such member in this workspace"
    assert as_member.value.code() == grpc.StatusCode.INVALID_ARGUMENT, as_member.value.details()
    assert as_member.value.details() == "member_ids[1]: no such member in this workspace"
    made = ada.create_episode("Retro", WHEN, member_ids=[team.members["bob"]])
    assert made.episode_id


def _wait_for_a_lock_or_the_end(watch: psycopg.Connection, writer: threading.Thread) -> None:
    """Until ``writer`` waits on an advisory lock in ``watch``'s database, or
    has ended (as it does when nothing makes it wait)."""
    deadline = time.monotonic() + 30
    while writer.is_alive() and time.monotonic() < deadline:
        waiting = watch.execute(
            "SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
            " WHERE l.locktype = 'advisory' AND NOT l.granted"
            " AND d.datname = current_database()"
        ).fetchone()
        if waiting is not None:
            return
        time.sleep(0.05)


def test_a_participant_removed_while_the_episode_is_written_is_refused(
    stack: Stack, team: Team
) -> None:
    """The control plane's check comes before the write's transaction; a
    removal may pass between them. The removal's workspace step (its lock on
    the member alone, the member marked removed) is held open here on a
    connection of its own: the episode's write waits for it and, once it
    commits, refuses the member by name, as a memory's audience is refused;
    no episode names them."""
    ada, cy = team.clients["ada"], team.members["cy"]
    url = dbutil.workspace_url(stack, team.database_name)
    answer: dict[str, Any] = {}

    def create() -> None:
        try:
            answer["made"] = ada.create_episode("Retro", WHEN, member_ids=[team.members["bob"], cy])
        except grpc.RpcError as err:
            answer["refused"] = err

    with psycopg.connect(url) as removal, psycopg.connect(url, autocommit=True) as watch:
        removal.execute(lq.HOLD_MEMBER_ALONE, {"member": cy})
        removal.execute(lq.MARK_REMOVED, {"member": cy})
        writer = threading.Thread(target=create)
        writer.start()
        _wait_for_a_lock_or_the_end(watch, writer)
        removal.commit()
        writer.join(60)
    assert not writer.is_alive()
    named = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM episode_participant WHERE member_id = %s",
        (cy,),
    )
    assert "made" not in answer and int(named[0][0]) == 0, answer
    refused = answer["refused"]
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
    assert refused.details() == "member_ids[1]: no such member in this workspace"


def test_an_episode_for_other_purposes_is_its_creators_under_them(team: Team) -> None:
    """As remember writes a memory for purposes other than the call's (a
    token's scope bounds them, tests/security/test_token_scopes.py), an
    episode made for audit alone is made; its creator reaches it calling for
    audit, and not for assist, as any memory of theirs for audit alone."""
    ada = team.clients["ada"]
    episode = ada.create_episode("Audit walk", WHEN, purposes=["audit"]).episode_id
    memory = ada.remember("Checked", purposes=["audit"], episode_id=episode, purpose="audit").memory
    events = ada.timeline(episode_id=episode, purpose="audit").events
    assert [e.memory_id for e in events] == [memory.id]
    with pytest.raises(grpc.RpcError) as err:
        ada.timeline(episode_id=episode)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_two_turns_of_one_speaker_captured_at_once_share_one_episode(
    stack: Stack, team: Team
) -> None:
    """Two captured turns of one speaker, with no episode open, written at the
    same moment: the first's transaction (held open here) opens an episode;
    the second, a second later, joins it once the first commits, rather than
    opening another the first's uncommitted one hid from it."""
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    own = Trust(caller.member_id, frozenset({"assist"}))
    at = datetime.now(UTC)
    answer: dict[str, str] = {}

    def second_turn() -> None:
        with dbutil.store_transaction(stack, caller) as conn:
            answer["episode"] = episodes.for_capture(conn, caller, at + timedelta(seconds=1), own)

    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url, autocommit=True) as watch:
        with dbutil.store_transaction(stack, caller) as first:
            opened = episodes.for_capture(first, caller, at, own)
            writer = threading.Thread(target=second_turn)
            writer.start()
            _wait_for_a_lock_or_the_end(watch, writer)
        writer.join(60)
    assert not writer.is_alive()
    assert answer["episode"] == opened


def test_a_write_naming_an_episode_it_may_not_see_answers_as_for_none(
    stack: Stack, team: Team
) -> None:
    """An episode the caller may not see (another member's, or one for other
    purposes) does not exist for them: remember and capture naming it answer
    exactly as for an id nothing has, NOT_FOUND as timeline does and as a
    write naming a memory it may not see (about_ids, source_ids, the id to
    supersede) does, and nothing is written."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    private = ada.create_episode("Ada's 1:1", WHEN).episode_id
    for_audit = ada.create_episode("Audit walk", WHEN, purposes=["audit"]).episode_id
    named = [
        (bob, str(uuid.uuid4())),
        (bob, private),
        (ada, str(uuid.uuid4())),
        (ada, for_audit),
    ]
    count = "SELECT count(*) FROM memory"
    before = dbutil.query(stack, team.database_name, count)
    answers: set[tuple[grpc.StatusCode, str | None]] = set()
    for client, episode in named:
        with pytest.raises(grpc.RpcError) as told:
            client.remember("Noted in the meeting", episode_id=episode)
        with pytest.raises(grpc.RpcError) as captured:
            client.capture("Remember that the demo is on Friday.", episode_id=episode)
        with pytest.raises(grpc.RpcError) as listed:
            client.timeline(episode_id=episode)
        answers |= {(e.value.code(), e.value.details()) for e in (told, captured, listed)}
    assert answers == {(grpc.StatusCode.NOT_FOUND, "episode_id: episode not found")}
    assert dbutil.query(stack, team.database_name, count) == before
