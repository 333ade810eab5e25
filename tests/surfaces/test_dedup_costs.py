"""What dedup review's pairs (ListDuplicatePairs) cost: the window of the
caller's newest memories is walked from the newest one, not every memory the
caller may see read and sorted for each page."""

from __future__ import annotations

import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.dedup import DEFAULT_WINDOW, DedupStore
from services.store.infrastructure.db import Caller
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk
from tests.integration.test_entity_pairs_costs import _seed

pytestmark = pytest.mark.integration

TABLES = ["memory", "memory_embedding", "dismissed_pair"]


class _OnConnection(bulk.OneConnection, DedupStore):
    """The store's pairs run on one connection, so that
    pg_stat_xact_user_tables counts the rows they read."""


def test_duplicate_pairs_read_about_the_window(stack: Stack, team: Team) -> None:
    """20,040 embedded memories, every one Ada's: a page of pairs over the
    default window of 500 reads about the window's memories and vectors under
    the plans the store's statements get and the generic plan forced, where
    it read every memory Ada may see (20,040 rows) and sorted them to find
    the 500 newest."""
    _seed(stack, team)
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            store = _OnConnection(conn)
            for _ in range(8):
                before = {t: bulk.rows_read(conn, [t]) for t in TABLES}
                pairs, _more = store.pairs(caller, 0, 0.0, 0)
                each = {t: bulk.rows_read(conn, [t]) - before[t] for t in TABLES}
                assert pairs, mode
                read = sum(each.values())
                assert read <= 6 * DEFAULT_WINDOW, f"{mode}: a page read {read} rows: {each}"
