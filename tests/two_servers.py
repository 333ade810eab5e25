"""What the tests of a workspace's life across Postgres servers share
(test_move_copy, test_move_deletion, test_server_failures): two embedded
servers, `default` and `b`, and the store's own ControlPlane on them in this
process, without the services; the source's replication slots taken by
others, as a move meets them. A test module imports the fixtures `servers`
(servers `default` and `b`, started once for the module) and `store` (the
store on them, one for each test) as themselves (`import servers as servers`);
`open_servers` undrains both around a test, and `as_before` checks a workspace
stands on its source with nothing of a move left."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port
from services.store.domain.control import ControlPlane
from services.store.domain.moving import Mover
from services.store.infrastructure.db import CONTROL_DATABASE, Databases, with_database
from services.store.settings import StoreSettings


@contextmanager
def two_servers(base: Path) -> Iterator[dict[str, LocalPostgres]]:
    """Servers `default` and `b` in ``base``, started; stopped after."""
    made = {
        name: LocalPostgres(base / name, free_port(), secrets_dir=base / f"{name}-secrets")
        for name in ("default", "b")
    }
    for pg in made.values():
        pg.start()
    try:
        yield made
    finally:
        for pg in made.values():
            pg.stop()


def store_on(servers: dict[str, LocalPostgres], *more: str) -> tuple[Databases, ControlPlane]:
    """The store's databases (bootstrapped; the caller closes them) and
    control plane on `default`, with `b` and ``more`` ("name=url") beside it."""
    settings = StoreSettings(
        database_url=servers["default"].url,
        app_password=servers["default"].app_password,
        app_password_scram_iterations=1,
        postgres_servers=",".join([f"b={servers['b'].url}", *more]),
    )
    dbs = Databases(settings)
    dbs.bootstrap()
    return dbs, ControlPlane(dbs)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalPostgres]]:
    """Servers `default` and `b`, one pair for the importing module."""
    with two_servers(tmp_path_factory.mktemp("two-servers")) as made:
        yield made


@pytest.fixture
def open_servers(store: tuple[Databases, ControlPlane]) -> Iterator[None]:
    """Every server open for workspaces, before the test and after it."""
    _, control = store
    for name in ("default", "b"):
        control.set_draining(name, False)
    yield
    for name in ("default", "b"):
        control.set_draining(name, False)


def as_before(servers: dict[str, LocalPostgres], control: ControlPlane, ws: Any) -> None:
    """The workspace on its source, served, nothing of the move left."""
    with psycopg.connect(with_database(servers["default"].url, CONTROL_DATABASE)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM workspace_move WHERE workspace_id = %s", (ws.id,)
        ).fetchone()
    assert row == (0,)
    assert control.workspace(ws.id, fresh=True).server == "default"
    with psycopg.connect(with_database(servers["default"].url, ws.database_name)) as conn:
        assert conn.execute("SELECT count(*) FROM memory").fetchone() == (0,)
        slots = conn.execute(
            "SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical'"
        ).fetchall()
    assert slots == []
    with psycopg.connect(servers["b"].url) as conn:
        there = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (ws.database_name,)
        ).fetchall()
    assert there == []


@pytest.fixture
def store(servers: dict[str, LocalPostgres]) -> Iterator[tuple[Databases, ControlPlane]]:
    """The store's databases and control plane on ``servers``; closed after the test."""
    dbs, control = store_on(servers)
    try:
        yield dbs, control
    finally:
        dbs.close()


def take_slots(url: str, prefix: str, leave: int = 0) -> list[str]:
    """Every free replication slot of the server at ``url`` but ``leave``,
    taken as another consumer would (physical slots); their names."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_replication_slots')::int - count(*)"
            " FROM pg_replication_slots"
        ).fetchone()
        assert row is not None
        taken = [f"{prefix}_{i}" for i in range(int(row[0]) - leave)]
        for name in taken:
            conn.execute("SELECT pg_create_physical_replication_slot(%s)", (name,))
    return taken


def drop_slots(url: str, names: Sequence[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name in names:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def before_step(monkeypatch: pytest.MonkeyPatch, step: str, action: Callable[[], None]) -> None:
    """``action`` runs as a move comes to ``step`` (Mover._step's name), before it."""
    original = Mover._step

    def with_action(mover: Mover, name: str) -> None:
        if name == step:
            action()
        original(mover, name)

    monkeypatch.setattr(Mover, "_step", with_action)
