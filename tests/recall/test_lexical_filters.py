"""The lexical arm's capped path under a filter, against the real stack: the
walk of the created_at index is chosen on the count of the caller's matches,
as if every match passed; a filter lets few of them pass, so a recall that
narrows reads its matches from the GIN index and never the whole workspace,
and both ways give the same rows whatever the filter."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests.conftest import Team
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

MEMORIES = 4_000
# Every fourth memory holds the common word: 1,000 matches, capped (more than
# CANDIDATE_CAP) and, unfiltered, walked (1,000 x 1,000 > 0.15 x 500 x 4,000).
MATCHES = MEMORIES // 4
# The oldest ten matches are decisions, mention the entity and are renewed
# within the expiry gate: each filter lets those ten pass, and no other match.
FEW = 10
EXPIRY_DAYS = 30


def _seed(stack: Stack, team: Team) -> str:
    """The workspace above, written directly (the triggers keep the
    statistics) and analysed; returns the entity's id."""
    entity = str(uuid.uuid4())
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        # Memory i was written i hours after the first, the last of them two
        # months ago, and not renewed since, but for the few, renewed a day ago.
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(),"
            "  CASE WHEN i %% 4 = 0 AND i <= 4 * %(few)s THEN 'decision' ELSE 'note' END"
            "  ::memory_kind,"
            "  CASE WHEN i %% 4 = 0 THEN 'Capword item ' ELSE 'Weekly item ' END || i,"
            "  'Nothing rare in here.', 1, 'told', '{assist}', %(ada)s::uuid,"
            "  now() - make_interval(days => 60, hours => %(n)s - i),"
            "  CASE WHEN i %% 4 = 0 AND i <= 4 * %(few)s THEN now() - interval '1 day'"
            "   ELSE now() - make_interval(days => 60, hours => %(n)s - i) END"
            " FROM generate_series(1, %(n)s) AS i",
            {"few": FEW, "ada": team.members["ada"], "n": MEMORIES},
        )
        conn.execute(
            "INSERT INTO entity (id, name, name_key) VALUES (%s, 'Robin Goodwin', 'robin goodwin')",
            (entity,),
        )
        conn.execute(
            "INSERT INTO mention (memory_id, entity_id)"
            " SELECT id, %s FROM memory WHERE kind = 'decision'",
            (entity,),
        )
        # A few matches superseded by the match after them, for the filter
        # that takes superseded memories in.
        conn.execute(
            "UPDATE memory m SET superseded_by_id = n.id"
            " FROM (SELECT id, lead(id) OVER (ORDER BY created_at) AS next FROM memory"
            "       WHERE title LIKE 'Capword%%') s, memory n"
            " WHERE m.id = s.id AND n.id = s.next AND m.title IN ('Capword item 400',"
            " 'Capword item 2000', 'Capword item 3996')"
        )
        conn.execute("ANALYZE memory")
    return entity


def _app_conn(stack: Stack, team: Team) -> psycopg.Connection:
    """As the services' role, in a transaction set for ada recalling for
    assist exactly as the store sets it."""
    conn = psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE)
    conn.execute(
        SET_LOCALS,
        (["recallatron.member_id", "recallatron.purpose"], [team.members["ada"], "assist"]),
    )
    return conn


# Rows of the memory table this transaction has read, by any scan (the
# arm's own functions run in it too).
READ = """
SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
FROM pg_stat_xact_user_tables WHERE relid = 'memory'::regclass
"""


def _read(conn: psycopg.Connection) -> int:
    row = conn.execute(READ).fetchone()
    return int(row[0]) if row else 0


def _filters(entity: str) -> dict[str, tuple[r.Filters, int]]:
    return {
        "a rare kind": (r.Filters(kinds=["decision"]), 0),
        "an entity": (r.Filters(mention_entity_ids=[entity]), 0),
        "the expiry gate": (r.Filters(), EXPIRY_DAYS),
    }


def test_a_filtered_recall_of_a_common_term_reads_its_matches_not_the_workspace(
    stack: Stack, team: Team
) -> None:
    """A filter that ten of the 1,000 matches pass: the arm reads the
    matches from the GIN index (at most the 1,000 rows), where the walk read
    every one of the 4,000 memories looking for 500 that pass. Unfiltered,
    the same term is still walked, which stops at the cap."""
    entity = _seed(stack, team)
    for name, (filters, expiry_days) in _filters(entity).items():
        with _app_conn(stack, team) as conn:
            params = {**r._filter_params(filters, expiry_days), "limit": 100}
            r._merged_mentions(conn, params)
            before = _read(conn)
            found = r.lexical_arm(conn, "capword", params).candidates
            read = _read(conn) - before
        assert len(found) == FEW, (name, len(found))
        assert read <= MATCHES, f"{name}: {read} memory rows read of {MEMORIES} for {FEW} rows"
    with _app_conn(stack, team) as conn:
        terms = r.query_terms(conn, "capword")
        assert terms is not None and terms.capped and terms.by_index
        params = {**r._filter_params(r.Filters(), 0), "limit": 100}
        before = _read(conn)
        found = r.lexical_arm(conn, "capword", params).candidates
        read = _read(conn) - before
    assert len(found) == 100
    # Walked: it stops once CANDIDATE_CAP matches passed, short of the table.
    assert r.walks(r.Filters(), 0)
    assert read < MEMORIES, f"unfiltered: {read} memory rows read of {MEMORIES}"


def test_both_ways_of_the_capped_path_agree_under_every_filter(stack: Stack, team: Team) -> None:
    """Reading the matches from the GIN index and walking the created_at
    index give the same rows, in the same order with the same scores, under
    each filter, none, and superseded memories taken in; and the arm answers
    those rows."""
    entity = _seed(stack, team)
    cases = {
        **_filters(entity),
        "a kind and an entity": (r.Filters(kinds=["decision"], mention_entity_ids=[entity]), 0),
        "none": (r.Filters(), 0),
        "superseded taken in": (r.Filters(include_superseded=True), 0),
    }
    for name, (filters, expiry_days) in cases.items():
        with _app_conn(stack, team) as conn:
            params: dict[str, object] = {
                **r._filter_params(filters, expiry_days),
                "limit": 100,
            }
            r._merged_mentions(conn, params)
            terms = r.query_terms(conn, "capword")
            assert terms is not None and terms.capped
            capped = {
                **params,
                **terms.params(),
                "cap": r.CANDIDATE_CAP,
                "prefilter": r.PREFILTER_FACTOR * 100,
            }
            found = {
                by_index: [
                    (str(row[0]), row[1])
                    for row in conn.execute(r.LEXICAL_CAPPED, {**capped, "by_index": by_index})
                ]
                for by_index in (True, False)
            }
            answered = [(c.id, c.score) for c in r.lexical_arm(conn, "capword", params).candidates]
        assert found[True] == found[False], name
        assert answered == found[True], name
        assert len(answered) == (100 if name in ("none", "superseded taken in") else FEW), name
