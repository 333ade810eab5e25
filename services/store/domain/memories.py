"""The memory tools (design §7) as plain domain code, assembled from their
concerns: reading (memory_reads: `read`, the permission walk), writing new
memories (memory_writes: `remember`, `derive`) and changing existing ones
(memory_revisions: `correct`, `supersede`, `forget`). Every query runs inside
`caller_transaction`, so row-level security applies eligibility (design §4)
to each one; not visible answers exactly like not there."""

from __future__ import annotations

from recallatron.vocabulary import MAX_WALK
from services.store.domain.memory_reads import (
    MemoryView,
    Ref,
    RevisionView,
    Walk,
    Withheld,
    memory_view,
)
from services.store.domain.memory_revisions import ForgetResult, MemoryRevisions
from services.store.domain.memory_writes import (
    QUEUES_EMBEDDING,
    MentionIn,
    NewMemory,
    WriteResult,
)

__all__ = [
    "MAX_WALK",
    "QUEUES_EMBEDDING",
    "ForgetResult",
    "MemoryStore",
    "MemoryView",
    "MentionIn",
    "NewMemory",
    "Ref",
    "RevisionView",
    "Walk",
    "Withheld",
    "WriteResult",
    "memory_view",
]


class MemoryStore(MemoryRevisions):
    """Every memory tool on one workspace's databases."""
