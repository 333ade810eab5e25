"""The argument overlays the memory tools (recallatron/tools.py) and an
owner's tools (recallatron/owner_tools.py) share, so that an id, a purpose or
a page token reads and is limited the same in every tool."""

from __future__ import annotations

from typing import Any

from recallatron.protojson import Arg
from recallatron.vocabulary import DEFAULT_PURPOSE, IDENTIFIER_PATTERN, MAX_IDENTIFIER

IDENTIFIER: dict[str, Any] = {"pattern": IDENTIFIER_PATTERN, "maxLength": MAX_IDENTIFIER}
UUID: dict[str, Any] = {"format": "uuid"}
PURPOSE = Arg(
    {
        "default": DEFAULT_PURPOSE,
        "description": "Why you are asking; only memories stored for this purpose are visible.",
    }
)
PAGE_TOKEN = Arg({"maxLength": 1000})
