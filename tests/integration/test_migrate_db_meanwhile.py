"""`recallatron migrate-db` beside the operator's other work (docs/servers.md,
"Creation from a template"): it lists the workspaces once, so one deleted or
moved before its turn is no longer where the listing said. Run in this
process on two embedded servers (tests/two_servers.py), the deletion or the
move made as migrate-db comes to that workspace."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron_cli.main import main
from recallatron_devkit.localpg import LocalPostgres
from services.store.domain.control import ControlPlane
from services.store.domain.control_records import Workspace
from services.store.domain.deletion import WorkspaceDeletion
from services.store.domain.moving import Mover
from services.store.infrastructure.db import CONTROL_DATABASE, Databases
from services.store.infrastructure.migrate import latest_version
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("meanwhile", ["deleted", "moved"])
def test_a_workspace_deleted_or_moved_before_its_turn_is_no_failure(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    meanwhile: str,
) -> None:
    """Its database gone from the listed place, migrate-db reported it
    failed ('database "ws_..." does not exist') and exited 1, so an
    upgrade's migration Job failed for a workspace deleted or moved beside
    it. A deleted one is passed over; a moved one is migrated where it went."""
    dbs, control = store
    ws = control.create_workspace(f"mig-{uuid.uuid4().hex[:8]}", "default")
    migrate = ControlPlane.migrate
    done = False

    def first_deleted_or_moved(self: ControlPlane, listed: Workspace) -> list[str]:
        nonlocal done
        if listed.id == ws.id and not done:
            done = True
            if meanwhile == "deleted":
                WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
            else:
                Mover(dbs, control).move(ws.id, "b")
        return migrate(self, listed)

    monkeypatch.setattr(ControlPlane, "migrate", first_deleted_or_moved)
    monkeypatch.setenv("RECALLATRON_DATABASE_URL", servers["default"].url)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD", servers["default"].app_password)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
    monkeypatch.setenv("RECALLATRON_POSTGRES_SERVERS", f"b={servers['b'].url}")
    monkeypatch.setenv("RECALLATRON_PROGRESS", "lines")
    with psycopg.connect(servers["default"].url, dbname=CONTROL_DATABASE) as ctl:
        ctl.execute("UPDATE workspace SET schema_version = NULL WHERE id = %s", (ws.id,))
    code = main(["migrate-db"])
    said = capsys.readouterr()
    assert done
    assert code == 0, said.err
    assert "failed" not in said.err
    if meanwhile == "deleted":
        assert f"{ws.slug}: deleted since migrate-db started; passed over" in said.out
        assert "migrations done: 0 workspaces brought to" in said.out
        assert ", 1 deleted meanwhile" in said.out
    else:
        assert "migrations done: 1 workspaces brought to" in said.out
        with psycopg.connect(servers["default"].url, dbname=CONTROL_DATABASE) as ctl:
            row = ctl.execute(
                "SELECT server, schema_version FROM workspace WHERE id = %s", (ws.id,)
            ).fetchone()
        assert row == ("b", latest_version("workspace"))
