"""Tombstones in a workspace archive without a database (docs/export.md): a
forgotten memory travels without its text, and its old mentions stay behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from tests.unit.archive_records import ADA, BOB, T, memory, uid, write_archive

GONE = {"title": "", "body": "", "forgotten_at": T, "forgotten_by": ADA}


@pytest.mark.parametrize(
    ("records", "field"),
    [
        ({"memories": [memory(1, **{**GONE, "title": "back"})]}, "memories.jsonl line 1: title"),
        ({"memories": [memory(1, **{**GONE, "body": "back"})]}, "memories.jsonl line 1: body"),
        (
            {
                "memories": [memory(1, **GONE)],
                "revisions": [
                    {"memory_id": uid(1), "revision": 1, "action": "create",
                     "changed_by": ADA, "reason": "", "changed_at": T},
                    {"memory_id": uid(1), "revision": 2, "action": "forget",
                     "changed_by": ADA, "reason": "it said the code was 4711", "changed_at": T},
                ],
            },
            "revisions.jsonl line 2: reason",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
                "attribute_claims": [
                    {"id": uid(20), "memory_id": uid(1), "entity_id": uid(10),
                     "attribute": "code", "value": "4711", "valid_from": None,
                     "valid_until": None, "confidence": 1.0, "stated_at": T, "retired_at": None},
                ],
            },
            "attribute_claims.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
                "aliases": [
                    {"id": uid(21), "memory_id": uid(1), "entity_id": uid(10),
                     "alias": "the code 4711", "stated_at": T, "retired_at": None},
                ],
            },
            "aliases.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [
                    {"id": uid(10), "name": "Heron", "type": None, "created_at": T},
                    {"id": uid(11), "name": "Egret", "type": None, "created_at": T},
                ],
                "relation_claims": [
                    {"id": uid(22), "memory_id": uid(1), "subject_id": uid(10),
                     "predicate": "owes", "object_id": uid(11), "valid_from": None,
                     "valid_until": None, "confidence": 1.0, "stated_at": T, "retired_at": None},
                ],
            },
            "relation_claims.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "vectors": [
                    {"memory_id": uid(1), "model_id": "m", "input_version": "v",
                     "created_at": T, "vector": "A" * 2048},
                ],
            },
            "vectors.jsonl line 1: memory_id",
        ),
    ],
)  # fmt: skip
def test_a_tombstone_given_text_is_refused_naming_the_record_and_field(
    tmp_path: Path, records: dict[str, list[dict[str, Any]]], field: str
) -> None:
    """A forgotten memory travels without its text (docs/export.md): an
    archive that gives one a title, a body, a reason, a claim or a vector was
    changed by hand, and is refused before anything is made."""
    write_archive(tmp_path / "a", records)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == field
    assert "forgotten" in err.value.description


def test_a_tombstone_as_exported_is_read_and_its_old_mentions_stay_behind(tmp_path: Path) -> None:
    """A memory forgotten before forget purged the graph may still hold a
    mention in its source: it comes as a tombstone, the mention does not."""
    records = {
        "memories": [memory(1, **GONE), memory(2)],
        "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
        "mentions": [{"memory_id": uid(1), "entity_id": uid(10)}],
        "revisions": [
            {"memory_id": uid(1), "revision": 2, "action": "forget",
             "changed_by": ADA, "reason": "", "changed_at": T},
        ],
    }  # fmt: skip
    write_archive(tmp_path / "a", records)
    chosen = plan.select(plan.read_archive(tmp_path / "a"), {ADA, BOB})
    tomb = next(m for m in chosen.records["memories"] if m["id"] == uid(1))
    assert tomb["title"] == "" and tomb["body"] == ""
    assert chosen.records["mentions"] == [] and chosen.records["entities"] == []
