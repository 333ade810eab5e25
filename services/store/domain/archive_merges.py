"""Entity merges an archive holds, checked as the service makes them
(docs/export.md, "Import"; entity_merge.EntityMerges.merge): a merge joins
two entities that no merge in force joins already, so the merges in force
never loop, and a merged entity holds at most MAX_ENTITY_GROUP entities.
Only an edited archive breaks either, and the copy would hold entities that
answer as one in a way no owner's decisions could undo one by one."""

from __future__ import annotations

from typing import Any

from recallatron import errors
from recallatron.vocabulary import MAX_ENTITY_GROUP

# A record and where it came from ("merges.jsonl line 12").
Placed = tuple[str, dict[str, Any]]


def check_merges(merges: list[Placed]) -> None:
    """Refuses, naming its line's merged_id, a merge of an entity into
    itself, one in force that closes a loop of merges in force before it in
    the file, and one that makes a merged entity larger than the service
    allows. An undone merge joins nothing: merged, undone and merged back
    the other way is what the service writes."""
    head: dict[str, str] = {}  # each entity joined so far -> its group's root
    size: dict[str, int] = {}  # root -> entities in its group

    def root(entity: str) -> str:
        path = []
        while head.get(entity, entity) != entity:
            path.append(entity)
            entity = head[entity]
        for passed in path:
            head[passed] = entity
        return entity

    for place, record in merges:
        kept, merged = record["kept_id"], record["merged_id"]
        if kept == merged:
            raise errors.InvalidArgument(
                f"{place}: merged_id", "names the kept entity: no entity is merged into itself"
            )
        if record["undone_at"] is not None:
            continue
        a, b = root(kept), root(merged)
        if a == b:
            raise errors.InvalidArgument(
                f"{place}: merged_id",
                "closes a loop: merges in force before it already join the two entities,"
                " and a merge joins only entities that do not answer as one",
            )
        joined = size.get(a, 1) + size.get(b, 1)
        if joined > MAX_ENTITY_GROUP:
            raise errors.InvalidArgument(
                f"{place}: merged_id",
                f"makes a merged entity of {joined} entities: one holds at most {MAX_ENTITY_GROUP}",
            )
        head[b] = a
        size[a] = joined
