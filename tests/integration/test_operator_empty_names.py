"""An operator command given an empty name (an unset shell variable, say
`--workspace "$WS"`) refuses it naming the argument, and does nothing: the
empty value was taken for no value, so `rebuild --workspace ""` rebuilt
every workspace and `servers drop-kept --workspace ""` dropped the copies of
the deleted ones, and `servers drain ""` ended in a database constraint's
words."""

from __future__ import annotations

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE
from tests import dbutil
from tests.clirun import cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("rebuild", "--workspace", ""), "--workspace"),
        (("servers", "drop-kept", "--workspace", ""), "--workspace"),
        (("migrate-db", "--parallel", "0"), "--parallel"),
    ],
)
def test_an_empty_or_zero_argument_is_refused_naming_it(
    stack: Stack, args: tuple[str, ...], named: str
) -> None:
    done = cli(stack, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: INVALID_ARGUMENT: "), done.stderr
    assert f"({named})" in done.stderr, done.stderr
    assert done.stdout == "", done.stdout


@pytest.mark.parametrize("command", ["drain", "undrain"])
def test_an_empty_server_name_is_refused_and_marks_nothing(stack: Stack, command: str) -> None:
    done = cli(stack, "servers", command, "")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "server: is not a valid server name" in done.stderr, done.stderr
    assert "constraint" not in done.stderr, done.stderr
    with psycopg.connect(dbutil.workspace_url(stack, CONTROL_DATABASE)) as conn:
        rows = conn.execute("SELECT name FROM postgres_server WHERE draining").fetchall()
    assert rows == []
