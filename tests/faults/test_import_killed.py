"""An import killed (SIGKILL: no handler runs, nothing is undone) in the
middle leaves a workspace marked as being imported: served to nobody, and
removed by the next import of its slug, by delete-workspace once the
importer is gone, or by a store, at its start and then periodically
(docs/export.md, "An import that was killed"). The import runs in a child
process held at one step by a hook of its own, so the kill lands there; on a
stack of its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.clirun import cli
from tests.conftest import WAIT_SECONDS, wait_for
from tests.faults.stackutil import new_stack, owner_client, running

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# The import as `recallatron import` runs it, held for good at one step:
# "rows" while its rows are being written (the workspace and its members
# made, the rows not committed), "written" once they are committed (its last
# steps not done). The marker file says it got there.
CHILD = """
import sys, time
from pathlib import Path
from recallatron_cli import operator
from services.store.domain import archive_import
from services.store.domain.archive_import import Importer

directory, slug, moment, marker = sys.argv[1:5]

def held():
    Path(marker).write_text(moment)
    while True:
        time.sleep(1)

phase = []
def on_rows(_n):
    if moment == "rows" and phase[-1:] == ["importing"]:
        held()

if moment == "written":
    write = archive_import._write
    def written(*args):
        queued = write(*args)
        held()
        return queued
    archive_import._write = written

operator.find_database()
with operator._store() as (dbs, control):
    Importer(dbs, control).import_archive(
        Path(directory), slug, on_total=lambda p, _n: phase.append(p), on_rows=on_rows
    )
"""


# The store's periodic removal of killed imports: held off (an hour) but in
# the test of it, so each other test sees which of the others removes one.
SWEEP = "RECALLATRON_UNFINISHED_IMPORTS_SWEEP_SECONDS"


@pytest.fixture(scope="module")
def fault_stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, env={SWEEP: "3600"})) as stack:
        yield stack


@pytest.fixture(scope="module")
def operator(fault_stack: Stack) -> Iterator[Client]:
    client = Client(fault_stack.gateway, fault_stack.admin_token)
    yield client
    client.close()


@pytest.fixture(scope="module")
def archive(fault_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace of 40 memories (some private, some stating claims), exported."""
    owner, _workspace_id, _database = owner_client(fault_stack, "killed-import-source")
    for i in range(40):
        owner.remember(
            f"Note {i}",
            f"Apollo release note number {i}.",
            audience_to="workspace" if i % 3 else None,
            claims=[{"entity": {"name": f"Part {i % 7}"}, "attribute": "owner", "value": "ada"}],
        )
    owner.close()
    out = tmp_path_factory.mktemp("killed-import") / "archive"
    done = cli(fault_stack, "export", "--workspace", "killed-import-source", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def control_rows(stack: Stack, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        return conn.execute(sql, params).fetchall()


def database_exists(stack: Stack, name: str) -> bool:
    with psycopg.connect(with_database(stack.database_url, "postgres")) as conn:
        return bool(
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchall()
        )


@contextmanager
def import_held(stack: Stack, archive: Path, slug: str, moment: str, tmp: Path) -> Iterator[str]:
    """Starts the import and waits until it is held at ``moment`` with its
    workspace recorded; yields that workspace's database name while its
    process lives, and kills it (SIGKILL) after the block."""
    marker = tmp / f"{slug}.held"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(archive), slug, moment, str(marker)],
        env={**stack.env_for("store"), "RECALLATRON_PROGRESS": "off"},
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: child.poll() is not None or (marker.exists() and made(stack, slug)),
            f"the import held at {moment!r}",
        )
        assert child.poll() is None, child.communicate()[1].decode()
        database = made(stack, slug)
        assert database is not None
        yield database
        child.send_signal(signal.SIGKILL)
        child.wait(WAIT_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stderr is not None:
            child.stderr.close()


def kill_mid_import(stack: Stack, archive: Path, slug: str, moment: str, tmp: Path) -> str:
    """The import held at ``moment``, then killed; returns its workspace's
    database name."""
    with import_held(stack, archive, slug, moment, tmp) as database:
        return database


def made(stack: Stack, slug: str) -> str | None:
    """The database of the workspace recorded under ``slug`` (None: none)."""
    rows = control_rows(stack, "SELECT database_name FROM workspace WHERE slug = %s", (slug,))
    return str(rows[0][0]) if rows else None


def listed(operator: Client) -> set[str]:
    return {w.workspace.slug for w in operator.list_workspaces(1000).workspaces}


def refused(call: Any) -> grpc.StatusCode | None:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return None


def assert_not_served(stack: Stack, operator: Client, slug: str, tmp: Path) -> None:
    assert slug not in listed(operator), "an unfinished import is listed as a workspace"
    assert refused(lambda: operator.list_members(slug)) is not None
    export = cli(stack, "export", "--workspace", slug, "--out", str(tmp / "export"))
    assert export.returncode == 1 and "is being imported" in export.stderr, export.stderr
    members = control_rows(
        stack,
        "SELECT m.id::text FROM member m JOIN workspace w ON w.id = m.workspace_id"
        " WHERE w.slug = %s",
        (slug,),
    )
    assert members, "the import was killed before it made its members"
    assert refused(lambda: operator.create_token(members[0][0], "too soon")) is not None, (
        "a token was made for a member of an unfinished import"
    )


@pytest.mark.parametrize("moment", ["rows", "written"])
def test_a_killed_import_is_not_served_and_its_slug_imports_again(
    fault_stack: Stack, operator: Client, archive: Path, tmp_path: Path, moment: str
) -> None:
    slug = f"killed-{uuid.uuid4().hex[:10]}"
    left = kill_mid_import(fault_stack, archive, slug, moment, tmp_path)
    assert_not_served(fault_stack, operator, slug, tmp_path)

    again = cli(fault_stack, "import", str(archive), "--as", slug, "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["removed_unfinished"]
    assert not database_exists(fault_stack, left), "the killed import's database stays"
    assert [r[0] for r in control_rows(
        fault_stack, "SELECT id::text FROM workspace WHERE slug = %s", (slug,)
    )] == [report["workspace_id"]]  # fmt: skip

    # The whole archive, served.
    manifest = json.loads((archive / "manifest.json").read_text())
    expected = {k: f["records"] for k, f in manifest["files"].items() if k in report["counts"]}
    assert {k: report["counts"][k] for k in expected} == expected
    assert report["counts"]["memories"] == 40
    assert slug in listed(operator)
    owner_id = next(m["id"] for m in report["members"] if m["role"] == "owner")
    owner = Client(fault_stack.gateway, operator.create_token(owner_id, "copy").token)
    try:
        found = owner.recall("Apollo release note number 17", mode="lexical").outcome.results
        assert any(r.memory.title == "Note 17" for r in found)
    finally:
        owner.close()


def test_delete_workspace_waits_for_a_live_import_and_removes_a_killed_one(
    fault_stack: Stack, operator: Client, archive: Path, tmp_path: Path
) -> None:
    slug = f"killed-{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "held"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(archive), slug, "rows", str(marker)],
        env={**fault_stack.env_for("store"), "RECALLATRON_PROGRESS": "off"},
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: child.poll() is not None or (marker.exists() and made(fault_stack, slug)),
            "the import held",
        )
        assert child.poll() is None
        database = made(fault_stack, slug)
        assert database is not None
        # Its process alive: the import is under way, and not deleted.
        assert (
            refused(lambda: operator.delete_workspace(slug, slug))
            == grpc.StatusCode.FAILED_PRECONDITION
        )
        assert made(fault_stack, slug) == database
        child.send_signal(signal.SIGKILL)
        child.wait(WAIT_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    operator.delete_workspace(slug, slug)
    assert made(fault_stack, slug) is None
    assert not database_exists(fault_stack, database)


def test_a_store_starting_removes_what_a_killed_import_left(
    fault_stack: Stack, archive: Path, tmp_path: Path
) -> None:
    slug = f"killed-{uuid.uuid4().hex[:10]}"
    database = kill_mid_import(fault_stack, archive, slug, "written", tmp_path)
    fault_stack.stop_service("store")
    fault_stack.start_service("store")
    fault_stack.wait_serving("store")
    wait_for(
        lambda: made(fault_stack, slug) is None and not database_exists(fault_stack, database),
        "the store to remove the killed import's workspace",
    )


def test_a_running_store_removes_what_a_killed_import_left_and_spares_a_live_one(
    fault_stack: Stack, operator: Client, archive: Path, tmp_path: Path
) -> None:
    """A store that keeps running removes a killed import's workspace by its
    periodic sweep (set to a second here), so the slug is free again without
    a restart, and leaves alone an import whose process still lives."""
    fault_stack.config.env[SWEEP] = "1"
    try:
        # Started before either import: its start-up pass finds nothing.
        fault_stack.restart_service("store")
        store = fault_stack.processes["store"]
        killed, live = (f"killed-{uuid.uuid4().hex[:10]}" for _ in range(2))
        with import_held(fault_stack, archive, live, "rows", tmp_path) as live_database:
            left = kill_mid_import(fault_stack, archive, killed, "written", tmp_path)
            wait_for(
                lambda: refused(lambda: operator.create_workspace(killed)) is None,
                "the running store to free the killed import's slug",
            )
            assert not database_exists(fault_stack, left), "the killed import's database stays"
            # A sweep ran after the kill and spared the import under way.
            assert made(fault_stack, live) == live_database
        wait_for(
            lambda: (
                made(fault_stack, live) is None and not database_exists(fault_stack, live_database)
            ),
            "the running store to remove the second import once it was killed",
        )
        assert fault_stack.processes["store"] is store and store.poll() is None
    finally:
        fault_stack.config.env[SWEEP] = "3600"
        fault_stack.restart_service("store")
