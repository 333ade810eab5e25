"""Input rules shared by the calls (writes and reads). The names and limits are those of
recallatron.vocabulary, which the tool schemas state too; the id rules those
of recallatron.ids, which the gateway checks with too (imported here under
their names)."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from datetime import datetime

from recallatron import errors
from recallatron.ids import is_canonical_uuid as is_canonical_uuid
from recallatron.ids import uuid_list as uuid_list
from recallatron.ids import uuid_str as uuid_str
from recallatron.vocabulary import KIND, KINDS, PURPOSE, PURPOSES, request_id_fault


def text(value: str, field: str, max_len: int, required: bool = True) -> str:
    if "\x00" in value:
        raise errors.InvalidArgument(field, "must not contain NUL characters")
    if required and not value.strip():
        raise errors.InvalidArgument(field, "is required")
    if len(value) > max_len:
        raise errors.InvalidArgument(field, f"at most {max_len} characters")
    return value


def memory_text(value: str, field: str, max_len: int, required: bool = True) -> str:
    """A memory's title or body: :func:`text`, its length counted as it is
    kept, in Unicode NFC (0067_baseline/04_memory.sql). NFC makes a few characters longer
    (U+FB2C becomes three code points, U+1D15E two), and a text kept past its
    limit could not be written back as read, by a correct or a supersede; it
    makes decomposed text shorter ("e" and a combining accent are one "é"),
    which is not refused for the length it had as sent."""
    kept = value
    if not unicodedata.is_normalized("NFC", value):
        kept = unicodedata.normalize("NFC", value)
        if len(kept) > max_len:
            raise errors.InvalidArgument(
                field, f"at most {max_len} characters ({len(kept)} in Unicode NFC, as it is kept)"
            )
    text(kept, field, max_len, required)
    if required and not any(_shows(c) for c in kept):
        raise errors.InvalidArgument(
            field, "is required: it shows nothing (only zero-width or control characters)"
        )
    return value


def _shows(c: str) -> bool:
    """A character a reader sees: not space, a control or a format character
    (a zero-width space, a byte-order mark)."""
    return not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf")


def all_found(field: str, asked: Sequence[str], found: set[str]) -> None:
    """NotFound naming the first of ``asked`` (canonical ids) not ``found``
    ("source_ids[1]: memory not found"): which one, as read names them; one
    the caller may not see reads as one that does not exist."""
    missing = next((i for i, memory_id in enumerate(asked) if memory_id not in found), None)
    if missing is not None:
        raise errors.NotFound(f"{field}[{missing}]: memory not found")


def request_id(value: str) -> str:
    if not value:
        raise errors.InvalidArgument("request_id", "is required (any unique string per write)")
    if fault := request_id_fault(value):
        raise errors.InvalidArgument("request_id", fault)
    return value


def kind(value: str | None) -> str:
    if value is None:
        raise errors.InvalidArgument("kind", f"is required: one of {KIND.one_of()}")
    if value not in KINDS:
        raise errors.InvalidArgument("kind", f"must be one of {KIND.one_of()}")
    return value


def confidence(value: float | None, default: float = 1.0) -> float:
    if value is None:
        return default
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise errors.InvalidArgument("confidence", "must lie in [0, 1]")
    return value


def purposes(values: Sequence[str | None], field: str = "purposes") -> frozenset[str]:
    out: set[str] = set()
    for v in values:
        if v not in PURPOSES:
            raise errors.InvalidArgument(field, f"each must be one of {PURPOSE.one_of()}")
        out.add(v)
    return frozenset(out)


def two_uuids(first: str, second: str, first_field: str, second_field: str) -> tuple[str, str]:
    """Two ids that must name two different rows (a pair to decide on)."""
    a = uuid_str(first, first_field)
    b = uuid_str(second, second_field)
    if a == b:
        raise errors.InvalidArgument(second_field, f"must differ from {first_field}")
    return a, b


def count(value: int, field: str, default: int, most: int) -> int:
    """A requested number of rows: 0 for the default, else within [1, most]."""
    if value == 0:
        return default
    if not 1 <= value <= most:
        raise errors.InvalidArgument(field, f"must lie in [0, {most}]; 0 is the default, {default}")
    return value


def window(start: datetime | None, end: datetime | None) -> None:
    """A window in time, ``start`` inclusive to ``end`` exclusive, either
    open: one whose end is not later than its start holds no instant, and an
    empty answer to it would read as nothing having happened."""
    if start is not None and end is not None and end <= start:
        raise errors.InvalidArgument("to", "must be later than from")


def uuid_array(ids: Sequence[str]) -> str:
    """A Postgres array literal of ids already checked by :func:`uuid_str`, for
    a ``%s::uuid[]`` parameter: one string to send instead of a list adapted
    element by element."""
    return "{" + ",".join(ids) + "}"


def revision(value: int) -> int:
    if value < 1:
        raise errors.InvalidArgument("expected_revision", "must be the revision you read (>= 1)")
    return value
