"""Conversation history is never left under a removed member (design §10;
migration 0034): a history row for a member the workspace lists as removed
is refused by the database; a row written while the removal runs either
commits first and goes with the removal or is refused after it; and an
old-store migration whose owner is removed while it runs stops with one
line saying so, leaving nothing of theirs behind."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import threading
import traceback
from pathlib import Path
from typing import Any

import psycopg
import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.legacy_fixture import SCHEMA
from recallatron_devkit.stack import Stack
from services.store.legacy import import_run
from tests import dbutil
from tests.conftest import Team, wait_for
from tests.security.test_member_removal import (
    IMPORT_HISTORY,
    history_of,
    import_history,
    waiting_for,
)

pytestmark = pytest.mark.integration


def test_a_history_row_for_a_removed_member_is_refused(stack: Stack, team: Team) -> None:
    bob, cy = team.members["bob"], team.members["cy"]
    team.clients["ada"].remove_member(bob, "erase")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        import_history(stack, team, "bob", ["a turn written after the removal"])
    assert refused.value.diag.column_name == "owner_member_id"
    assert history_of(stack, team, bob) == []
    # A current member's history is written as before.
    import_history(stack, team, "cy", ["a turn of a current member"])
    assert [r[3] for r in history_of(stack, team, cy)] == ["a turn of a current member"]


def test_history_written_while_its_member_is_removed_goes_with_the_removal(
    stack: Stack, operator: Client, team: Team
) -> None:
    """The history batch is inserted, not yet committed, when the removal
    reaches the workspace: the removal waits for it and erases it too."""
    bob = team.members["bob"]
    outcome: list[Any] = []
    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url) as writer, psycopg.connect(url, autocommit=True) as watch:
        writer.execute(IMPORT_HISTORY, (bob, ["a turn written while bob leaves"]))
        removal = threading.Thread(
            target=lambda: outcome.append(operator.remove_member(bob, "erase"))
        )
        removal.start()
        wait_for(
            lambda: waiting_for(watch, writer) == 1 or not removal.is_alive(),
            "the removal waiting for the history being written, or done",
            60,
        )
        writer.commit()
        removal.join(timeout=120)
    assert not removal.is_alive() and len(outcome) == 1
    assert history_of(stack, team, bob) == [], "history written during the removal stayed"


def old_store(
    directory: Path, turns: int, items: int = 1, scope: str | None = None
) -> tuple[Path, Path]:
    """An old store of ``turns`` turns and ``items`` confirmed memory items of
    ``scope`` (None: private to the owner)."""
    path = directory / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.executemany(
        "INSERT INTO turns (id, chat_id, role, text, ts) VALUES (?, 'cli-main', 'user', ?, ?)",
        [(i, f"turn {i} about the office", f"2026-01-01T09:{i:02}:00Z") for i in range(turns)],
    )
    conn.executemany(
        "INSERT INTO memory_items (id, kind, title, body, confidence, status, scope,"
        " source_chat_id, created_at, updated_at, confirmed_at)"
        " VALUES (?, 'fact', ?, 'body', 0.9, 'confirmed', ?, NULL,"
        " '2026-01-01T00:00:00Z', NULL, NULL)",
        [(i, f"The office is in Lisbon ({i})", scope) for i in range(1, items + 1)],
    )
    conn.commit()
    conn.close()
    graph = directory / "graph.jsonl"
    graph.write_text("")
    return path, graph


def run_cli(stack: Stack, argv: list[str]) -> tuple[int, str, str]:
    """The command in this process, as a shell would see it: what it printed
    and its exit code, or an escaped exception's traceback and exit code 1."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ["RECALLATRON_DATABASE_URL"] = stack.database_url
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def migrate_removing_owner(
    stack: Stack,
    operator: Client,
    team: Team,
    dee: str,
    store: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    removed_after: int,
) -> None:
    """Migrates ``store`` in one-row batches for the owner ``dee`` (their
    member id), removed (erase) once ``removed_after`` batches have
    committed; the command must stop at its next batch and say why."""
    batch_done = import_run.ImportRun._batch_done
    removed: list[Any] = []

    def remove_meanwhile(run: import_run.ImportRun, source: str, rows: int, imported: int) -> None:
        batch_done(run, source, rows, imported)
        if run.report.batches == removed_after and not removed:
            removed.append(operator.remove_member(dee, "erase"))

    monkeypatch.setattr(import_run.ImportRun, "_batch_done", remove_meanwhile)
    sqlite, graph = store
    argv = ["migrate", "--sqlite", str(sqlite), "--graph", str(graph), "--workspace", team.slug]
    code, out, err = run_cli(
        stack, [*argv, "--owner", "dee", "--batch-size", "1", "--json", "--no-floor-check"]
    )
    assert removed, err
    assert "Traceback" not in err, err
    assert code == 2, (out, err)
    assert "error: --owner: dee was removed" in err, err


@pytest.mark.parametrize("removed_after", [1, 3], ids=["among_turns", "before_memories"])
def test_a_migration_whose_owner_is_removed_meanwhile_stops_and_says_so(
    stack: Stack,
    operator: Client,
    team: Team,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    removed_after: int,
) -> None:
    """The owner is removed once the run has committed ``removed_after`` of
    its three one-turn batches: its next batch (a turn, or the memory item)
    is refused by the database, and the command says why."""
    dee = operator.create_member(team.workspace_id, "dee", owner=True).member.id
    sqlite, graph = old_store(tmp_path, turns=3)
    migrate_removing_owner(stack, operator, team, dee, (sqlite, graph), monkeypatch, removed_after)
    assert history_of(stack, team, dee) == [], "history was left under the removed owner"
    left = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM memory WHERE audience_member_id = %s AND invalidated_at IS NULL",
        (dee,),
    )
    assert left == [(0,)]
    # The removal erased what the run had committed before it.
    events = team.clients["ada"].audit_events(actions=["remove_member"]).events
    details = [json.loads(e.detail_json) for e in events]
    erased = [d["history_erased"] for d in details if d["removed_member_id"] == dee]
    assert erased == [removed_after]
