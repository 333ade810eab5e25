"""`recallatron rebuild` over every workspace while workspaces come and go:
one deleted after the command listed them is passed over, not the end of
the rebuild of the others."""

from __future__ import annotations

import argparse
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import psycopg
import pytest

from recallatron import errors
from recallatron.client import Client
from recallatron_cli import operator
from recallatron_devkit.stack import Stack
from services.store.domain.control import ControlPlane
from tests import dbutil
from tests.conftest import WAIT_SECONDS, Team, make_team, wait_for

pytestmark = pytest.mark.integration


def test_a_workspace_deleted_during_a_rebuild_of_all_is_passed_over(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command lists the workspaces once; one deleted after that (its
    record gone) ended the whole command 'no workspace', and the workspaces
    after it were never rebuilt."""
    ada = team.clients["ada"]
    made = ada.remember("Rebuilt after a deletion", "kept", audience_to="workspace").memory
    ada.wait_embedded(timeout=120)
    dbutil.query(
        stack,
        team.database_name,
        "UPDATE memory_embedding SET input_version = 'older-v0' WHERE memory_id = %s RETURNING 1",
        (made.id,),
    )
    for name, value in stack.env_for("embedding-job").items():
        monkeypatch.setenv(name, value)
    gone = str(uuid.uuid4())  # listed, then deleted before its turn
    listed = ControlPlane.all_workspaces
    monkeypatch.setattr(ControlPlane, "all_workspaces", lambda self: [gone, *listed(self)])
    code = operator.cmd_rebuild(argparse.Namespace(workspace=None, force=False))
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{team.slug}: 1 memories queued" in out, out
    assert f"{gone}: deleted since the rebuild started; passed over" in out, out
    versions = dbutil.query(
        stack,
        team.database_name,
        "SELECT input_version FROM memory_embedding WHERE memory_id = %s",
        (made.id,),
    )
    assert versions == [("title-unless-in-body-v1",)]


def stale(stack: Stack, team: Team, title: str) -> str:
    """A memory of ``team`` embedded, its vector then made stale: one rebuild
    embeds again."""
    ada = team.clients["ada"]
    made = ada.remember(title, "kept", audience_to="workspace").memory
    ada.wait_embedded(timeout=120)
    dbutil.query(
        stack,
        team.database_name,
        "UPDATE memory_embedding SET input_version = 'older-v0' WHERE memory_id = %s RETURNING 1",
        (made.id,),
    )
    return str(made.id)


@contextmanager
def rebuild_held(
    stack: Stack, team: Team, workspaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[psycopg.Connection, Callable[[], object]]]:
    """`rebuild` of ``workspaces`` (all, as listed) running in a thread while
    this holds the embedding queue of ``team``'s database locked: yields once
    the rebuild waits on that lock, with a call returning what it ended with
    (its exit code or the exception)."""
    for name, value in stack.env_for("embedding-job").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(ControlPlane, "all_workspaces", lambda self: list(workspaces))
    ended: list[object] = []

    def run() -> None:
        try:
            ended.append(operator.cmd_rebuild(argparse.Namespace(workspace=None, force=False)))
        except BaseException as exc:  # what ended it is the test's to see
            ended.append(exc)

    holder = psycopg.connect(dbutil.workspace_url(stack, team.database_name))
    try:
        holder.execute("LOCK TABLE embedding_job IN ACCESS EXCLUSIVE MODE")
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        waiting = """
            SELECT pid FROM pg_stat_activity
            WHERE datname = %s AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
        """
        wait_for(
            lambda: dbutil.query(stack, team.database_name, waiting, (team.database_name,)),
            "the rebuild waiting on the lock",
        )

        def result() -> object:
            thread.join(WAIT_SECONDS * 2)
            assert not thread.is_alive(), "the rebuild did not end"
            return ended[0]

        yield holder, result
    finally:
        with suppress(psycopg.Error):  # a deletion's drop of the database ends it
            holder.close()


def test_a_workspace_deleted_while_being_rebuilt_is_passed_over(
    stack: Stack,
    operator: Client,
    team: Team,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A workspace deleted while the rebuild of all was at work in its
    database (its database dropped under the rebuild's session) ended the
    whole command with a database error, and the workspaces after it were
    never rebuilt; now it is passed over as one deleted before its turn."""
    other = make_team(stack, operator, ("ada",))
    made = stale(stack, other, "Rebuilt after a deletion mid-way")
    with rebuild_held(stack, team, [team.workspace_id, other.workspace_id], monkeypatch) as (
        _,
        result,
    ):
        operator.delete_workspace(team.slug, team.slug)
        ended = result()
    out = capsys.readouterr().out
    assert ended == 0, (ended, out)
    assert f"{team.workspace_id}: deleted since the rebuild started; passed over" in out, out
    assert f"{other.slug}: 1 memories queued" in out, out
    versions = dbutil.query(
        stack,
        other.database_name,
        "SELECT input_version FROM memory_embedding WHERE memory_id = %s",
        (made,),
    )
    assert versions == [("title-unless-in-body-v1",)]
    for client in other.clients.values():
        client.close()


def test_a_database_error_of_a_workspace_still_there_ends_the_rebuild(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rebuild's session on a workspace that is not deleted ended (an
    administrator's termination): the command ends with that error."""
    with rebuild_held(stack, team, [team.workspace_id], monkeypatch) as (holder, result):
        holder.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            (team.database_name,),
        )
        ended = result()
    out = capsys.readouterr().out
    assert isinstance(ended, psycopg.Error | errors.DomainError), (ended, out)
    assert "passed over" not in out, out
