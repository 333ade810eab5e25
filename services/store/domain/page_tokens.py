"""The page tokens of the listing calls (timeline, an owner's view): where
the next page starts, as JSON in URL-safe base64. Opaque to callers, and
refused as one error whatever is wrong with them."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from recallatron import errors

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
