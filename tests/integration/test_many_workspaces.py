"""Many workspaces on one server (design §10): the cost follows the active
workspaces. A server with room for few connections holds many workspaces
created and used one after another; an idle workspace costs no query and no
connection; a budget the server cannot hold stops the start with both
numbers; a new workspace is a copy of the migrated template."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack, StackConfig, own_config, running
from services.store.infrastructure.db import CONTROL_DATABASE, TEMPLATE_DATABASE
from services.store.infrastructure.migrate import latest_version, versions
from services.store.infrastructure.servers import demand
from services.store.settings import StoreSettings
from tests import dbutil
from tests.conftest import wait_for

pytestmark = pytest.mark.integration

# Room for the default budgets (store 16, job 4, with their control pools,
# listeners and admin connections, and the operators' reserve) and little
# more: forty workspaces, each with a pool of its own, would not fit.
MAX_CONNECTIONS = 60
WORKSPACES = 40

BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""
# Transactions committed in the workspace databases, as the server counts them.
WORKSPACE_COMMITS = (
    "SELECT coalesce(sum(xact_commit), 0) FROM pg_stat_database WHERE datname LIKE 'ws\\_%%'"
)
WORKSPACE_BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname LIKE 'ws\\_%%'
"""


def _config(root: Path, models: Path, max_connections: int) -> StackConfig:
    config = own_config(root, models)
    config.pg_max_connections = max_connections
    return config


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = _config(tmp_path_factory.mktemp("crowded"), prepared_models_dir, MAX_CONNECTIONS)
    with running(Stack(config)) as stack:
        yield stack


def _admin(stack: Stack) -> psycopg.Connection:
    assert stack.postgres is not None
    return psycopg.connect(stack.postgres.url, autocommit=True)


def test_forty_workspaces_one_after_another_on_a_small_server(crowded: Stack) -> None:
    """One serial client makes forty workspaces, writes to each and reads each
    back: no call is refused, and every write becomes dense-searchable."""
    s = StoreSettings()
    bound = (
        demand("store", s.connection_budget, s.control_pool_max_size, True).total
        + demand("embedding job", s.job_connection_budget, s.control_pool_max_size, True).total
    )
    operator = Client(crowded.gateway, crowded.admin_token)
    owners: list[tuple[Client, str]] = []
    peak = 0
    with _admin(crowded) as watch:
        for i in range(WORKSPACES):
            ws = operator.create_workspace(f"many-{i}-{uuid.uuid4().hex[:6]}").workspace
            member = operator.create_member(ws.id, "ada", owner=True).member
            client = Client(crowded.gateway, operator.create_token(member.id).token)
            word = f"heron{i}z{uuid.uuid4().hex[:6]}"
            made = client.remember(f"Note {word}", f"The {word} ledger was filed on time.")
            found = client.recall(word, mode="lexical", skip_rerank=True).outcome.results
            assert [r.memory.id for r in found] == [made.memory.id]
            owners.append((client, made.memory.id))
            row = watch.execute(BACKENDS).fetchone()
            peak = max(peak, row[0] if row else 0)
        for client, memory_id in owners:
            client.wait_embedded(timeout=300)
            hits = client.recall("ledger filed on time", mode="dense", skip_rerank=True)
            assert hits.outcome.dense_available
            assert memory_id in [r.memory.id for r in hits.outcome.results]
            row = watch.execute(BACKENDS).fetchone()
            peak = max(peak, row[0] if row else 0)
    print(f"\n{WORKSPACES} workspaces: peak {peak} connections, bound {bound}")
    assert peak <= bound
    for client, _ in owners:
        client.close()
    operator.close()


def test_an_idle_workspace_costs_no_query_and_no_connection(crowded: Stack) -> None:
    operator = Client(crowded.gateway, crowded.admin_token)
    ws = operator.create_workspace(f"idle-{uuid.uuid4().hex[:8]}").workspace
    member = operator.create_member(ws.id, "ada", owner=True).member
    client = Client(crowded.gateway, operator.create_token(member.id).token)
    client.remember("An idle note", "Nothing happens here after this.")
    client.wait_embedded(timeout=300)
    with (
        _admin(crowded) as conn,
        psycopg.connect(dbutil.workspace_url(crowded, CONTROL_DATABASE), autocommit=True) as ctl,
    ):
        # Every workspace's work done: its mark cleared, its connections closed.
        wait_for(
            lambda: ctl.execute("SELECT count(*) FROM workspace_work").fetchone() == (0,),
            "every work mark to be cleared",
            120,
        )
        wait_for(
            lambda: conn.execute(WORKSPACE_BACKENDS).fetchone() == (0,),
            "the workspace connections to close",
            60,
        )
        before = conn.execute(WORKSPACE_COMMITS).fetchone()
        # Several times what the job used to wait between looks at a quiet
        # workspace (2 s): a visit would show as a commit.
        time.sleep(6.0)
        after = conn.execute(WORKSPACE_COMMITS).fetchone()
        assert conn.execute(WORKSPACE_BACKENDS).fetchone() == (0,)
    assert before == after
    client.close()
    operator.close()


def test_a_new_workspace_is_a_copy_of_the_migrated_template(crowded: Stack) -> None:
    operator = Client(crowded.gateway, crowded.admin_token)
    ws = operator.create_workspace(f"tpl-{uuid.uuid4().hex[:8]}").workspace
    recorded = sorted(versions("workspace"))
    with psycopg.connect(dbutil.workspace_url(crowded, CONTROL_DATABASE), autocommit=True) as ctl:
        row = ctl.execute("SELECT database_name FROM workspace WHERE id = %s", (ws.id,)).fetchone()
    assert row is not None
    for database in (row[0], TEMPLATE_DATABASE):
        with psycopg.connect(dbutil.workspace_url(crowded, database), autocommit=True) as conn:
            got = [r[0] for r in conn.execute("SELECT version FROM schema_migration ORDER BY 1")]
        assert got == recorded, database
    operator.close()


def test_migrate_db_brings_every_workspace_up_in_parallel_and_resumes(crowded: Stack) -> None:
    """Workspaces recorded below the current level are migrated (here: their
    databases are current, so the pass records the level and applies nothing);
    a second run finds nothing left to apply."""
    control = dbutil.workspace_url(crowded, CONTROL_DATABASE)
    with psycopg.connect(control, autocommit=True) as ctl:
        total = ctl.execute("SELECT count(*) FROM workspace").fetchone()
        ctl.execute("UPDATE workspace SET schema_version = NULL")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", "migrate-db", "--parallel", "3"],
            env={**crowded.env_for("store"), "RECALLATRON_PROGRESS": "lines"},
            capture_output=True,
            text=True,
            timeout=600,
        )

    assert total is not None
    for behind in (total[0], 0):
        done = run()
        assert done.returncode == 0, done.stderr
        level = latest_version("workspace")
        assert f"migrations done: {behind} workspaces brought to {level}" in done.stdout
        progress = f"{behind}/{behind} workspaces (100%)" if behind else "migrating: 0 workspaces"
        assert progress in done.stderr
        with psycopg.connect(control, autocommit=True) as ctl:
            below = ctl.execute(
                "SELECT count(*) FROM workspace WHERE schema_version IS DISTINCT FROM %s",
                (latest_version("workspace"),),
            ).fetchone()
        assert below == (0,)


def test_a_call_waits_for_a_workspace_s_migration_no_longer_than_its_deadline(
    crowded: Stack,
) -> None:
    """A store meeting a workspace for the first time migrates it, waiting
    for the migration lock another process (migrate-db, another replica)
    holds: inside a call, until the call's deadline and then UNAVAILABLE with
    a retry hint (it waited without end, holding the call's thread)."""
    from recallatron import deadline, errors
    from services.store.infrastructure import migrate

    operator = Client(crowded.gateway, crowded.admin_token)
    ws = operator.create_workspace(f"lock-{uuid.uuid4().hex[:8]}").workspace
    operator.close()
    with psycopg.connect(dbutil.workspace_url(crowded, CONTROL_DATABASE), autocommit=True) as ctl:
        row = ctl.execute("SELECT database_name FROM workspace WHERE id = %s", (ws.id,)).fetchone()
    assert row is not None
    outcome: list[BaseException | None] = []

    def first_use(dbs) -> None:  # type: ignore[no-untyped-def]
        leave = deadline.enter(deadline.Scope(2.0))
        try:
            dbs.ensure_migrated("", row[0])
            outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
        finally:
            leave()

    with (
        psycopg.connect(dbutil.workspace_url(crowded, row[0]), autocommit=True) as holder,
        dbutil.store_databases(crowded) as dbs,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (migrate._LOCK_KEY,))
        call = threading.Thread(target=first_use, args=(dbs,), daemon=True)
        call.start()
        call.join(timeout=120)
        alive = call.is_alive()
        holder.execute("SELECT pg_advisory_unlock(%s)", (migrate._LOCK_KEY,))
        call.join(timeout=120)
    assert not alive, "the call waited for the migration lock past its deadline"
    [raised] = outcome
    assert isinstance(raised, errors.Unavailable), raised
    assert raised.retry_after > 0
    # Free again, the same first use goes through.
    with dbutil.store_databases(crowded) as dbs:
        dbs.ensure_migrated("", row[0])


def test_a_budget_the_server_cannot_hold_stops_the_start(
    tmp_path: Path, prepared_models_dir: Path
) -> None:
    config = _config(tmp_path, prepared_models_dir, 40)
    config.services = ("store",)
    config.embedding_job = False
    config.env = {"RECALLATRON_CONNECTION_BUDGET": "30"}
    stack = Stack(config)
    with pytest.raises(RuntimeError) as failed:
        stack.start()
    message = str(failed.value)
    # Both numbers: what the processes would need and what the server allows.
    assert "max_connections 40" in message, message
    s = StoreSettings()
    asked = (
        demand("store", 30, s.control_pool_max_size, True).total
        + demand("embedding job", s.job_connection_budget, s.control_pool_max_size, True).total
    )
    allowed = 40 - 3 - s.connection_reserve  # superuser_reserved_connections is 3
    assert f"= {asked} connections" in message and f"allows {allowed}" in message, message


def test_the_embedding_jobs_budget_the_server_cannot_hold_stops_it_in_one_line(
    tmp_path: Path, prepared_models_dir: Path
) -> None:
    """The job checks the budgets at its start as the store does, and says
    both numbers in one line: it stopped with a traceback (the check ran
    outside the code that turns it into the job's message)."""
    config = _config(tmp_path, prepared_models_dir, 40)
    config.services = ()
    config.embedding_job = True
    config.env = {"RECALLATRON_JOB_CONNECTION_BUDGET": "60"}
    with running(Stack(config)) as stack:
        job = stack.processes["embedding-job"]
        assert job.wait(timeout=120) != 0
        log = (stack.state_dir / "logs" / "embedding-job.log").read_text()
    assert "embedding job cannot run:" in log and "max_connections 40" in log, log[-2000:]
    assert "Traceback" not in log, log[-2000:]
