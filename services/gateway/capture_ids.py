"""Capture's request ids (services/gateway/capture.py): made from the turn
itself, so the same turn captured twice stores one memory."""

from __future__ import annotations

import hashlib
import hmac
import unicodedata
from datetime import UTC, datetime


def turn_key(secret: bytes) -> bytes:
    """The key of the request ids made from turns, derived from the stack's
    secret. The store keeps request ids (hashed) after their memory is
    forgotten, so an id that was a plain hash of the words would let anyone
    holding the database or a backup confirm a guess of forgotten words; an
    HMAC under this key confirms nothing without the secret."""
    return hmac.new(secret, b"recallatron capture request ids", hashlib.sha256).digest()


def _turn_id(
    key: bytes,
    member_id: str,
    text: str,
    occurred_at: datetime | None,
    purpose: int,
    episode_id: str,
) -> str:
    stamp = occurred_at.astimezone(UTC).isoformat() if occurred_at else ""
    turn = f"{member_id}\x00{stamp}\x00{text}"
    if purpose or episode_id:
        turn += f"\x00{purpose}\x00{episode_id}"
    digest = hmac.new(key, turn.encode(), hashlib.sha256).hexdigest()
    return f"capture-{digest[:48]}"


def said_alike(text: str) -> str:
    """The turn as its request id reads it: what cannot change the claim
    (runs of whitespace, line endings, the Unicode spelling of the same
    letters) is made one."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def request_id_for(
    key: bytes,
    member_id: str,
    text: str,
    occurred_at: datetime | None,
    purpose: int = 0,
    episode_id: str = "",
) -> str:
    """A request id from the turn itself, so capturing the same turn twice
    (a retry, a replayed transcript, with other whitespace) stores one memory;
    the same words said for another purpose or in another episode are another
    turn. ``key`` is :func:`turn_key`'s."""
    return _turn_id(key, member_id, said_alike(text), occurred_at, purpose, episode_id)


# How many times the same words may be forgotten and said again (each a
# memory of its own, each found again by the chain of ids below).
MAX_RESTATED = 20


def restated_id(gone_request_id: str, gone_memory_id: str) -> str:
    """The request id of words said again after the memory they made under
    ``gone_request_id`` was forgotten: the same for every retry of them."""
    digest = hashlib.sha256(f"{gone_request_id}\x00{gone_memory_id}".encode()).hexdigest()
    return f"capture-{digest[:48]}"
