"""A workspace's members a page at a time (ListMembers; docs/api.md): by
handle in byte order, then id, continued by a keyset token bound to the
workspace. A page ends at its page size or where one answer's size budget
(ANSWER_BUDGET_BYTES) is spent, whichever comes first.

A request without a page size comes from a caller that may know nothing of
pages: it gets every member in one answer, or, when they do not fit the
budget, a refusal naming page_size. A list cut short there would look whole
to that caller (a member missing from it, not there at all)."""

from __future__ import annotations

from dataclasses import dataclass

from recallatron import errors
from recallatron.size_budget import Budget
from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_MEMBER_PAGE
from services.store.domain import page_tokens
from services.store.domain.answer_budget import ITEM_BYTES
from services.store.domain.control_names import HANDLE_RE
from services.store.domain.control_records import Member
from services.store.infrastructure.db import Databases
from services.store.sql import queries as q

# The first page starts after this: every handle sorts after '', and the nil
# id stands for "any".
_START = ("", "00000000-0000-0000-0000-000000000000")
# Without a page size: read at most one more member than the budget could
# ever hold (each takes ITEM_BYTES and a handle of at least one byte), so the
# read stays bounded however many members there are.
_WHOLE_LIMIT = ANSWER_BUDGET_BYTES // (ITEM_BYTES + 1) + 1


@dataclass(frozen=True)
class MemberPage:
    members: list[Member]
    next_page_token: str


def member_bytes(member: Member) -> int:
    """What a member takes in an answer: its ids, times and role (ITEM_BYTES)
    and its handle."""
    return ITEM_BYTES + len(member.handle.encode())


def _token(workspace_id: str, last: Member) -> str:
    return page_tokens.encode(
        {"w": "members", "ws": workspace_id, "handle": last.handle, "id": last.id}
    )


def _after(token: str, workspace_id: str) -> tuple[str, str]:
    """Where the page starts: (handle, id) of the last member answered."""
    if not token:
        return _START
    data = page_tokens.decode_keyset(token, "members", HANDLE_RE, "id")
    if data.get("ws") != workspace_id:
        raise errors.InvalidArgument("page_token", "belongs to another workspace's listing")
    return data["handle"], data["id"]


def member_page(
    dbs: Databases,
    workspace_id: str,
    include_removed: bool = False,
    page_size: int = 0,
    page_token: str = "",
) -> MemberPage:
    """A page of the workspace's members (removed ones when asked for)."""
    if page_size and not 1 <= page_size <= MAX_MEMBER_PAGE:
        raise errors.InvalidArgument("page_size", f"must lie in [1, {MAX_MEMBER_PAGE}], or 0")
    after_handle, after_id = _after(page_token, workspace_id)
    rows, more = page_tokens.read_page(
        dbs,
        q.MEMBERS_AFTER,
        {
            "workspace_id": workspace_id,
            "include_removed": include_removed,
            "after_handle": after_handle,
            "after_id": after_id,
        },
        page_size or _WHOLE_LIMIT,
    )
    members = [Member(str(r[0]), str(r[1]), r[2], r[3], r[4], r[5]) for r in rows]
    page = Budget(ANSWER_BUDGET_BYTES)
    for member in members:
        if not page.takes(member_bytes(member)):
            break
    more = more or page.taken < len(members)
    if more and not page_size:
        raise errors.ResourceExhausted(
            f"page_size: the members pass what one answer may hold ({ANSWER_BUDGET_BYTES} "
            f"bytes); list them a page at a time, page_size 1 to {MAX_MEMBER_PAGE}"
        )
    del members[page.taken :]
    return MemberPage(members, _token(workspace_id, members[-1]) if more else "")
