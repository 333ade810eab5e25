"""A process that hears a workspace moved lets go of its database on every
server (docs/servers.md, Moving): moved away and back, the database on the
first server is made anew, and a pool or vector type kept from before would
name what no longer exists (a statement with a vector then fails)."""

from __future__ import annotations

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_a_move_notice_drops_the_pools_and_vector_type_of_its_database(
    stack: Stack, team: Team
) -> None:
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Caller, caller_transaction

    with dbutil.store_databases(stack) as dbs:
        control = ControlPlane(dbs)
        caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
        pool = control.caller_pool(caller)
        with caller_transaction(pool, caller) as conn:
            conn.execute("SELECT 1")
        ws = control.workspace(team.workspace_id)
        key = f"{ws.server}|{ws.database_name}"
        assert key in dbs._vector_types
        control.follow_move(team.workspace_id)
        assert key not in dbs._vector_types
        assert pool.closed
        # The next call opens what the database is now.
        again = control.caller_pool(caller)
        assert again is not pool
        with caller_transaction(again, caller) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
