"""From old-store records to the rows the importer writes, as pure functions:
deterministic ids (ids), turns and curated items -> history rows and memories
(plan_items), and the old graph -> entities and, for each entity record of
graph.jsonl, the memory that states its graph claims (plan_graph)."""

from __future__ import annotations

from services.store.legacy.batching import MAX_BATCH_BYTES
from services.store.legacy.ids import LEGACY_NAMESPACE, Ids
from services.store.legacy.plan_graph import (
    ATTRIBUTE_PREFIX,
    BODY_VALUE_CHARS,
    PREDICATE_PREFIX,
    RECORD_KIND,
    RELATIONS_KEY,
    SUPERSEDE_REASON,
    TYPE_PREFIX,
    AttributeRow,
    EntityRow,
    RecordRow,
    RelationRow,
    Supersession,
    claim_entity,
    claim_value,
    entity_rows,
    identifier_from,
    item_mention_times,
    plan_record,
    plan_records,
    property_counts,
    record_time,
)
from services.store.legacy.plan_items import (
    DERIVED_TITLE_CHARS,
    IMPORTED_STATUS,
    KIND_MAP,
    MAX_CHAT_ID_CHARS,
    MAX_HISTORY_TURN_CHARS,
    MAX_ROLE_CHARS,
    SHARED_SCOPES,
    HistoryRow,
    MemoryRow,
    MentionPlan,
    plan_item,
    plan_turn,
)

__all__ = [
    "ATTRIBUTE_PREFIX",
    "BODY_VALUE_CHARS",
    "DEFAULT_BATCH_SIZE",
    "DERIVED_TITLE_CHARS",
    "IMPORTED_STATUS",
    "KIND_MAP",
    "LEGACY_NAMESPACE",
    "MAX_BATCH_BYTES",
    "MAX_CHAT_ID_CHARS",
    "MAX_HISTORY_TURN_CHARS",
    "MAX_ROLE_CHARS",
    "PREDICATE_PREFIX",
    "RECORD_KIND",
    "RELATIONS_KEY",
    "SHARED_SCOPES",
    "SUPERSEDE_REASON",
    "TYPE_PREFIX",
    "AttributeRow",
    "EntityRow",
    "HistoryRow",
    "Ids",
    "MemoryRow",
    "MentionPlan",
    "RecordRow",
    "RelationRow",
    "Supersession",
    "claim_entity",
    "claim_value",
    "entity_rows",
    "identifier_from",
    "item_mention_times",
    "plan_item",
    "plan_record",
    "plan_records",
    "plan_turn",
    "property_counts",
    "record_time",
]

# Rows per transaction: big enough to be quick, small enough that an
# interruption loses little work.
DEFAULT_BATCH_SIZE = 500
