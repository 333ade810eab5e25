"""One memory the embed service refuses (design §6) on a stack of its own
whose embed service accepts shorter texts than the store: that memory fails
alone, is retried alone and parked with its reason (GetStatus and a metric),
while 20 neighbours of another member and another workspace's memories are
embedded."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import wait_for
from tests.faults.stackutil import new_stack, owner_client, plain_client, record, running

pytestmark = pytest.mark.integration

EMBED_LIMIT = 1_000
ENV = {
    # The embed service refuses more than this; the job sends up to 8,000.
    "RECALLATRON_MAX_TEXT_CHARS": str(EMBED_LIMIT),
    "RECALLATRON_JOB_ROW_MAX_ATTEMPTS": "3",
    "RECALLATRON_JOB_ROW_BACKOFF_SECONDS": "0.2",
    "RECALLATRON_JOB_ROW_MAX_BACKOFF_SECONDS": "0.5",
}


@pytest.fixture(scope="module")
def stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV, metrics=True)) as started:
        yield started


def _metric(stack: Stack, name: str, label: str) -> float | None:
    port = stack.config.metrics_ports["embedding-job"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + "{") and label in line:
                return float(line.rsplit(" ", 1)[1])
    return None


def test_a_refused_memory_is_parked_alone(stack: Stack) -> None:
    owner, workspace_id, database = owner_client(stack, "poison")
    operator = plain_client(stack.gateway, stack.admin_token)
    member = operator.create_member(workspace_id, "neighbour").member
    neighbour = plain_client(stack.gateway, operator.create_token(member.id, "n").token)
    other, _, other_db = owner_client(stack, "elsewhere")
    try:
        poison = owner.remember("Too long for this embed service", "x " * EMBED_LIMIT).memory
        mine = [neighbour.remember(f"Neighbour {i}", f"note {i}").memory.id for i in range(20)]
        theirs = [other.remember(f"Other {i}", f"theirs {i}").memory.id for i in range(5)]

        def embedded(db: str, ids: list[str]) -> bool:
            rows = dbutil.query(
                stack,
                db,
                "SELECT count(*) FROM memory_embedding WHERE memory_id = ANY(%s::uuid[])",
                (ids,),
            )
            return rows[0][0] == len(ids)

        wait_for(lambda: embedded(database, mine), "the 20 neighbours embedded", timeout=90)
        wait_for(lambda: embedded(other_db, theirs), "the other workspace embedded", timeout=90)
        status = wait_for(
            lambda: (s := owner.status()).parked == 1 and s, "the refused memory parked", 90
        )
        assert status.pending == 0
        assert len(status.parked_reasons) == 1
        reason = status.parked_reasons[0]
        assert reason.count == 1 and "INVALID_ARGUMENT" in reason.reason
        assert f"the limit is {EMBED_LIMIT}" in reason.reason
        # Tried once per attempt, alone; then left alone.
        attempts = dbutil.query(
            stack, database, "SELECT attempts FROM embedding_job WHERE memory_id = %s", (poison.id,)
        )
        assert attempts == [(3,)]
        assert not embedded(database, [poison.id])
        parked = wait_for(
            lambda: _metric(stack, "recallatron_embedding_job_parked", workspace_id),
            "the parked gauge",
            30,
        )
        assert parked == 1.0
        # The other workspace's status shows nothing of it.
        assert other.status().parked == 0
        # A correction that fits unparks it, and it is embedded.
        owner.correct(poison.id, 1, "shorter", body="now short enough")
        wait_for(lambda: embedded(database, [poison.id]), "the corrected memory embedded", 90)
        assert owner.status().parked == 0
        record("poison_embedding", neighbours_embedded=len(mine), parked_reason=reason.reason)
    finally:
        for client in (owner, operator, neighbour, other):
            client.close()
