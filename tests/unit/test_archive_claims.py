"""What an archive's claims must meet beyond their references (docs/export.md):
every entity a claim, a relation or an alias names is mentioned by the
memory that states it, as every write makes it, since an entity is visible
only through a mention. An archive edited to break that is refused, naming
the record and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from tests.unit.test_archive import T, memory, uid, write_archive

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
def test_a_claim_about_an_entity_its_memory_does_not_mention_is_refused(
    tmp_path: Path, kind: str, record: dict[str, Any], said: list[tuple[int, int]], field: str
) -> None:
    """Neighbors answered INTERNAL in a copy holding a relation whose end its
    stating memory did not mention: the walk could not place that end."""
    records = {
        "memories": [memory(1), memory(2)],
        "entities": ENTITIES,
        "mentions": mentions(*said),
        kind: [record],
    }
    write_archive(tmp_path / "a", records)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == f"{kind}.jsonl line 1: {field}"
    assert "does not mention" in err.value.description

    # As a write makes them, with each named entity mentioned: read.
    write_archive(tmp_path / "b", {**records, "mentions": mentions(*BOTH)})
    assert plan.read_archive(tmp_path / "b").count(kind) == 1
