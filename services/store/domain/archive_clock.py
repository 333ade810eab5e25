"""Times an archive holds that are later than the importing host's clock
(docs/export.md, "Times later than the clock"). The service writes most of
its times as things happen (a memory's creation, a revision, a decision), so
a correct clock never writes one in the future; but a source whose clock ran
ahead did, and its archive is still that workspace's data. The import copies
such times as the source held them, so the copy answers as the source does,
and counts the records holding one so that the operator is told."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recallatron.convert import CLOCK_SKEW
from services.store.domain import archive_format as fmt

# Times a caller gives and that may lie ahead: when a claim holds, when an
# episode is.
_GIVEN = frozenset(
    {
        ("attribute_claims", "valid_from"),
        ("attribute_claims", "valid_until"),
        ("relation_claims", "valid_from"),
        ("relation_claims", "valid_until"),
        ("episodes", "started_at"),
        ("episodes", "ended_at"),
    }
)


def times_ahead(records: dict[str, list[dict[str, Any]]], now: datetime) -> dict[str, int]:
    """Per record file, how many records hold a time the service writes as
    it happens that is later than ``now`` by more than the clock skew the
    service tolerates elsewhere (a time a caller says has passed); files
    holding none are left out."""
    limit = now + CLOCK_SKEW
    counts: dict[str, int] = {}
    for kind, rows in records.items():
        keys = [k for k in fmt.TIME_FIELDS.get(kind, ()) if (kind, k) not in _GIVEN]
        n = sum(
            any(r.get(k) is not None and fmt.time_of(r[k], f"{kind}: {k}") > limit for k in keys)
            for r in rows
        )
        if n:
            counts[kind] = n
    return counts
