"""Access tokens' own rules (design §3): what a new token and a listed one
carry, how long a token may live and a rotation's grace, and the hash that is
all the control plane keeps of a secret. The control plane (control.py)
stores and checks them."""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

from recallatron import errors
from services.store.domain.admin_requests import AdminRequest, reused


@dataclass(frozen=True)
class NewToken:
    """A token as made: the secret, shown once, and its expiry."""

    token: str
    token_id: str
    expires_at: datetime | None


@dataclass(frozen=True)
class TokenSummary:
    """A token as listed: never its secret nor its hash."""

    id: str
    label: str
    member_id: str
    member_handle: str
    purposes: tuple[str, ...]
    read_only: bool
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


def replayed_request(
    request: AdminRequest, token_id: str, call: str, asked: bytes
) -> errors.DomainError:
    """The refusal of a request id already used: the same request is answered
    with the token it made (by id: its secret was shown once and is kept
    nowhere), another is refused as a write's reused id is."""
    return reused(request, call, asked) or errors.AlreadyExists(
        f"request_id: this request already made token {token_id}; its secret was shown "
        "once and is not kept: if its answer was lost, revoke that token and ask again "
        "with a new request id"
    )


# Token lifetimes (design §3): an expiry is optional and bounded, so that a
# typo cannot make a token that outlives everyone; a rotation's grace is short
# by default (a day to roll the new token out) and bounded too.
MAX_TOKEN_LIFETIME = timedelta(days=3650)
DEFAULT_ROTATION_GRACE = timedelta(hours=24)
MAX_ROTATION_GRACE = timedelta(days=90)
# A listing's bound: more tokens than any member should hold. A member holds
# at most this many live ones (a new one past it is refused), so that their
# list leaves out ended tokens only, never a live one.
MAX_LISTED_TOKENS = 1000
MAX_LIVE_TOKENS = MAX_LISTED_TOKENS


MAX_LABEL = 200
# Control characters (escape sequences, newlines) and format ones (bidi
# overrides) would act on the terminal that lists the tokens, or disguise a
# label there; line and paragraph separators break a listing's lines.
_UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def token_label(value: str) -> str:
    """A token's label: optional, at most MAX_LABEL characters of text that
    shows as itself wherever tokens are listed."""
    if len(value) > MAX_LABEL:
        raise errors.InvalidArgument("label", f"at most {MAX_LABEL} characters")
    for ch in value:
        if unicodedata.category(ch) in _UNSHOWN:
            raise errors.InvalidArgument(
                "label", f"must not contain control or format characters (U+{ord(ch):04X})"
            )
    return value


def token_lifetime(value: timedelta | None) -> timedelta | None:
    """A new token's expires_in: None (never expires) or positive, bounded."""
    if value is None:
        return None
    if value <= timedelta(0):
        raise errors.InvalidArgument("expires_in", "must be positive (leave it unset: no expiry)")
    if value > MAX_TOKEN_LIFETIME:
        raise errors.InvalidArgument(
            "expires_in", f"at most {MAX_TOKEN_LIFETIME.days} days (leave it unset: no expiry)"
        )
    return value


def rotation_grace(value: timedelta | None) -> timedelta:
    """A rotation's grace: unset, the default; zero, at once; bounded."""
    if value is None:
        return DEFAULT_ROTATION_GRACE
    if value < timedelta(0):
        raise errors.InvalidArgument("grace", "must not be negative (0: the old token stops now)")
    if value > MAX_ROTATION_GRACE:
        raise errors.InvalidArgument("grace", f"at most {MAX_ROTATION_GRACE.days} days")
    return value


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
