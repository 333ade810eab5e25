"""Ids as every layer takes them: a UUID in any spelling Python's uuid module
reads, kept in the canonical form; lists of them bounded and without
duplicates. The store checks every id it is given with these, and the gateway
checks with the same rules what it refuses before any work (recall's filters)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from recallatron import errors

# The canonical form, which every id this service hands out has: accepted as is
# (parsing each id of a 500-candidate list costs more than the query).
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_canonical_uuid(value: str) -> bool:
    """Whether ``value`` is a UUID in the form this service hands out."""
    return bool(_CANONICAL_UUID.fullmatch(value))


def uuid_str(value: str, field: str) -> str:
    """``value`` in the canonical form, or InvalidArgument naming ``field``."""
    if isinstance(value, str) and is_canonical_uuid(value):
        return value
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise errors.InvalidArgument(field, "must be a UUID") from None


def uuid_list(values: Sequence[str], field: str, max_items: int, min_items: int = 0) -> list[str]:
    """``values`` in the canonical form: at least ``min_items``, at most
    ``max_items``, each a UUID (the refusal names ``field[i]``), no two the
    same id however spelt."""
    if len(values) < min_items:
        raise errors.InvalidArgument(field, f"at least {min_items} required")
    if len(values) > max_items:
        raise errors.InvalidArgument(field, f"at most {max_items} allowed")
    try:
        # All canonical (the common case): checked without a Python-level loop.
        canonical = all(map(_CANONICAL_UUID.fullmatch, values))
    except TypeError:
        canonical = False
    if canonical:
        out = list(values)
    else:
        out = [uuid_str(v, f"{field}[{i}]") for i, v in enumerate(values)]
    if len(set(out)) != len(out):
        raise errors.InvalidArgument(field, "contains duplicates")
    return out
