"""The page tokens of the listing calls (timeline, an owner's view, merges, members,
tokens, workspaces): where the next page starts, as JSON in URL-safe base64.
Opaque to callers, and refused as one error whatever is wrong with them. The
keyset listings (members, tokens) also read their pages here alike."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from recallatron import errors
from services.store.domain import validation
from services.store.infrastructure.db import Databases

NOT_OURS = "not a token this call gave"


def encode(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def decode(token: str) -> dict[str, Any]:
    """The token's data; InvalidArgument (page_token) for anything that is
    not a JSON object in base64."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
    # RecursionError: JSON nested deeper than the parser goes (no token of ours).
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise errors.InvalidArgument("page_token", NOT_OURS)
    return data


def decode_keyset(
    token: str, listing: str, handle_re: re.Pattern[str], *ids: str
) -> dict[str, Any]:
    """A keyset token's data, checked: ``listing``'s (its "w"), its "handle"
    one ``handle_re`` takes and each of ``ids`` a canonical id;
    InvalidArgument (page_token) otherwise. What it is bound to (a workspace,
    a member) the listing checks, with its own message."""
    data = decode(token)
    handle = data.get("handle")
    if (
        data.get("w") != listing
        or not isinstance(handle, str)
        or not handle_re.match(handle)
        or not all(_is_id(data.get(key)) for key in ids)
    ):
        raise errors.InvalidArgument("page_token", NOT_OURS)
    return data


def _is_id(value: object) -> bool:
    return isinstance(value, str) and validation.is_canonical_uuid(value)


def read_page(
    dbs: Databases, query: str, params: dict[str, Any], limit: int
) -> tuple[list[Any], bool]:
    """At most ``limit`` rows of a keyset ``query`` of the control plane and
    whether more follow: it reads one more (its ``limit`` parameter) to know."""
    with dbs.control_conn() as conn:
        rows = conn.execute(query, {**params, "limit": limit + 1}).fetchall()
    return rows[:limit], len(rows) > limit
