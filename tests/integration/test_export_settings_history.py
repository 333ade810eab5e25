"""Export and import carry a workspace's settings and its migrated history
(docs/export.md): a copy made from an archive keeps every setting the owner
changed, and its owner's history search answers as the original's."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from recallatron.client import Client
from recallatron.vocabulary import MAX_HISTORY_CHAT_ID, MAX_HISTORY_ROLE, MAX_HISTORY_TEXT
from recallatron_devkit.stack import Stack
from services.store.domain.archive_history import history_name
from services.store.infrastructure.db import CONTROL_DATABASE
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.test_export_import import made_database

pytestmark = pytest.mark.integration


def test_settings_and_history_come_over_as_they_were(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    ada = team.clients["ada"]
    ada.update_settings(
        default_recall_mode="lexical",
        dense_floor=0.45,
        rerank_depth=7,
        expiry_days=30,
        members_may_edit=True,
    )
    ada.remember("Kayak trip", "The kayak trip is in June.", audience_to="workspace")
    ada_id, bob_id = team.members["ada"], team.members["bob"]
    rows = [
        (ada_id, "c1", "user", "we booked the kayak for the lake", "2024-05-01T10:00:00Z"),
        (ada_id, "c1", "assistant", "the kayak rental is paid", "2024-05-01T10:01:00Z"),
        (bob_id, "c2", "user", "bob's kayak secret", "2024-05-02T10:00:00Z"),
    ]
    for owner, chat, role, text, at in rows:
        dbutil.query(
            stack,
            team.database_name,
            "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (str(uuid.uuid4()), owner, chat, role, text, at),
        )
    out = tmp_path / "a"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    new_ids = {m["handle"]: m["id"] for m in made["members"]}
    settings = "SELECT settings FROM workspace WHERE id = %s"
    assert dbutil.query(stack, CONTROL_DATABASE, settings, (made["workspace_id"],)) == (
        dbutil.query(stack, CONTROL_DATABASE, settings, (team.workspace_id,))
    )
    copy = Client(stack.gateway, operator.create_token(new_ids["ada"], "t").token)
    try:
        for query in ("kayak", "kayak rental"):
            a = ada.recall(query, include_history=True)
            b = copy.recall(query, include_history=True)
            assert [(h.text, h.role, h.chat_id) for h in a.outcome.history] == [
                (h.text, h.role, h.chat_id) for h in b.outcome.history
            ], query
            assert len(a.outcome.history) == 2, a.outcome.history_unavailable_reason
    finally:
        copy.close()
    database = made_database(stack, made["workspace_id"])
    assert dbutil.query(stack, database, "SELECT count(*) FROM history_entry") == [(3,)]


def test_history_an_older_release_kept_with_a_long_chat_id_or_role_round_trips(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    """A workspace migrated before chat ids (256) and roles (64) had a limit
    may hold longer ones: its export was refused by its own import
    (`history.jsonl line 1: chat_id: at most 256 characters`). Now the
    archive holds each within the limit, shortened to a prefix and a digest
    of the whole (two chats stay two), and the copy's history holds that."""
    ada_id = team.members["ada"]
    chats = ["c" * 300 + "-one", "c" * 300 + "-two", "short"]
    long_role = "r" * 80
    for i, chat in enumerate(chats):
        dbutil.query(
            stack,
            team.database_name,
            "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (str(uuid.uuid4()), ada_id, chat, long_role, f"heron turn {i}", f"2024-05-0{i + 1}"),
        )
    out = tmp_path / "a"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    held = [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]
    expected = [history_name(c, MAX_HISTORY_CHAT_ID) for c in chats]
    assert [h["chat_id"] for h in held] == expected
    assert {h["role"] for h in held} == {history_name(long_role, MAX_HISTORY_ROLE)}
    assert len(set(expected)) == 3 and expected[2] == "short"
    assert all(len(c) <= MAX_HISTORY_CHAT_ID for c in expected)
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    database = made_database(stack, json.loads(done.stdout)["workspace_id"])
    kept = dbutil.query(
        stack, database, "SELECT chat_id, role FROM history_entry ORDER BY occurred_at"
    )
    assert kept == [(c, history_name(long_role, MAX_HISTORY_ROLE)) for c in expected]


def test_a_turn_whose_line_is_over_a_mebibyte_round_trips(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A turn of 200,000 control characters (a terminal's output pasted whole)
    is one the migration keeps; the export writes each as \\u001b, a line of
    1.2 MB, which the import refused (`is longer than 1 MiB`)."""
    text = ("\x1b\x01\x02\x03\x0e\x0f" * 40_000)[:MAX_HISTORY_TEXT]
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
        " VALUES (%s, %s, 'c', 'tool', %s, '2024-05-01') RETURNING id",
        (str(uuid.uuid4()), team.members["ada"], text),
    )
    out = tmp_path / "a"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert max(len(x) for x in (out / "history.jsonl").read_bytes().splitlines()) > 2**20
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    database = made_database(stack, json.loads(done.stdout)["workspace_id"])
    assert dbutil.query(stack, database, "SELECT text FROM history_entry") == [(text,)]
