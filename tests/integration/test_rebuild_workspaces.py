"""`recallatron rebuild` over every workspace while workspaces come and go:
one deleted after the command listed them is passed over, not the end of
the rebuild of the others."""

from __future__ import annotations

import argparse
import uuid

import pytest

from recallatron_cli import operator
from recallatron_devkit.stack import Stack
from services.store.domain.control import ControlPlane
from tests import dbutil
from tests.conftest import Team

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
