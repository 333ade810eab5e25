"""A rare word beside a common one, against the real stack: when the kept
terms' matches are many, the lexical arm ranks only the newest CANDIDATE_CAP
of them, and every match of the query's rare terms beside them (migration
0036), so the one old memory holding the rare word is found whatever the
common word's matches."""

from __future__ import annotations

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests.conftest import Team
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

# Newer than the rare memories, each holding the common word: more than
# CANDIDATE_CAP matches, so the query takes the capped path.
COMMON = 600


def _seed(stack: Stack, team: Team) -> dict[str, str]:
    """Ada's shared and private memories of the rare word, then COMMON newer
    shared memories of the common word (written directly; the triggers keep
    the statistics)."""
    ada = team.clients["ada"]
    rare = {
        "shared": ada.remember(
            "Zephyrine incident",
            "The zephyrine outage postmortem is written.",
            audience_to="workspace",
        ).memory.id,
        "private": ada.remember("Zephyrine salary", "Zephyrine pay band notes.").memory.id,
    }
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'note', 'Deploy note ' || i, 'Nothing rare here.', 1,"
            "  'told', '{assist}', %(ada)s::uuid, now() + make_interval(secs => i),"
            "  now() + make_interval(secs => i)"
            " FROM generate_series(1, %(n)s) AS i",
            {"ada": team.members["ada"], "n": COMMON},
        )
        # The lexical arm alone is under test: no vectors needed.
        conn.execute("DELETE FROM embedding_job")
        conn.execute("ANALYZE memory")
    return rare


def test_a_rare_word_beside_a_common_one_finds_its_old_memory(stack: Stack, team: Team) -> None:
    rare = _seed(stack, team)
    ada, bob = team.clients["ada"], team.clients["bob"]
    for query in ("zephyrine deploy", "Deploy: zephyrine?"):
        mine = ada.recall(query, mode="lexical", limit=10).outcome
        found = [x.memory.id for x in mine.results]
        # The rare word weighs most (BM25's idf): its memories come first.
        assert set(found[:2]) == {rare["shared"], rare["private"]}, (query, found)
        assert mine.counts.lexical == mine.counts.admitted == 100
        theirs = [x.memory.id for x in bob.recall(query, mode="lexical", limit=10).outcome.results]
        assert theirs[0] == rare["shared"] and rare["private"] not in theirs, (query, theirs)


def test_both_ways_of_the_capped_path_rank_the_rare_matches(stack: Stack, team: Team) -> None:
    """Reading the newest matches from the GIN index and walking the
    created_at index give the same rows beside the rare matches, for each
    filter, and only what the caller may see."""
    rare = _seed(stack, team)
    for member, expected in (("ada", set(rare.values())), ("bob", {rare["shared"]})):
        for filters in (r.Filters(), r.Filters(kinds=["note"]), r.Filters(kinds=["decision"])):
            conn = psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE)
            with conn:
                conn.execute(
                    SET_LOCALS,
                    (
                        ["recallatron.member_id", "recallatron.purpose"],
                        [team.members[member], "assist"],
                    ),
                )
                terms = r.query_terms(conn, "zephyrine deploy")
                assert terms is not None and terms.capped and terms.rare == ["zephyrin"]
                params = {
                    **r._filter_params(filters, 0),
                    "limit": 100,
                    "cap": r.CANDIDATE_CAP,
                    "prefilter": r.PREFILTER_FACTOR * 100,
                    **terms.params(),
                }
                found = {
                    by_index: [
                        (str(row[0]), row[1])
                        for row in conn.execute(r.LEXICAL_CAPPED, {**params, "by_index": by_index})
                    ]
                    for by_index in (True, False)
                }
            assert found[True] == found[False], (member, filters)
            ids = [row[0] for row in found[True]]
            if filters.kinds == ["decision"]:
                assert ids == [], (member, filters)
            else:
                assert set(ids[: len(expected)]) == expected, (member, filters, ids[:3])


def test_the_rare_terms_are_the_rarest_within_the_cap() -> None:
    assert r.rare_terms(["deploy", "zephyrin"], [600, 1]) == ["zephyrin"]
    assert r.rare_terms(["a", "b", "c"], [300, 200, 200]) == ["b", "c"]
    assert r.rare_terms(["a", "b", "c"], [300, 201, 300]) == ["b"]
    assert r.rare_terms(["a", "b"], [501, 700]) == []
    assert r.rare_terms(["b", "a"], [250, 250]) == ["a", "b"]
