"""Translations between protobuf well-known types and the plain Python values
the domain code uses. The enums' names are in recallatron.vocabulary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import errors


def timestamp(value: datetime | None) -> Timestamp:
    ts = Timestamp()
    if value is not None:
        ts.FromDatetime(value)
    return ts


# What a Timestamp may hold (google/protobuf/timestamp.proto): 0001-01-01T00:00:00Z
# to 9999-12-31T23:59:59.999999999Z, nanos in [0, 1e9). The wire format carries
# any int64 and int32, so a client can send more; datetime cannot hold it.
MIN_SECONDS = -62_135_596_800
MAX_SECONDS = 253_402_300_799
NANOS_PER_SECOND = 1_000_000_000


def when(ts: Timestamp, present: bool, field: str) -> datetime | None:
    """The time a Timestamp field holds, or None when the field is unset;
    InvalidArgument naming ``field`` for a value no Timestamp may hold."""
    if not present:
        return None
    if not MIN_SECONDS <= ts.seconds <= MAX_SECONDS:
        raise errors.InvalidArgument(
            field, "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
        )
    if not 0 <= ts.nanos < NANOS_PER_SECOND:
        raise errors.InvalidArgument(field, f"nanos must lie in [0, {NANOS_PER_SECOND})")
    return ts.ToDatetime(tzinfo=UTC)


# Clock skew tolerated on a time the caller says has passed.
CLOCK_SKEW = timedelta(minutes=5)


def not_future(value: datetime | None, field: str) -> datetime | None:
    """A time that must already have come (a turn's, a memory's occurred_at)."""
    if value is not None and value > datetime.now(UTC) + CLOCK_SKEW:
        raise errors.InvalidArgument(field, "must not lie in the future")
    return value


# What a Duration may hold (google/protobuf/duration.proto): about +-10,000
# years, nanos of the same sign as the seconds and below a second.
MAX_DURATION_SECONDS = 315_576_000_000


def duration(d: Duration, present: bool, field: str) -> timedelta | None:
    """The span a Duration field holds, or None when the field is unset;
    InvalidArgument naming ``field`` for a value no Duration may hold."""
    if not present:
        return None
    if not -MAX_DURATION_SECONDS <= d.seconds <= MAX_DURATION_SECONDS:
        raise errors.InvalidArgument(field, "is not a valid duration (seconds out of range)")
    if not -NANOS_PER_SECOND < d.nanos < NANOS_PER_SECOND or d.seconds * d.nanos < 0:
        raise errors.InvalidArgument(field, "is not a valid duration (nanos out of range)")
    return timedelta(seconds=d.seconds, microseconds=d.nanos // 1000)
