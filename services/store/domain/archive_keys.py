"""Records an archive holds once each, as their tables' keys keep them
(docs/export.md, "The schema"): those with no id of their own (a revision,
a link, a mention) and the pairs of entities kept apart or memories
dismissed, each of two, its lower id first. The database would refuse the
others only once the import had begun making the workspace, naming its
table, not the archive's line. Ids are compared in their canonical form
(archive_format.canonical_ids)."""

from __future__ import annotations

from typing import Any

from recallatron import errors
from services.store.domain.archive_reading import add_once

# A record and where it came from ("memories.jsonl line 12").
Placed = tuple[str, dict[str, Any]]


def check_keys(records: dict[str, list[Placed]]) -> None:
    """Refuses, naming its line and field, a record repeating another's key,
    and a pair out of order or of one."""
    _check_revisions(records)
    _check_once(records)
    _check_pairs(records)


# Records with no id of their own, each once by its table's key: the key's
# fields, the last named when one is repeated.
_KEYS = (
    ("links", ("memory_id", "kind", "target_id"), "the link is in the archive already"),
    (
        "mentions",
        ("memory_id", "entity_id"),
        "the memory's mention of it is in the archive already",
    ),
)


def _check_once(records: dict[str, list[Placed]]) -> None:
    for kind, keys, repeated in _KEYS:
        seen: set[tuple[str, ...]] = set()
        for place, record in records.get(kind, []):
            add_once(seen, tuple(record[k] for k in keys), f"{place}: {keys[-1]}", repeated)


def _check_revisions(records: dict[str, list[Placed]]) -> None:
    """Each change recorded once, as every write records it: memory_revision
    has no key of its own, so a line given twice would show its change twice
    in the copy's history (a forget shares its revision with the change
    before it, under another action)."""
    seen: set[tuple[str, int, str]] = set()
    for place, record in records.get("revisions", []):
        add_once(
            seen,
            (record["memory_id"], record["revision"], record["action"]),
            f"{place}: revision",
            f"the memory's {record['action']} of revision {record['revision']} "
            "is in the archive already",
        )


# What each file of pairs pairs: entities kept apart, memories dismissed as
# duplicates of each other.
_PAIRS = (
    ("pairs_apart", "entity", "kept apart from"),
    ("dismissed_pairs", "memory", "dismissed as a duplicate of"),
)


def _check_pairs(records: dict[str, list[Placed]]) -> None:
    """Each pair written as the service keeps it (the tables' check and key):
    its lower id first (ids compare as Postgres compares UUIDs once in lower
    case), of two, once."""
    for kind, what, pairing in _PAIRS:
        seen: set[tuple[str, str]] = set()
        for place, record in records.get(kind, []):
            first, second = record["first_id"], record["second_id"]
            if first == second:
                raise errors.InvalidArgument(
                    f"{place}: second_id", f"is first_id: no {what} is {pairing} itself"
                )
            if first > second:
                raise errors.InvalidArgument(
                    f"{place}: first_id",
                    "is after second_id: a pair is written with its lower id first",
                )
            add_once(
                seen, (first, second), f"{place}: second_id", "the pair is in the archive already"
            )
