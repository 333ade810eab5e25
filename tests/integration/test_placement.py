"""Placing new workspaces on servers (docs/servers.md, "Placing new
workspaces"), driven in this process (the store's own ControlPlane) on two
embedded servers: creations at once spread as if made one after another, and
none lands on a server once its drain has been acknowledged. Each race is
made deterministic by holding the first creation while it makes its database,
between reading the servers and recording the workspace."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from recallatron import errors
from recallatron_devkit.localpg import LocalPostgres
from services.store.domain.control import ControlPlane
from services.store.domain.moving import Mover
from services.store.infrastructure.db import CONTROL_DATABASE, Databases, with_database
from services.store.infrastructure.servers import place
from tests.two_servers import before_step
from tests.two_servers import open_servers as open_servers  # the fixture
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration

WAIT_SECONDS = 60.0


class _Held:
    """``dbs.create_database`` with its first call held until released: that
    creation has read the servers and not yet recorded its workspace."""

    def __init__(self, dbs: Databases, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.made: list[tuple[str, str]] = []
        original = dbs.create_database
        first = threading.Lock()

        def held(server: str, database: str) -> None:
            if first.acquire(blocking=False):
                self.reached.set()
                assert self.release.wait(WAIT_SECONDS), "the held creation was never released"
            original(server, database)
            self.made.append((server, database))

        monkeypatch.setattr(dbs, "create_database", held)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``work`` started in a thread; its answer (or what it raised) lands in the list."""
    answer: list[Any] = []

    def run() -> None:
        try:
            answer.append(work())
        except Exception as exc:  # kept for the assertion
            answer.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, answer


def _databases(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def _placements(servers: dict[str, LocalPostgres]) -> list[Any]:
    """The placements not yet recorded (none once every creation has ended)."""
    with psycopg.connect(with_database(servers["default"].url, CONTROL_DATABASE)) as conn:
        return conn.execute("SELECT database_name, server FROM workspace_placement").fetchall()


def _even(control: ControlPlane) -> dict[str, int]:
    """The two servers given as many workspaces each (named creations)."""
    counts = {s.name: s.workspaces for s in control.servers()}
    fewer = min(counts, key=lambda n: counts[n])
    for _ in range(max(counts.values()) - counts[fewer]):
        control.create_workspace(f"even-{uuid.uuid4().hex[:8]}", fewer)
    return {s.name: s.workspaces for s in control.servers()}


def test_creations_at_once_spread_as_if_made_one_after_another(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both read the same counts and landed on the server with the fewest."""
    dbs, control = store
    counts = _even(control)
    first_choice = place(counts, counts, [])
    assert first_choice is not None
    after_first = {**counts, first_choice: counts[first_choice] + 1}
    second_choice = place(after_first, after_first, [])
    assert second_choice != first_choice
    held = _Held(dbs, monkeypatch)
    thread, first = _in_thread(lambda: control.create_workspace(f"first-{uuid.uuid4().hex[:8]}"))
    assert held.reached.wait(WAIT_SECONDS)
    second = control.create_workspace(f"second-{uuid.uuid4().hex[:8]}")
    held.release.set()
    thread.join(WAIT_SECONDS)
    assert not isinstance(first[0], Exception), first
    assert (first[0].server, second.server) == (first_choice, second_choice)
    assert _placements(servers) == []


@pytest.mark.parametrize("named", [False, True], ids=["placed by the policy", "named"])
def test_no_creation_lands_on_a_server_once_its_drain_was_acknowledged(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    monkeypatch: pytest.MonkeyPatch,
    named: bool,
) -> None:
    """A creation that read the servers before the drain recorded its
    workspace on the drained server after the drain had answered."""
    dbs, control = store
    counts = _even(control)
    target = place(counts, counts, [])
    assert target is not None
    held = _Held(dbs, monkeypatch)
    before = _databases(servers[target].url)
    thread, created = _in_thread(
        lambda: control.create_workspace(f"drained-{uuid.uuid4().hex[:8]}", target if named else "")
    )
    assert held.reached.wait(WAIT_SECONDS)
    control.set_draining(target, True)  # acknowledged
    held.release.set()
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()
    if named:
        assert isinstance(created[0], errors.FailedPrecondition), created
        assert created[0].subject == "server" and "draining" in created[0].message
    else:
        assert not isinstance(created[0], Exception), created
        assert created[0].server != target
    # Nothing made for it is left on the drained server.
    assert _databases(servers[target].url) == before
    assert _placements(servers) == []


def test_servers_list_names_a_server_no_longer_configured_that_holds_workspaces(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server the settings no longer name was left out of the list while
    workspaces were still recorded on it: the store refuses to start then,
    and the list did not show why."""
    from recallatron_cli.main import main

    _, control = store
    control.create_workspace(f"left-{uuid.uuid4().hex[:8]}", "b")
    on_b = next(s.workspaces for s in control.servers() if s.name == "b")
    monkeypatch.setenv("RECALLATRON_DATABASE_URL", servers["default"].url)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD", servers["default"].app_password)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
    for name in ("RECALLATRON_POSTGRES_SERVERS", "RECALLATRON_POSTGRES_SERVERS_DIR"):
        monkeypatch.delenv(name, raising=False)  # b no longer named
    assert main(["servers", "list"]) == 0
    out, err = capsys.readouterr()
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}
    assert rows["default"][1:] == ["answers", "default"], out
    assert rows["b"] == [f"{on_b} workspaces", "not configured"], out
    assert "server b is not configured" in err and "RECALLATRON_POSTGRES_SERVERS" in err, err


def _tied_with_a_workspace_to_move(control: ControlPlane) -> Any:
    """Both servers holding as many workspaces, one of those on `default`
    returned (to move to `b`): the policy places on `b` (ties go to the first
    name) unless something counts on `b` beside them."""
    _even(control)
    control.create_workspace(f"on-b-{uuid.uuid4().hex[:8]}", "b")
    ws = control.create_workspace(f"moving-{uuid.uuid4().hex[:8]}", "default")
    counts = {s.name: s.workspaces for s in control.servers()}
    assert counts["default"] == counts["b"] and place(counts, counts, []) == "b"
    return ws


@pytest.mark.parametrize("step", ["copied", "sealed"])
def test_a_move_under_way_counts_on_its_target(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    """A placement counted a workspace being moved onto `b` only on its
    source: placed while it copied (or once sealed), a new workspace went to
    `b` too, which then held one more than `default`."""
    dbs, control = store
    ws = _tied_with_a_workspace_to_move(control)
    reached, release = threading.Event(), threading.Event()

    def hold() -> None:
        reached.set()
        assert release.wait(WAIT_SECONDS), "the held move was never released"

    before_step(monkeypatch, step, hold)
    thread, moved = _in_thread(lambda: Mover(dbs, control).move(ws.id, "b"))
    try:
        assert reached.wait(WAIT_SECONDS), moved
        placed = control.create_workspace(f"placed-{uuid.uuid4().hex[:8]}")
    finally:
        release.set()
        thread.join(WAIT_SECONDS)
    assert not thread.is_alive() and not isinstance(moved[0], Exception), moved
    # Counted on its source too until the switch: the two tied with it.
    assert placed.server == "default"
    assert control.workspace(ws.id, fresh=True).server == "b"
    counts = {s.name: s.workspaces for s in control.servers()}
    assert counts["b"] == counts["default"] + 1 and _placements(servers) == []


@pytest.mark.parametrize("state", ["copying", "sealed"])
def test_a_move_stopped_by_a_kill_counts_on_its_target_only_if_its_rerun_finishes_it(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    open_servers: None,
    state: str,
) -> None:
    """A killed mover's move (its record, no mover holding it): one past its
    seal is finished by its rerun, so it arrives; one short of it is rolled
    back, and would keep `b` counted one more until someone reran it."""
    _, control = store
    ws = _tied_with_a_workspace_to_move(control)
    control_url = with_database(servers["default"].url, CONTROL_DATABASE)
    with psycopg.connect(control_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO workspace_move (workspace_id, source, target, state)"
            " VALUES (%s, 'default', 'b', %s)",
            (ws.id, state),
        )
    try:
        placed = control.create_workspace(f"placed-{uuid.uuid4().hex[:8]}")
    finally:
        with psycopg.connect(control_url, autocommit=True) as conn:
            conn.execute("DELETE FROM workspace_move WHERE workspace_id = %s", (ws.id,))
    assert placed.server == ("default" if state == "sealed" else "b")
