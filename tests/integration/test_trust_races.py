"""What forget and member removal promise holds against writes made beside
them (design §4, §10): a memory derived, at the moment its ancestor is
forgotten, from a memory derived from that ancestor is forgotten with it;
and no memory is written for a member who was removed."""

from __future__ import annotations

import threading
import uuid

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.sql import memory_queries as mq
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
