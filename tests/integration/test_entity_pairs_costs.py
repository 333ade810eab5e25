"""What an owner's entity pairs (ListEntityPairs) cost: the proposals look at
the entities of the caller's newest memories, and read that window, not every
mention of an entity the window names (an entity mentioned by tens of
thousands of older memories costs what the window holds of it), and the
window is walked from the newest memory, not sorted from all of them."""

from __future__ import annotations

import psycopg
import pytest

from recallatron.embed_input import EMBED_INPUT_VERSION
from recallatron_devkit.stack import Stack
from services.store.domain import entity_merge
from services.store.domain.entity_merge import EntityMergeStore
from services.store.infrastructure.db import Caller
from tests import dbutil
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration

OLD = 20_000
NEW = 40
TABLES = ["memory", "mention", "memory_embedding", "entity", "entity_alias"]


class _OnConnection(bulk.OneConnection, EntityMergeStore):
    """The store's proposals run on one connection, so that
    pg_stat_xact_user_tables counts the rows they read."""


def _seed(stack: Stack, team: Team) -> None:
    """20,000 old memories each mentioning Acme, then 40 new ones each
    mentioning Acme and one of Robin and Robin Goodwin (a whole-word prefix
    sharing the co-mentioned Acme); every memory embedded (written directly,
    so nothing waits for the embedding job)."""
    ada = team.members["ada"]
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'note', 'Entry ' || i, '', 1, 'told', '{assist}',"
            "  %(ada)s, timestamptz '2025-01-01' + i * interval '1 minute',"
            "  timestamptz '2025-01-01' + i * interval '1 minute'"
            " FROM generate_series(1, %(n)s) AS i",
            {"ada": ada, "n": OLD + NEW},
        )
        conn.execute("DELETE FROM embedding_job")
        conn.execute(
            "INSERT INTO entity (id, name, name_key) SELECT gen_random_uuid(), n, lower(n)"
            " FROM unnest(ARRAY['Acme', 'Robin', 'Robin Goodwin']) AS n"
        )
        conn.execute(
            "CREATE TEMP TABLE numbered AS SELECT id, substr(title, 7)::int AS i FROM memory"
        )
        conn.execute(
            "INSERT INTO mention (memory_id, entity_id)"
            " SELECT n.id, (SELECT id FROM entity WHERE name = 'Acme') FROM numbered n"
            " UNION ALL"
            " SELECT n.id, (SELECT id FROM entity"
            "  WHERE name = CASE WHEN n.i %% 2 = 0 THEN 'Robin' ELSE 'Robin Goodwin' END)"
            " FROM numbered n WHERE n.i > %(old)s",
            {"old": OLD},
        )
        conn.execute(
            "INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)"
            " SELECT n.id, 'test-model', %(v)s,"
            "  array_fill((1 + n.i %% 5)::real, ARRAY[384])::vector FROM numbered n",
            {"v": EMBED_INPUT_VERSION},
        )
        conn.execute("ANALYZE")


def _by_table(conn: psycopg.Connection) -> dict[str, int]:
    """The rows this transaction has read so far from each of TABLES."""
    return {t: bulk.rows_read(conn, [t]) for t in TABLES}


def test_entity_pairs_read_the_window_not_every_mention(stack: Stack, team: Team) -> None:
    """Acme is mentioned by 20,040 memories, 40 of them in the window: the
    proposals (Robin and Robin Goodwin, sharing Acme) read about the window's
    rows under the plans the store's statements get (custom, and generic once
    prepared) and the generic plan forced, not every mention of Acme, every
    vector and every memory (143,621 rows read before; 26,394 once the rules
    read the window, the window itself sorted from every memory)."""
    _seed(stack, team)
    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    # A few rows per memory of the window (its mentions, their vectors, read
    # once or twice as the plan goes) and per pair checked: far below OLD.
    bound = 10 * entity_merge.PAIR_MEMORIES
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            store = _OnConnection(conn)
            for _ in range(8):
                before = _by_table(conn)
                pairs, _more = store.pairs(caller)
                after = _by_table(conn)
                each = {t: n - before.get(t, 0) for t, n in after.items()}
                read = sum(each.values())
                names = [{p.first.entity.name, p.second.entity.name} for p in pairs]
                assert {"Robin", "Robin Goodwin"} in names, (mode, names)
                assert read <= bound, f"{mode}: the proposals read {read} rows: {each}"
