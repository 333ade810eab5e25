"""What forget and member removal promise holds against writes made beside
them (design §4, §10): a memory derived, at the moment its ancestor is
forgotten, from a memory derived from that ancestor is forgotten with it; no
memory is written for a member who was removed; and two owners removed at
once leave one of them."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest

from recallatron import errors
from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.sql import memory_queries as mq
from services.store.sql import queries as q
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


def test_a_memory_derived_beside_a_forget_two_links_away_is_forgotten_too(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    a = ada.remember("Quarry plan A", "The quarry opens in May.", audience_to="workspace")
    b = ada.derive([a.memory.id], "Quarry summary", "From plan A: May.")
    url = dbutil.workspace_url(stack, team.database_name)
    c_id = str(uuid.uuid4())
    # A derive from b, open: its link's fold holds b FOR SHARE.
    with psycopg.connect(url) as deriving:
        deriving.execute(
            mq.INSERT_MEMORY,
            (c_id, "note", "Quarry digest", "From the summary.", 1.0, "derived", None,
             ["assist"], team.members["ada"], None),
        )  # fmt: skip
        deriving.execute(mq.INSERT_LINKS, (c_id, ["derived_from"], [b.memory.id]))
        forgot: list[BaseException] = []

        def forget() -> None:
            try:
                ada.forget(a.memory.id, "withdrawn")
            except BaseException as exc:  # reported below
                forgot.append(exc)

        thread = threading.Thread(target=forget)
        thread.start()
        with psycopg.connect(url, autocommit=True) as watch:
            # The forget's walk has run and waits for b, held by the derive.
            wait_for(
                lambda: watch.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                ).fetchone(),
                "the forget waiting for the open derive",
            )
        deriving.commit()
        thread.join()
    assert not forgot, forgot
    with psycopg.connect(url) as conn:
        rows = dict(
            conn.execute(
                "SELECT id::text, provenance_forgotten FROM memory WHERE id = ANY(%s::uuid[])",
                ([b.memory.id, c_id],),
            ).fetchall()
        )
    assert rows == {b.memory.id: True, c_id: True}
    assert c_id not in {r.memory.id for r in ada.recall("quarry", mode="lexical").outcome.results}


def test_no_memory_is_written_for_a_removed_member(team: Team, operator: Client) -> None:
    ada, cy = team.clients["ada"], team.members["cy"]
    operator.remove_member(cy, "erase")
    with pytest.raises(grpc.RpcError) as info:
        ada.remember("For cy", "A note addressed to a member who left.", audience_to=cy)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "audience.member_id" in (info.value.details() or "")


class _PausedAfterCounting:
    """A control-plane connection that, once it has counted a workspace's
    other owners, waits for the other removal to have counted too (or for
    the barrier's limit: the other may be waiting its turn)."""

    def __init__(self, conn: Any, barrier: threading.Barrier) -> None:
        self.conn, self.barrier = conn, barrier

    def execute(self, statement: str, params: Any = None) -> Any:
        cursor = self.conn.execute(statement, params)
        if statement is q.OTHER_OWNERS:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait(timeout=5)
        return cursor


def test_two_owners_removed_at_once_leave_one(
    stack: Stack, team: Team, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.store.domain.control import ControlPlane
    from services.store.domain.member_removal import MemberRemoval
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    eve = operator.create_member(team.workspace_id, "eve", owner=True).member.id
    owners = [team.members["ada"], eve]
    dbs = Databases(StoreSettings(database_url=stack.database_url, app_password=stack.app_password))
    try:
        dbs.bootstrap()
        control, barrier = ControlPlane(dbs), threading.Barrier(2)
        real = dbs.control_conn

        @contextlib.contextmanager
        def paused() -> Iterator[Any]:
            with real() as conn:
                yield _PausedAfterCounting(conn, barrier)

        monkeypatch.setattr(dbs, "control_conn", paused)
        removal = MemberRemoval(dbs, control)
        outcomes: dict[str, str] = {}

        def remove(member: str) -> None:
            try:
                removal.remove(member, "erase")
                outcomes[member] = "removed"
            except errors.FailedPrecondition:
                outcomes[member] = "refused: the last owner"

        threads = [threading.Thread(target=remove, args=(m,)) for m in owners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        left = [m.id for m in control.members(team.workspace_id) if m.role == "owner"]
    finally:
        dbs.close()
    assert sorted(outcomes.values()) == ["refused: the last owner", "removed"]
    assert len(left) == 1 and outcomes[left[0]] == "refused: the last owner"
