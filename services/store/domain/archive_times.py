"""An archive's times (docs/export.md): each one that exists, and those later
than the importing host's clock ("Times later than the clock"). The pattern
of the schema (archive_format) admits times no calendar has, which Postgres
would refuse once the import had begun writing. The service writes most of
its times as things happen (a memory's creation, a revision, a decision), so
a correct clock never writes one in the future; but a source whose clock ran
ahead did, and its archive is still that workspace's data. The import copies
such times as the source held them, so the copy answers as the source does,
and counts the records holding one so that the operator is told."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from recallatron import errors
from recallatron.convert import CLOCK_SKEW

# A time's offset from UTC: Postgres keeps at most 15:59 in a timestamptz,
# where the schema's pattern admits 99:99.
_OFFSET = re.compile(r"[+-](\d{2})(?::(\d{2}))?$")

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


def time_of(value: str, where: str) -> datetime:
    """A time the schema's pattern admits, or InvalidArgument naming ``where``
    when there is no such time (30 February, a 25th hour, an offset from UTC
    past 15:59)."""
    offset = _OFFSET.search(value)
    if offset and (int(offset[1]) > 15 or int(offset[2] or 0) > 59):
        raise errors.InvalidArgument(
            where, "is no time: an offset from UTC is at most 15:59 (Postgres')"
        )
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise errors.InvalidArgument(where, f"is no time: {exc}") from None


def times_ahead(
    records: dict[str, list[dict[str, Any]]],
    now: datetime,
    time_fields: dict[str, tuple[str, ...]],
) -> dict[str, int]:
    """Per record file, how many records hold a time (of ``time_fields``, by
    file) the service writes as it happens that is later than ``now`` by more
    than the clock skew the service tolerates elsewhere (a time a caller says
    has passed); files holding none are left out."""
    limit = now + CLOCK_SKEW
    counts: dict[str, int] = {}
    for kind, rows in records.items():
        keys = [k for k in time_fields.get(kind, ()) if (kind, k) not in _GIVEN]
        n = sum(
            any(r.get(k) is not None and time_of(r[k], f"{kind}: {k}") > limit for k in keys)
            for r in rows
        )
        if n:
            counts[kind] = n
    return counts
