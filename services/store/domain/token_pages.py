"""A token listing (ListTokens; docs/api.md): a member's tokens or a
workspace's, by member (handle in byte order, then id), each member's oldest
first. TokenRecords.token_listing (token_records.py) checks whose they are.

A page at a time, every token (ended ones too), continued by a keyset token
bound to the listing (its workspace and member). A page of at most
MAX_TOKEN_PAGE tokens (labels of 200 characters) stays near 1 MB, within one
answer's size budget, so its size alone ends it.

A request without a page size or token comes from a caller that may know
nothing of pages: it gets the whole list as before paging, at most
MAX_LISTED_TOKENS, leaving out only the oldest ended tokens past that, or,
when its live tokens pass it (a workspace's, many members'), a refusal naming
page_size. A list that left a live token out would look whole to that caller
(an owner reviewing tokens missing a working credential)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from recallatron import errors
from recallatron.vocabulary import MAX_TOKEN_PAGE
from services.store.domain import page_tokens
from services.store.domain.control_names import HANDLE_RE
from services.store.domain.tokens import MAX_LISTED_TOKENS, TokenSummary
from services.store.infrastructure.db import Databases
from services.store.sql import queries as q

_NIL = "00000000-0000-0000-0000-000000000000"
# Before every token's created_at.
_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TokenPage:
    tokens: list[TokenSummary]
    next_page_token: str


@dataclass(frozen=True)
class _After:
    """The last token listed: its member's handle and id, its created_at
    and id."""

    handle: str
    member_id: str
    at: datetime
    token_id: str


def _scope(workspace_id: str | None, member_id: str | None) -> dict[str, str]:
    return {"w": "tokens", "ws": workspace_id or "", "m": member_id or ""}


def _token(workspace_id: str | None, member_id: str | None, last: TokenSummary) -> str:
    return page_tokens.encode(
        {
            **_scope(workspace_id, member_id),
            "handle": last.member_handle,
            "member": last.member_id,
            "at": last.created_at.isoformat(),
            "id": last.id,
        }
    )


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _after(token: str, workspace_id: str | None, member_id: str | None) -> _After:
    """Where the page starts: after the last token answered, or, for the
    first page, before a member's first token (or the workspace's first
    member's)."""
    if not token:
        if member_id:
            return _After("", member_id, _EARLIEST, _NIL)
        return _After("", _NIL, _EARLIEST, _NIL)
    data = page_tokens.decode_keyset(token, "tokens", HANDLE_RE, "member", "id")
    member = data["member"]
    at = _timestamp(data.get("at"))
    if at is None:
        raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS)
    if (data.get("ws"), data.get("m")) != (workspace_id or "", member_id or "") or (
        member_id and member != member_id
    ):
        raise errors.InvalidArgument("page_token", "belongs to another token listing")
    return _After(data["handle"], member, at, data["id"])


def token_page(
    dbs: Databases,
    member_id: str | None,
    workspace_id: str | None,
    page_size: int = 0,
    page_token: str = "",
) -> TokenPage:
    """A page of the listing's tokens, or without ``page_size`` and
    ``page_token`` its whole list. ``member_id`` and ``workspace_id`` are
    canonical ids, at least one of them set (token_listing)."""
    if not 0 <= page_size <= MAX_TOKEN_PAGE:
        raise errors.InvalidArgument(
            "page_size", f"must lie in [1, {MAX_TOKEN_PAGE}], or 0 (the whole list)"
        )
    if not page_size and not page_token:
        return TokenPage(_whole_list(dbs, member_id, workspace_id), "")
    after = _after(page_token, workspace_id, member_id)
    rows, more = page_tokens.read_page(
        dbs,
        q.TOKENS_AFTER,
        {
            "member_id": member_id,
            "workspace_id": workspace_id,
            "after_handle": after.handle,
            "after_member": after.member_id,
            "after_at": after.at,
            "after_id": after.token_id,
        },
        page_size or MAX_TOKEN_PAGE,
    )
    tokens = [_summary(r) for r in rows]
    return TokenPage(tokens, _token(workspace_id, member_id, tokens[-1]) if more else "")


def _summary(r: Any) -> TokenSummary:
    return TokenSummary(
        str(r[0]), r[1], str(r[2]), r[3], tuple(r[4] or ()), r[5], r[6], r[7], r[8], r[9]
    )


def _whole_list(
    dbs: Databases, member_id: str | None, workspace_id: str | None
) -> list[TokenSummary]:
    """Every token of the listing in one answer, at most MAX_LISTED_TOKENS:
    past that the oldest ended ones are left out, never a live one."""
    scope = {"member_id": member_id, "workspace_id": workspace_id}
    with dbs.control_conn() as conn:
        rows = conn.execute(q.LIST_TOKENS, {**scope, "limit": MAX_LISTED_TOKENS}).fetchall()
        # At the cap, only ended tokens may have been left out.
        counted = (
            conn.execute(q.LIVE_TOKENS_LISTED, scope).fetchone()
            if len(rows) >= MAX_LISTED_TOKENS
            else None
        )
    live = int(counted[0]) if counted else 0
    if live > MAX_LISTED_TOKENS:
        raise errors.ResourceExhausted(
            f"page_size: {live} live tokens pass what one list holds ({MAX_LISTED_TOKENS}); "
            f"list them a page at a time (page_size 1 to {MAX_TOKEN_PAGE}), or member by "
            "member (member_id)"
        )
    return [_summary(r) for r in rows]
