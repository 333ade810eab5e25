"""A history turn's chat id and role as an archive holds them (docs/export.md).

The legacy migration (history's only writer) keeps a chat id of at most 256
characters and a role of at most 64 (legacy/plan_items.py). A workspace it
filled before those limits may hold longer ones, and history rows are never
edited, so the export writes such a name within the limit and the import
reads one an older export wrote the same way: its first characters, an
ellipsis and the first 32 hex digits of the SHA-256 of the whole name (as
UTF-8). Two names cut alike stay two (their digests differ), a name within
the limit is kept as it is, and the copy holds nothing a write could not."""

from __future__ import annotations

import hashlib

from recallatron.vocabulary import MAX_HISTORY_CHAT_ID, MAX_HISTORY_ROLE

DIGEST_HEX = 32
MARK = "\u2026"  # an ellipsis: one character


def history_name(value: str, limit: int) -> str:
    """``value`` when it is at most ``limit`` characters; else its first
    characters, the mark and its digest, ``limit`` characters in all. The
    export's query (archive_queries.EXPORT_HISTORY) computes the same."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:DIGEST_HEX]
    return value[: limit - DIGEST_HEX - len(MARK)] + MARK + digest


def export_params() -> dict[str, int]:
    """The limits the export's history query takes."""
    return {
        "chat_id_max": MAX_HISTORY_CHAT_ID,
        "role_max": MAX_HISTORY_ROLE,
        "digest_hex": DIGEST_HEX,
    }
