"""Translations between protobuf well-known types and the plain Python values
the domain code uses. The enums' names are in recallatron.vocabulary."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp


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
