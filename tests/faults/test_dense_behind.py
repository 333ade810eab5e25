"""The dense arm behind the writes (the embedding job stopped), on a stack of
its own: a dense or hybrid recall still answers, and its outcome says how many
memories the caller may see are not embedded yet, so that "nothing matched"
reads apart from "not embedded yet"; memories the caller may not see are not
counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from recallatron.vocabulary import DEFAULT_PURPOSE
from recallatron_devkit.stack import Stack
from services.store.domain.recall import NOT_EMBEDDED
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests import dbutil
from tests.clirun import cli
from tests.conftest import wait_for
from tests.faults.stackutil import new_stack, owner_client, plain_client, running

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir)) as started:
        yield started


def _embedded(stack: Stack, database: str, memory_id: str) -> bool:
    rows = dbutil.query(
        stack, database, "SELECT count(*) FROM memory_embedding WHERE memory_id = %s", (memory_id,)
    )
    return bool(rows[0][0])


def test_a_recall_says_how_many_memories_it_may_see_wait_for_their_vectors(stack: Stack) -> None:
    owner, workspace_id, database = owner_client(stack, "behind")
    operator = plain_client(stack.gateway, stack.admin_token)
    member = operator.create_member(workspace_id, "narrow").member
    narrow = plain_client(stack.gateway, operator.create_token(member.id, "n").token)
    try:
        # Embedded while the job runs: the dense arm has vectors to search.
        first = owner.remember(
            "Harbour crane schedule", "The crane works on Mondays", audience_to="workspace"
        ).memory
        wait_for(lambda: _embedded(stack, database, first.id), "the first memory embedded", 90)
        settled = owner.recall("harbour crane", mode="dense", skip_rerank=True).outcome
        assert settled.dense_available
        assert settled.not_embedded == 0 and settled.dense_behind_reason == ""

        stack.stop_service("embedding-job")
        owner.remember(
            "Lighthouse keeper", "Marta keeps the northern lighthouse", audience_to="workspace"
        )
        owner.remember("Ferry timetable", "The ferry leaves at nine")
        narrow.remember("Narrow note", "A note of the narrow member's own")

        for mode in ("dense", "hybrid"):
            outcome = owner.recall("lighthouse keeper", mode=mode, skip_rerank=True).outcome
            assert outcome.dense_available, mode
            # The owner's two new memories wait; the narrow member's private
            # one is not the owner's to count.
            assert outcome.not_embedded == 2, (mode, outcome)
            assert "2 memories you may see are not embedded yet" in outcome.dense_behind_reason
        # The CLI's recall says it too.
        shown = cli(
            stack,
            "recall",
            "lighthouse keeper",
            "--mode",
            "dense",
            "--no-rerank",
            "--gateway",
            stack.gateway,
            "--token",
            owner.token,
        )
        assert shown.returncode == 0, shown.stderr
        assert "(dense arm behind: 2 memories you may see are not embedded yet" in shown.stdout
        lexical = owner.recall("lighthouse keeper", mode="lexical").outcome
        assert lexical.not_embedded == 0 and lexical.dense_behind_reason == ""

        # The narrow member sees the workspace's lighthouse memory and their own.
        theirs = narrow.recall("lighthouse keeper", mode="dense", skip_rerank=True).outcome
        assert theirs.not_embedded == 2, theirs

        # The count stops at its cap, as the services' role asks it.
        with psycopg.connect(dbutil.workspace_url(stack, database), user=APP_ROLE) as conn:
            conn.execute(
                SET_LOCALS,
                (["recallatron.member_id", "recallatron.purpose"], [member.id, DEFAULT_PURPOSE]),
            )
            counted = [conn.execute(NOT_EMBEDDED, (cap,)).fetchone() for cap in (1, 2, 1_000)]
        assert counted == [(1,), (2,), (2,)]

        stack.start_service("embedding-job")
        wait_for(
            lambda: (
                owner.recall("lighthouse", mode="dense", skip_rerank=True).outcome.not_embedded == 0
            ),
            "the backlog embedded",
            90,
        )
        caught_up = owner.recall("lighthouse keeper", mode="dense", skip_rerank=True).outcome
        assert caught_up.dense_behind_reason == ""
    finally:
        owner.close()
        narrow.close()
        operator.close()


def test_a_memory_not_embedded_yet_is_not_judged_beside_the_point(stack: Stack) -> None:
    """A memory the lexical arm finds while it has no vector has no cosine to
    judge it by: a hybrid recall that returns it must not say nothing_relevant
    (which tells an agent to say it found nothing)."""
    owner, _, database = owner_client(stack, "unjudged")
    try:
        first = owner.remember("Harbour crane schedule", "The crane works on Mondays").memory
        wait_for(lambda: _embedded(stack, database, first.id), "the first memory embedded", 90)
        stack.stop_service("embedding-job")
        try:
            written = owner.remember("Zephyrine tide tables", "Zephyrine tides peak at dawn").memory
            outcome = owner.recall("zephyrine tide tables", mode="hybrid", skip_rerank=True).outcome
            assert outcome.dense_available and outcome.not_embedded == 1
            assert [r.memory.id for r in outcome.results][:1] == [written.id]
            assert not outcome.nothing_relevant, outcome
        finally:
            stack.start_service("embedding-job")
    finally:
        owner.close()
