"""What a correct migration of the generated old store produces, worked out
by the generator (`legacy_fixture`) from its own bookkeeping while it writes,
so that tests compare the importer against an answer that did not come from
reading the files."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Truth:
    """What a correct migration of the generated store produces."""

    seed: int
    turns: int = 0
    turns_empty: int = 0
    history_entries: int = 0
    chats: int = 0
    sessions: int = 0
    session_digests: int = 0
    memory_items: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    memories: int = 0
    memories_shared: int = 0
    memories_titled_from_body: int = 0
    kinds_mapped: dict[str, int] = field(default_factory=dict)
    entity_records: int = 0
    entities: int = 0
    entities_restated: int = 0
    entities_superseded: int = 0
    confirm_patches: int = 0
    supersede_patches: int = 0
    orphan_patches: int = 0
    malformed_lines: int = 0
    entity_edges: int = 0
    edges: int = 0
    # For confirmed items only:
    mentions: int = 0
    mentions_redirected: int = 0
    mentions_unknown_entity: int = 0
    mentions_same_after_supersession: int = 0
    entities_created: int = 0
    # keyword -> (turn id, text)
    needles: dict[str, tuple[int, str]] = field(default_factory=dict)
    # old entity id -> the id that stands for it after folding
    final_entity: dict[str, str] = field(default_factory=dict)
    entity_names: dict[str, str] = field(default_factory=dict)
    # confirmed item id -> the final entity ids it mentions
    item_mentions: dict[int, list[str]] = field(default_factory=dict)
    # The graph claims: every folded entity record becomes a memory stating
    # its properties (but relations) as attribute claims and its edges as
    # relation claims about the final entities; a superseded record's memory
    # is superseded by its replacement's and its claims are retired.
    record_memories: int = 0
    record_mentions: int = 0
    attribute_claims: int = 0
    attribute_claims_retired: int = 0
    attribute_claims_skipped: dict[str, int] = field(default_factory=dict)
    relation_claims: int = 0
    relation_claims_retired: int = 0
    supersessions: int = 0
    entities_typed: int = 0
    # The record carrying VARIED_PROPERTIES.
    varied_entity: str = ""
    # old entity id -> its confidence after the confirm patches
    entity_confidence: dict[str, float] = field(default_factory=dict)
    entity_types: dict[str, str] = field(default_factory=dict)
    # old entity id -> [(attribute, value)] its record states (current unless
    # the record was superseded)
    entity_attributes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # (stating record, final subject, predicate, final object)
    relations: list[tuple[str, str, str, str]] = field(default_factory=list)
    # superseded old id -> its direct replacement, and the time of the patch
    superseded_by: dict[str, str] = field(default_factory=dict)
    superseded_at: dict[str, str] = field(default_factory=dict)
    # old entity id -> its record's valid_from, which stands for when it was written
    record_valid_from: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
