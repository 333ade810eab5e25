"""A supersede renews nothing (the memory's updated_at stays), but a release
before set the superseded memory's updated_at to the supersede's time. Such
rows are restored (restore_superseded_updated_at, workspace migration 0074,
and an archive's import) to the time of the memory's last change that is not
a supersede: its create, or its latest correct. Rows are made as that release
wrote them: superseded through the product, then updated_at set to the
supersede revision's time as the database's owner."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, remember_robin, wait_for
from tests.integration.test_export_import import made_database

pytestmark = pytest.mark.integration

# A superseded memory's times: its create's, its latest correct's (None when
# never corrected), its supersede's, and its updated_at and its vector's copy.
TIMES = """
SELECT max(r.changed_at) FILTER (WHERE r.action = 'create'),
       max(r.changed_at) FILTER (WHERE r.action = 'correct'),
       max(r.changed_at) FILTER (WHERE r.action = 'supersede'),
       (SELECT updated_at FROM memory WHERE id = %(id)s),
       (SELECT array_agg(memory_updated_at) FROM memory_embedding WHERE memory_id = %(id)s)
FROM memory_revision r WHERE r.memory_id = %(id)s
"""


def _owner(stack: Stack, database: str, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    return dbutil.query(stack, database, statement, params)  # type: ignore[arg-type]


def _times(stack: Stack, database: str, memory_id: str) -> tuple[Any, ...]:
    (row,) = _owner(stack, database, TIMES, id=memory_id)
    return tuple(row)


def _renewed_as_before(stack: Stack, database: str, memory_id: str) -> datetime:
    """updated_at set to the supersede's time, as the earlier release wrote it
    (its vector's copy followed it, by trigger); returns that time."""
    ((at,),) = _owner(
        stack,
        database,
        "UPDATE memory m SET updated_at = r.changed_at FROM memory_revision r"
        " WHERE m.id = %(id)s AND r.memory_id = m.id AND r.action = 'supersede'"
        " RETURNING m.updated_at",
        id=memory_id,
    )
    return at  # type: ignore[no-any-return]


def _queue_empty(stack: Stack, database: str) -> bool:
    return _owner(stack, database, "SELECT count(*) FROM embedding_job") == [(0,)]


def _superseded(team: Team, corrected: bool) -> str:
    """Bob's workspace memory, corrected once or not, superseded by Ada's
    draft only she may see (Bob and Cy read it as current)."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    if corrected:
        m = bob.correct(m.id, m.revision, "typo", body="From the kickoff call.").memory
    ada.supersede(m.id, m.revision, "Robin leads Apollo, says Ada", audience_to=team.members["ada"])
    return str(m.id)


def test_a_renewal_by_an_earlier_supersede_is_restored(stack: Stack, team: Team) -> None:
    db = team.database_name
    created = _superseded(team, corrected=False)
    corrected = _superseded(team, corrected=True)
    wait_for(partial(_queue_empty, stack, db), "the embedding job")
    # Superseded by this release: nothing renewed.
    for memory_id in (created, corrected):
        made, fixed, superseded, updated, _copies = _times(stack, db, memory_id)
        assert updated == (fixed or made) < superseded
    # Left alone: a time that is not a supersede's (as a correct after it).
    other = _superseded(team, corrected=False)
    ((other_at,),) = _owner(
        stack,
        db,
        "UPDATE memory SET updated_at = updated_at + interval '1 hour' WHERE id = %(id)s"
        " RETURNING updated_at",
        id=other,
    )
    for memory_id in (created, corrected):
        renewed = _renewed_as_before(stack, db, memory_id)
        assert _times(stack, db, memory_id)[3:] == (renewed, [renewed])

    for _ in range(2):
        _owner(stack, db, "SELECT restore_superseded_updated_at(), 1")
        made, fixed, superseded, updated, copies = _times(stack, db, created)
        assert fixed is None
        assert (updated, copies) == (made, [made])
        made, fixed, superseded, updated, copies = _times(stack, db, corrected)
        assert made < fixed < superseded
        assert (updated, copies) == (fixed, [fixed])
        assert _times(stack, db, other)[3] == other_at


def test_an_archive_of_an_earlier_release_is_restored_on_import(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    db = team.database_name
    memory_id = _superseded(team, corrected=True)
    wait_for(partial(_queue_empty, stack, db), "the embedding job")
    renewed = _renewed_as_before(stack, db, memory_id)
    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    copy = made_database(stack, json.loads(done.stdout)["workspace_id"])

    made, fixed, superseded, updated, copies = _times(stack, copy, memory_id)
    assert superseded == renewed
    assert made < fixed < superseded
    assert (updated, copies) == (fixed, [fixed])
