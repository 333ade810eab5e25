"""An operator command's failures go to stderr, its answer alone to stdout: a
script reading the answer must not take a failure for part of it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE, TEMPLATE_DATABASE
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team

pytestmark = pytest.mark.integration


@contextmanager
def closed(admin: psycopg.Connection, *databases: str) -> Iterator[None]:
    """``databases`` refusing new connections until leaving."""
    alter = "ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}"
    try:
        for name in databases:
            admin.execute(sql.SQL(alter).format(sql.Identifier(name), sql.SQL("false")))
        yield
    finally:
        for name in databases:
            admin.execute(sql.SQL(alter).format(sql.Identifier(name), sql.SQL("true")))


def test_migrate_db_says_its_failures_on_stderr(stack: Stack, team: Team) -> None:
    """A template not refreshed, a workspace not migrated and the count of
    failures were printed on stdout."""
    control = dbutil.workspace_url(stack, CONTROL_DATABASE)
    with psycopg.connect(control, autocommit=True) as admin:
        admin.execute(
            "UPDATE workspace SET schema_version = NULL WHERE id = %s", (team.workspace_id,)
        )
        with closed(admin, TEMPLATE_DATABASE, team.database_name):
            done = cli(stack, "migrate-db")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "template not refreshed" in done.stderr, done.stderr
    assert f"{team.slug}: failed" in done.stderr, done.stderr
    assert "2 failed" in done.stderr, done.stderr
    assert "fail" not in done.stdout and "not refreshed" not in done.stdout, done.stdout
    # Open again, the same command finishes.
    again = cli(stack, "migrate-db")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "migrations done: 1 workspaces" in again.stdout, again.stdout
