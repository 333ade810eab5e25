"""A vector carries copies of its memory's audience and update time (migration
0005: the dense arm filters on them alone). A change of those that is not a
change of text (a removed member's memories handed over, a correct of the
confidence) updates the copies of the vectors it sees; a vector the embedding
job stores while such a change is under way must not keep the values from
before it."""

from __future__ import annotations

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.embedding_job.job import EmbeddingJob
from services.store.domain.control import ControlPlane
from tests import dbutil
from tests.conftest import Team, wait_for
from tests.integration.test_embedding_job import FixedEmbedder, job_alone

pytestmark = pytest.mark.integration

COPIES = """
SELECT m.audience_member_id::text, e.audience_member_id::text,
       m.updated_at = e.memory_updated_at
FROM memory m JOIN memory_embedding e ON e.memory_id = m.id
WHERE m.id = %s
"""


def test_a_vector_stored_during_a_hand_over_takes_the_new_audience(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    bob, cy = team.members["bob"], team.members["cy"]
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        memory = team.clients["bob"].remember("Bob's notes on the roadmap", "Quarterly goals")
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=FixedEmbedder())  # type: ignore[arg-type]
        batch = job.claim(team.workspace_id)
        assert [r[0] for r in batch.rows] == [memory.memory.id]
        # A removal that hands bob's memories to cy, as member_removal runs it:
        # the memory's audience, then its vectors' copies, in one transaction,
        # still open (its history, episodes and statistics follow).
        with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as hand_over:
            hand_over.execute(
                "UPDATE memory SET audience_member_id = %(to)s, updated_at = now() "
                "WHERE audience_member_id = %(member)s",
                {"to": cy, "member": bob},
            )
            hand_over.execute(
                "UPDATE memory_embedding SET audience_member_id = %(to)s "
                "WHERE audience_member_id = %(member)s",
                {"to": cy, "member": bob},
            )
            job.process(batch)
            hand_over.commit()

        def embedded() -> list[tuple[str, str, bool]] | None:
            rows = dbutil.query(stack, team.database_name, COPIES, (memory.memory.id,))
            if rows:
                return rows
            again = job.claim(team.workspace_id)
            if again.rows:
                job.process(again)
            return None

        copies = wait_for(embedded, "the memory's vector")
        assert copies == [(cy, cy, True)], "the vector kept the copies from before the hand-over"
