"""What an archive's claims must meet beyond their references (docs/export.md):
every entity a claim, a relation or an alias names is mentioned by the
memory that states it, as every write makes it, since an entity is visible
only through a mention. An archive without such a mention (edited, or
exported from a workspace written before every write made them) gets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from tests.unit.archive_records import T, memory, uid, write_archive

ENTITIES = [
    {"id": uid(10), "name": "Heron", "type": None, "created_at": T},
    {"id": uid(11), "name": "Egret", "type": None, "created_at": T},
]
CLAIM = {
    "id": uid(20), "memory_id": uid(1), "entity_id": uid(10), "attribute": "city",
    "value": "Lisbon", "valid_from": None, "valid_until": None, "confidence": 1.0,
    "stated_at": T, "retired_at": None,
}  # fmt: skip
ALIAS = {
    "id": uid(21), "memory_id": uid(1), "entity_id": uid(10), "alias": "the heron",
    "stated_at": T, "retired_at": None,
}  # fmt: skip
RELATION = {
    "id": uid(22), "memory_id": uid(1), "subject_id": uid(10), "predicate": "leads",
    "object_id": uid(11), "valid_from": None, "valid_until": None, "confidence": 1.0,
    "stated_at": T, "retired_at": None,
}  # fmt: skip


def mentions(*pairs: tuple[int, int]) -> list[dict[str, str]]:
    return [{"memory_id": uid(m), "entity_id": uid(e)} for m, e in pairs]


# Memory 2 mentions both entities: an entity visible to someone, though not
# through the memory that states the claim about it.
BOTH = [(1, 10), (1, 11), (2, 10), (2, 11)]


@pytest.mark.parametrize(
    ("kind", "record", "said", "field"),
    [
        ("attribute_claims", CLAIM, [(1, 11), (2, 10)], "entity_id"),
        ("aliases", ALIAS, [(1, 11), (2, 10)], "entity_id"),
        ("relation_claims", RELATION, [(1, 11), (2, 10)], "subject_id"),
        ("relation_claims", RELATION, [(1, 10), (2, 11)], "object_id"),
    ],
)  # fmt: skip
def test_a_claim_about_an_entity_its_memory_does_not_mention_gets_that_mention(
    tmp_path: Path, kind: str, record: dict[str, Any], said: list[tuple[int, int]], field: str
) -> None:
    """Neighbors answered INTERNAL in a copy holding a relation whose end its
    stating memory did not mention: the walk could not place that end. The
    archive now gets the mention every write makes, and no other."""
    records = {
        "memories": [memory(1), memory(2)],
        "entities": ENTITIES,
        "mentions": mentions(*said),
        kind: [record],
    }
    write_archive(tmp_path / "a", records)
    archive = plan.read_archive(tmp_path / "a")
    added = [
        (place, r)
        for place, r in archive.records["mentions"]
        if (r["memory_id"], r["entity_id"]) not in {(uid(m), uid(e)) for m, e in said}
    ]
    assert [r for _, r in added] == [{"memory_id": uid(1), "entity_id": record[field]}]
    assert added[0][0] == f"{kind}.jsonl line 1: {field}"
    assert archive.count(kind) == 1

    # As a write makes them, with each named entity mentioned: nothing added.
    write_archive(tmp_path / "b", {**records, "mentions": mentions(*BOTH)})
    assert plan.read_archive(tmp_path / "b").count("mentions") == len(BOTH)


def test_a_mention_added_for_a_corrections_claim_counts_from_its_first_statement(
    tmp_path: Path,
) -> None:
    """A correction's claims name an entity in an older memory: the mention a
    write makes then counts from the correction (workspace migration 0046),
    and so does the one an import adds; a claim stated with its memory adds
    a mention as old as the memory."""
    later, latest = "2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00Z"
    records = {
        "memories": [memory(1), memory(2)],
        "entities": ENTITIES,
        "attribute_claims": [
            {**CLAIM, "stated_at": latest},
            {**CLAIM, "id": uid(23), "stated_at": later, "retired_at": latest},
            {**CLAIM, "id": uid(24), "memory_id": uid(2), "entity_id": uid(11)},
        ],
    }
    write_archive(tmp_path / "a", records)
    added = [r for _, r in plan.read_archive(tmp_path / "a").records["mentions"]]
    assert added == [
        {"memory_id": uid(1), "entity_id": uid(10), "mentioned_at": later},
        {"memory_id": uid(2), "entity_id": uid(11)},
    ]


@pytest.mark.parametrize(
    ("kind", "record"),
    [("aliases", ALIAS), ("attribute_claims", CLAIM), ("relation_claims", RELATION)],
)
def test_a_statement_retired_before_it_was_stated_is_read_as_it_stands(
    tmp_path: Path, kind: str, record: dict[str, Any]
) -> None:
    """An alias's, a claim's or a relation's retired_at before its stated_at
    (a clock stepped back between the two writes) is read as the source held
    it; a claim whose valid time ends before it begins is still refused."""
    earlier = "2026-01-02T03:04:05.123455+00:00"  # a microsecond before T
    base = {"memories": [memory(1)], "entities": ENTITIES, "mentions": mentions(*BOTH[:2])}
    retired = [record, {**record, "id": uid(30), "retired_at": earlier}]
    write_archive(tmp_path / "a", {**base, kind: retired})
    read = [r for _, r in plan.read_archive(tmp_path / "a").records[kind]]
    assert [r["retired_at"] for r in read] == [record.get("retired_at"), earlier]
    if "valid_from" not in record:
        return
    backwards = {**record, "id": uid(31), "valid_from": T, "valid_until": earlier}
    write_archive(tmp_path / "b", {**base, kind: [backwards]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "b")
    assert err.value.field == f"{kind}.jsonl line 1: valid_until"
