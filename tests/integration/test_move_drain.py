"""A move meets a drain (docs/servers.md, "Placing new workspaces" and
Moving): once `servers drain` has answered, no move switches a workspace
onto that server; one on its way there is rolled back at its switch, the
workspace staying where it was. Driven in this process (the store's own
ControlPlane and Mover) on two embedded servers, the drain acknowledged by a
hook at a step between the move's start and its switch."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron import errors
from recallatron_devkit.localpg import LocalPostgres
from services.store.domain.control import ControlPlane
from services.store.domain.control_records import Workspace
from services.store.domain.moving import Mover
from services.store.infrastructure.db import Databases
from tests.two_servers import as_before as moved_nothing
from tests.two_servers import before_step
from tests.two_servers import open_servers as open_servers  # the fixture
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration


def as_before(servers: dict[str, LocalPostgres], control: ControlPlane, ws: Workspace) -> None:
    """The workspace on its source, taking connections, nothing of the move left."""
    moved_nothing(servers, control, ws)
    with psycopg.connect(servers["default"].url) as conn:
        allowed = conn.execute(
            "SELECT datallowconn FROM pg_database WHERE datname = %s", (ws.database_name,)
        ).fetchone()
    assert allowed == (True,)


@pytest.mark.parametrize("step", ["copied", "sealed"])
def test_a_move_does_not_switch_onto_a_server_drained_meanwhile(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    """The move checked the drain mark only at its start: drained while it
    copied (or once sealed), it still switched the workspace onto `b`; and
    a drain known before the cut-over still had the source fenced and sealed
    (its writes cut off) for a move refused at the switch."""
    dbs, control = store
    ws = control.create_workspace(f"drained-{uuid.uuid4().hex[:8]}", "default")
    before_step(monkeypatch, step, lambda: control.set_draining("b", True))
    said: list[str] = []
    with pytest.raises(errors.FailedPrecondition) as refused:
        Mover(dbs, control, said.append).move(ws.id, "b")
    assert refused.value.subject == "to", refused.value
    assert "'b' was marked draining" in refused.value.message, refused.value
    assert said[-1] == "rolled back: the source serves as before", said
    if step == "copied":
        # Known before the cut-over: no write was held or cut off for it.
        assert "step: fenced" not in said and "step: sealed" not in said, said
    as_before(servers, control, ws)
    # Nothing left in the way: open again, the same move goes through.
    monkeypatch.undo()
    control.set_draining("b", False)
    Mover(dbs, control).move(ws.id, "b")
    assert control.workspace(ws.id, fresh=True).server == "b"


def test_a_move_interrupted_past_its_seal_is_rolled_back_once_its_target_drains(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rerun finished a move stopped past its seal onto `b`, drained
    since: the workspace landed on a server whose drain had answered."""
    dbs, control = store
    ws = control.create_workspace(f"resumed-{uuid.uuid4().hex[:8]}", "default")

    def stop() -> None:
        raise KeyboardInterrupt  # as Ctrl-C or SIGTERM stops the command

    before_step(monkeypatch, "sealed", stop)
    with pytest.raises(KeyboardInterrupt):
        Mover(dbs, control).move(ws.id, "b")
    monkeypatch.undo()
    control.set_draining("b", True)
    with pytest.raises(errors.FailedPrecondition) as refused:
        Mover(dbs, control).move(ws.id, "b")
    assert refused.value.subject == "to" and "'b' was marked draining" in refused.value.message
    as_before(servers, control, ws)
