"""The vectors' copy of the eligibility rule (design §4; migrations 0005 and
0020) decides exactly as the memories' own: for every audience, set of
purposes and caller, the policy on memory_embedding and the policy on memory
let the same rows through."""

from __future__ import annotations

import itertools

import psycopg
import pytest

from recallatron.vocabulary import PURPOSES
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests.conftest import Team
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

BOTH_RULES = """
SELECT a.audience, p.purposes,
       vector_is_eligible(a.audience, p.purposes), is_eligible(NULL, a.audience, p.purposes)
FROM unnest(%(audiences)s::uuid[]) AS a(audience)
CROSS JOIN (SELECT string_to_array(x, ',')::purpose[] AS purposes
            FROM unnest(%(purpose_sets)s::text[]) AS x) p
"""


def test_the_vectors_rule_lets_through_what_the_memories_rule_does(
    stack: Stack, team: Team
) -> None:
    members = [team.members["ada"], team.members["bob"]]
    audiences = [None, *members]
    sizes = range(1, len(PURPOSES) + 1)
    purpose_sets = [",".join(c) for n in sizes for c in itertools.combinations(PURPOSES, n)]
    seen: set[bool] = set()
    with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
        for member, purpose in itertools.product([*members, ""], [*PURPOSES, ""]):
            conn.execute(
                SET_LOCALS, (["recallatron.member_id", "recallatron.purpose"], [member, purpose])
            )
            rows = conn.execute(
                BOTH_RULES, {"audiences": audiences, "purpose_sets": purpose_sets}
            ).fetchall()
            assert len(rows) == len(audiences) * len(purpose_sets)
            for audience, purposes, vector_rule, memory_rule in rows:
                # NULL (no caller set) refuses like false in a policy.
                assert bool(vector_rule) == bool(memory_rule), (member, purpose, audience, purposes)
                seen.add(bool(memory_rule))
            conn.rollback()
    assert seen == {True, False}
