"""Translations between the generated enums and the plain strings the domain
code and the database use (`KIND_NOTE` <-> `note`)."""

from __future__ import annotations

from datetime import datetime

from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import errors
from recallatron.v1 import common_pb2 as pb

_KIND = pb.Kind
_PURPOSE = pb.Purpose
_ORIGIN = pb.Origin
_MODE = pb.RecallMode
_ROLE = pb.Role
_LINK = pb.LinkKind


def _to_str(enum: object, prefix: str, value: int, field: str) -> str | None:
    """None for UNSPECIFIED; InvalidArgument for a number outside the enum."""
    try:
        name: str = enum.Name(value)  # type: ignore[attr-defined]
    except ValueError:
        raise errors.InvalidArgument(field, f"unknown value {value}") from None
    if name.endswith("_UNSPECIFIED"):
        return None
    return name.removeprefix(prefix).lower()


def _from_str(enum: object, prefix: str, value: str) -> int:
    return int(enum.Value(prefix + value.upper()))  # type: ignore[attr-defined]


def kind_str(value: int, field: str = "kind") -> str | None:
    return _to_str(_KIND, "KIND_", value, field)


def kind_enum(value: str) -> int:
    return _from_str(_KIND, "KIND_", value)


def purpose_str(value: int, field: str = "purpose") -> str | None:
    return _to_str(_PURPOSE, "PURPOSE_", value, field)


def purpose_enum(value: str) -> int:
    return _from_str(_PURPOSE, "PURPOSE_", value)


def origin_enum(value: str) -> int:
    return _from_str(_ORIGIN, "ORIGIN_", value)


def mode_str(value: int, field: str = "mode") -> str | None:
    return _to_str(_MODE, "RECALL_MODE_", value, field)


def mode_enum(value: str) -> int:
    return _from_str(_MODE, "RECALL_MODE_", value)


def role_str(value: int, field: str = "role") -> str | None:
    return _to_str(_ROLE, "ROLE_", value, field)


def role_enum(value: str) -> int:
    return _from_str(_ROLE, "ROLE_", value)


def link_enum(value: str) -> int:
    return _from_str(_LINK, "LINK_KIND_", value)


def timestamp(value: datetime | None) -> Timestamp:
    ts = Timestamp()
    if value is not None:
        ts.FromDatetime(value)
    return ts
