"""Translations between protobuf well-known types and the plain Python values
the domain code uses. The enums' names are in recallatron.vocabulary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import errors


def timestamp(value: datetime | None) -> Timestamp:
    ts = Timestamp()
    if value is not None:
        ts.FromDatetime(value)
    return ts


def when(ts: Timestamp, present: bool) -> datetime | None:
    """The time a Timestamp field holds, or None when the field is unset."""
    if not present:
        return None
    return ts.ToDatetime(tzinfo=UTC)


# Clock skew tolerated on a time the caller says has passed.
CLOCK_SKEW = timedelta(minutes=5)


def not_future(value: datetime | None, field: str) -> datetime | None:
    """A time that must already have come (a turn's, a memory's occurred_at)."""
    if value is not None and value > datetime.now(UTC) + CLOCK_SKEW:
        raise errors.InvalidArgument(field, "must not lie in the future")
    return value
