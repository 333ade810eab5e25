"""A move's initial copy when the servers lack room for it (docs/servers.md,
Moving, Requirements): Postgres retries a failing table sync for ever, and
the move waited with it. Driven in this process (the store's own
ControlPlane and Mover) on two embedded Postgres servers, without the
services."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from recallatron import errors
from recallatron_devkit.localpg import LocalPostgres
from services.store.domain import move_copy
from services.store.domain.control import ControlPlane
from services.store.domain.moving import Mover
from services.store.infrastructure.db import Databases
from tests.two_servers import as_before, before_step, drop_slots, take_slots
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration

# Longer than any healthy step here: a move still running then is stuck.
STUCK_SECONDS = 150.0


@pytest.fixture
def one_free_slot(servers: dict[str, LocalPostgres]) -> Iterator[None]:
    """Every replication slot of the source but one taken (by others)."""
    taken = take_slots(servers["default"].url, "taken", leave=1)
    try:
        yield
    finally:
        drop_slots(servers["default"].url, taken)


def moved(mover: Mover, workspace_id: str) -> Any:
    """The move's report or its error; fails when it is still running after
    STUCK_SECONDS (it is left to run in the background)."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(mover.move(workspace_id, "b"))
        except Exception as exc:  # the refusal, kept for the assertion
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(STUCK_SECONDS)
    assert result, f"the move was still running after {STUCK_SECONDS:.0f} s"
    return result[0]


def test_a_source_with_one_free_slot_is_refused_before_anything_is_recorded(
    servers: dict[str, LocalPostgres], store: tuple[Databases, ControlPlane], one_free_slot: None
) -> None:
    """The subscription took the one free slot; each table's initial copy
    then failed for want of another, again and again, and the move waited
    at `copying` for ever."""
    dbs, control = store
    ws = control.create_workspace(f"room-{uuid.uuid4().hex[:8]}", "default")
    said: list[str] = []
    outcome = moved(Mover(dbs, control, said.append), ws.id)
    assert isinstance(outcome, errors.FailedPrecondition), (outcome, said)
    assert outcome.subject == "workspace"
    assert "'default' has 1 free replication slots" in outcome.message
    assert "a move needs 2 of each" in outcome.message
    assert said == []
    as_before(servers, control, ws)


def test_a_copy_that_makes_no_progress_is_rolled_back(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The slots taken after the move looked (by another consumer of the
    source): the copy cannot go on, and the move gives up and rolls back."""
    dbs, control = store
    ws = control.create_workspace(f"stall-{uuid.uuid4().hex[:8]}", "default")
    monkeypatch.setattr(move_copy, "COPY_STALL_SECONDS", 5.0)
    taken: list[str] = []
    before_step(
        monkeypatch,
        "recorded",
        lambda: taken.extend(take_slots(servers["default"].url, "late", leave=1)),
    )
    said: list[str] = []
    try:
        outcome = moved(Mover(dbs, control, said.append), ws.id)
    finally:
        drop_slots(servers["default"].url, taken)
    assert isinstance(outcome, errors.Unavailable), (outcome, said)
    assert outcome.message.startswith("copying: no progress for 5 s (")
    assert "the target server's log says why" in outcome.message
    assert said[-1] == "rolled back: the source serves as before"
    as_before(servers, control, ws)
