"""`recallatron migrate` killed (SIGKILL: no handler runs, nothing is
undone) at a chosen step, then run again: the rerun ends exactly where one
clean run ends, every row once (docs/migration.md, "Safe to rerun, safe to
interrupt"). The migration fills a workspace that exists and is served
already, so there is no workspace of its own to hold back: what a killed run
committed is whole batches, and the rerun writes the rest. The command runs
in a child process held at its step by a hook of its own, so the kill lands
there."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recallatron.client import Client
from recallatron_devkit.legacy_fixture import generate
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import WAIT_SECONDS, Team, make_team, wait_for
from tests.legacy.test_migration import OldStore, data_dump, env, migrate, migrate_args

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# Small batches: each source takes several, so a step after the first batch
# of one is midway through it.
BATCH = ("--batch-size", "40", "--no-floor-check")

# The command as a shell runs it, held for good at one step: after the first
# committed batch of a source ("turn", "entity_record", "memory_item"); inside
# the second batch of entity records, its rows written and not committed
# ("in_flight"); or once every batch is committed, before the run's last steps
# (statistics, waking the embedding job, the report: "written"). The marker
# file says it got there.
CHILD = """
import sys, time
from pathlib import Path
from recallatron_cli.main import main
from services.store.legacy.import_run import ImportRun

moment, marker, *argv = sys.argv[1:]

def held():
    Path(marker).write_text(moment)
    while True:
        time.sleep(1)

if moment == "written":
    whole = ImportRun.graph_and_items
    def written(self, *args):
        whole(self, *args)
        held()
    ImportRun.graph_and_items = written
elif moment == "in_flight":
    ledger = ImportRun._ledger
    records = []
    def in_flight(self, conn, source, rows):
        ledger(self, conn, source, rows)
        if source == "entity_record":
            records.append(len(rows))
            if len(records) == 2:
                held()
    ImportRun._ledger = in_flight
else:
    done = ImportRun._batch_done
    def first(self, source, rows, imported):
        done(self, source, rows, imported)
        if source == moment:
            held()
    ImportRun._batch_done = first

sys.exit(main(argv))
"""


@pytest.fixture(scope="module")
def old_store(tmp_path_factory: pytest.TempPathFactory) -> OldStore:
    out = tmp_path_factory.mktemp("old-store")
    truth = generate(out, seed=7)
    return OldStore(out / "old-store.sqlite", out / "graph.jsonl", truth)


@pytest.fixture(scope="module")
def clean(stack: Stack, operator: Client, old_store: OldStore) -> Iterator[Team]:
    """One run that was never stopped, to compare with."""
    team = make_team(stack, operator, ("ada",))
    assert migrate(stack, old_store, team, *BATCH)["complete"]
    yield team
    for client in team.clients.values():
        client.close()


def ledger_counts(stack: Stack, team: Team) -> dict[str, int]:
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT source, count(*) FROM legacy_import GROUP BY source",
    )
    return {str(source): int(n) for source, n in rows}


def kill_at(stack: Stack, old: OldStore, team: Team, moment: str, tmp: Path) -> None:
    """Starts the command, waits until it is held at ``moment``, kills it."""
    marker = tmp / "held"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, moment, str(marker), *migrate_args(old, team, *BATCH)],
        env={**env(stack), "RECALLATRON_PROGRESS": "off"},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: child.poll() is not None or marker.exists(), f"the run held at {moment}")
        assert child.poll() is None, child.communicate()[1].decode()
        child.send_signal(signal.SIGKILL)
        assert child.wait(WAIT_SECONDS) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stderr is not None:
            child.stderr.close()


@pytest.mark.parametrize("moment", ["turn", "entity_record", "in_flight", "memory_item", "written"])
def test_a_killed_migration_run_again_ends_as_one_clean_run(
    stack: Stack, operator: Client, old_store: OldStore, clean: Team, tmp_path: Path, moment: str
) -> None:
    team = make_team(stack, operator, ("ada",))
    whole = ledger_counts(stack, clean)
    kill_at(stack, old_store, team, moment, tmp_path)

    # The kill left whole batches: part of the import, or all of its rows.
    left = ledger_counts(stack, team)
    if moment == "written":
        assert left == whole
    else:
        assert 0 < sum(left.values()) < sum(whole.values()), left
        if moment == "in_flight":
            # One committed batch of records, not the one the kill cut short.
            assert left["entity_record"] == 40, left

    again = migrate(stack, old_store, team, *BATCH)
    assert again["complete"], again
    t = old_store.truth
    for section, total in (
        ("turns", t.history_entries),
        ("memory_items", t.memories),
        ("entity_records", t.record_memories),
        ("supersessions", t.supersessions),
    ):
        done = again[section]["imported"] + again[section]["already_present"]
        assert done == total, (section, again[section])
    assert ledger_counts(stack, team) == whole
    assert data_dump(stack, team) == data_dump(stack, clean)
    for client in team.clients.values():
        client.close()
