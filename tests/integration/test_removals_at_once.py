"""Two members of one workspace removed at once, each handing their private
memories to the other: the removals take turns in the control plane, so the
first hands over and the second is refused, its receiver removed, and
changes nothing. Both run in this process (a store replica's code): through
the client, UNAVAILABLE is sent again and would hide a deadlock the database
broke by failing one of them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from recallatron import errors
from recallatron_devkit.stack import Stack
from services.store.domain import member_removal
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import CONTROL_DATABASE, Databases, with_database
from services.store.sql import queries as q
from tests import dbutil
from tests.conftest import Team, wait_for
from tests.integration.test_chain_races import _Other
from tests.integration.test_revision_races import _HeldAfter

pytestmark = pytest.mark.integration


class _ControlHeld:
    """``dbs`` whose control plane's connection runs ``other`` once, just
    after ``statement``, and goes on once ``other`` waits for a lock of the
    control plane's database (or is done)."""

    def __init__(self, stack: Stack, dbs: Databases, statement: str, other: _Other) -> None:
        self._url = with_database(stack.database_url, CONTROL_DATABASE)
        self._dbs, self._statement, self._other = dbs, statement, other

    @contextlib.contextmanager
    def control_conn(self) -> Iterator[Any]:
        with self._dbs.control_conn() as conn:
            yield _HeldAfter(conn, self._statement, self._start_other)

    def _start_other(self) -> None:
        if self._other.thread.ident:
            return
        self._other.thread.start()
        with psycopg.connect(self._url, autocommit=True) as watch:
            wait_for(
                lambda: (
                    not self._other.thread.is_alive()
                    or watch.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()
                ),
                "the other removal waiting for this one",
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dbs, name)


def _removed(stack: Stack, member_id: str) -> bool:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        row = conn.execute("SELECT removed_at FROM member WHERE id = %s", (member_id,)).fetchone()
    assert row is not None
    return row[0] is not None


def test_two_members_handing_over_to_each_other_at_once(stack: Stack, team: Team) -> None:
    """Cy's removal (to Bob) is held once it has locked Cy's member row, while
    Bob's (to Cy) runs: Bob's locked Bob's row and waited for Cy's, as its
    receiver, while Cy's waited for Bob's: the database failed one. Now Bob's
    waits for its turn; Cy's hands over, and Bob's is refused, naming
    transfer_to, and leaves Bob as he was."""
    bob, cy = team.members["bob"], team.members["cy"]
    private = team.clients["bob"].remember("Bob's own note").memory.id
    with dbutil.store_databases(stack) as dbs:
        removal = member_removal.MemberRemoval(dbs, ControlPlane(dbs))
        bobs = _Other(stack, team, lambda: removal.remove(bob, "transfer", cy))
        held = _ControlHeld(stack, dbs, q.MEMBER_TO_REMOVE, bobs)
        cys = member_removal.MemberRemoval(held, ControlPlane(dbs))  # type: ignore[arg-type]
        assert cys.remove(cy, "transfer", bob).erased == 0
        bobs.thread.join(60)
    assert not bobs.thread.is_alive()
    refusal: Any = bobs.error  # a domain refusal: the call ran in this process
    assert isinstance(refusal, errors.InvalidArgument), (refusal, bobs.result)
    assert refusal.field == "transfer_to", str(refusal)
    assert (_removed(stack, cy), _removed(stack, bob)) == (True, False)
    (still,) = team.clients["bob"].read([private]).memories
    assert still.title == "Bob's own note"
