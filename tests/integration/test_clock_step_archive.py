"""A statement retired before it was stated: the server's clock stepped back
between the write that stated a claim, a relation or an alias and the one
that retired it (a virtual machine resumed, a time service correcting). The
database holds it as written; an archive of that workspace is imported as
it is, rather than refused, so the workspace can still be moved or
restored."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, remember_robin
from tests.integration.test_export_import import made_database

pytestmark = pytest.mark.integration

TABLES = ("attribute_claim", "relation_claim", "entity_alias")
# The times of the memory's statements, in a stable order.
STATEMENTS = " UNION ALL ".join(
    f"SELECT '{t}', stated_at, retired_at FROM {t} WHERE memory_id = %(id)s" for t in TABLES
)


def _owner(stack: Stack, database: str, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    return dbutil.query(stack, database, statement, params)  # type: ignore[arg-type]


def test_an_archive_holding_a_statement_retired_before_it_was_stated_is_imported(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    bob = team.clients["bob"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    bob.correct(m.id, m.revision, "Robin moved", body="Again.", replace_claims=True)
    # As a clock stepped back a minute between the remember and the correct.
    for table in TABLES:
        _owner(
            stack,
            team.database_name,
            f"UPDATE {table} SET retired_at = stated_at - interval '1 minute'"
            " WHERE memory_id = %(id)s AND retired_at IS NOT NULL RETURNING id",
            id=m.id,
        )
    held = sorted(_owner(stack, team.database_name, STATEMENTS, id=m.id))
    assert held and all(r[2] is not None and r[2] < r[1] for r in held), held

    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    copy = made_database(stack, json.loads(done.stdout)["workspace_id"])
    assert sorted(_owner(stack, copy, STATEMENTS, id=m.id)) == held
