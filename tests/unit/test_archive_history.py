"""The archive's history records (docs/export.md): an import takes no turn
the legacy migration would have skipped (docs/migration.md, "Turns ->
history"); a chat id or role past the limits is read shortened, as an export
writes it (tests/unit/test_archive.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from services.store.legacy import plan_items
from tests.unit.archive_records import ADA, T, uid, write_archive


def turn(n: int, **more: Any) -> dict[str, Any]:
    return {"id": uid(n), "owner_member": ADA, "chat_id": "tg-1004", "role": "user",
            "text": "the deploy is Friday", "occurred_at": T, **more}  # fmt: skip


def test_a_turn_at_the_migrations_limits_is_taken(tmp_path: Path) -> None:
    edge = turn(2, chat_id="c" * plan_items.MAX_CHAT_ID_CHARS, role="r" * plan_items.MAX_ROLE_CHARS)
    write_archive(tmp_path / "a", {"history": [turn(1), edge]})
    assert plan.read_archive(tmp_path / "a").count("history") == 2


@pytest.mark.parametrize(
    "text",
    ["t" * (plan_items.MAX_HISTORY_TURN_CHARS + 1), "the deploy\x00 is Friday"],
    ids=["over-the-migrations-length", "nul"],
)
def test_a_turns_text_the_migration_skips_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    """The migration skips a turn over 200,000 characters (its search vector
    could pass Postgres's size limit) or holding NUL (no text Postgres
    stores): an import took either, to fail at the database or not at all."""
    write_archive(tmp_path / "a", {"history": [turn(1), turn(2, text=text)]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "history.jsonl line 2: text"
