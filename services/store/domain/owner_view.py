"""An owner's view (design §10; docs/api.md, "An owner's view"): the memories
a caller may see, listed newest first by author, kind, episode and time; and
the workspace's audit log (who did what, when, on which id), for its owners.
Both read inside the caller's transaction and are paged by a keyset token.

The audit log never holds memory text; its free-text details (a reason given
to correct or forget) are not shown either, only ids and counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recallatron import errors
from recallatron.vocabulary import (
    ANSWER_BUDGET_BYTES,
    AUDIT_ACTIONS,
    DEFAULT_LIST_PAGE,
    KINDS,
    MAX_AUDIT_ACTIONS,
    MAX_AUDIT_PAGE,
    MAX_LIST_PAGE,
)
from services.store.domain import answer_budget, page_tokens
from services.store.domain import validation as v
from services.store.domain.member_removal import OPERATOR_ID
from services.store.domain.memory_reads import MemoryView, memory_view
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller
from services.store.sql import owner_queries as oq

# One author's memories are read in the order of 0067_baseline/12_chains.sql's
# indexes of the author (the workspace's, the caller's own), a page's worth and
# no more. Left to choose, the planner, which cannot tell how few of the rows
# it reads the caller may see, would rather walk the whole workspace's
# created_at index (it follows the table: cheap in its eyes) and sort, or sort
# all of the author's rows; the generic plan did the walk.
# One episode's are read so too, from the same part's indexes of episodes.
AUTHOR_ORDER = {"enable_sort": "off", "enable_incremental_sort": "off"}
# Every author's memories: a page's worth from each of that part's
# indexes by time (the workspace's, the caller's own). Left to choose, the
# generic plan (which the store's prepared statement comes to) read every
# memory the caller may see and sorted them (13,337 rows read for a page of
# two).
NEWEST_ORDER = {"enable_sort": "off"}
# Some kinds' memories: a page's worth of ids from each kind's walk
# (0067_baseline/12_chains.sql: the workspace's and the caller's own), each
# then read by its id. Left to choose, the planner, which guesses that few rows
# of the table pass row security, would rather hash the ids and scan the whole
# table for them, or read the table's visible rows once into memory and filter
# them for each id (the plan it chose at times once the other two were off:
# 3,005 rows read for a page of two).
KIND_ORDER = {
    "enable_hashjoin": "off",
    "enable_mergejoin": "off",
    "enable_material": "off",
    "enable_seqscan": "off",
}

# A member's or some actions' audit events: a page's worth from the index of
# each (0067_baseline/04_memory.sql) in the order only it gives
# (owner_queries.BY_NEGATED_ID). Left to choose, the planner, guessing from the
# count of members or actions alone how many events match, would rather walk
# the whole log from its newest event and filter, then sort (the generic plan
# did: 20,003 rows read for a page of two of one member's few old events).
AUDIT_ORDER = {"enable_sort": "off"}
# A window in time: a page's worth from a GiST index of (..., id, at)
# (0067_baseline/04_memory.sql) in the order only it gives
# (owner_queries.BY_*DISTANCE), the window's times pruning its pages. Left to
# choose, the planner would walk the whole log (or a member's or an action's
# events) from the newest event and filter by time (it did: 20,004 rows read
# for a page of two of a window before all but the oldest event).
# The audit listing by (a member given, actions given, a window given).
AUDIT_LISTINGS: dict[tuple[bool, bool, bool], tuple[str, dict[str, str]]] = {
    (True, True, False): (oq.AUDIT_EVENTS_BY_MEMBER_OF_ACTIONS, AUDIT_ORDER),
    (True, False, False): (oq.AUDIT_EVENTS_BY_MEMBER, AUDIT_ORDER),
    (False, True, False): (oq.AUDIT_EVENTS_OF_ACTIONS, AUDIT_ORDER),
    (False, False, False): (oq.AUDIT_EVENTS, {}),
    (True, True, True): (oq.AUDIT_EVENTS_BY_MEMBER_OF_ACTIONS_IN_WINDOW, AUDIT_ORDER),
    (True, False, True): (oq.AUDIT_EVENTS_BY_MEMBER_IN_WINDOW, AUDIT_ORDER),
    (False, True, True): (oq.AUDIT_EVENTS_OF_ACTIONS_IN_WINDOW, AUDIT_ORDER),
    (False, False, True): (oq.AUDIT_EVENTS_IN_WINDOW, AUDIT_ORDER),
}

# Detail keys shown: ids, counts and names of things, never free text.
HIDDEN_DETAIL = frozenset({"reason"})


@dataclass(frozen=True)
class MemoryFilter:
    created_by: str = ""
    kinds: Sequence[str] = ()
    episode_id: str = ""
    start: datetime | None = None
    end: datetime | None = None
    include_superseded: bool = False


@dataclass(frozen=True)
class MemoryPage:
    memories: list[MemoryView]
    next_page_token: str


@dataclass(frozen=True)
class AuditFilter:
    member_id: str = ""
    actions: Sequence[str] = ()
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True)
class AuditEvent:
    id: int
    at: datetime
    member_id: str
    member_handle: str
    action: str
    memory_id: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    next_page_token: str


def _decode(token: str, what: str) -> dict[str, Any]:
    """A token of the listing ``what``, never another's."""
    data = page_tokens.decode(token)
    if data.get("w") != what:
        raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS)
    return data


class OwnerView(InWorkspaces):
    def memories(
        self, caller: Caller, f: MemoryFilter, page_size: int = 0, page_token: str = ""
    ) -> MemoryPage:
        created_by = v.uuid_str(f.created_by, "created_by") if f.created_by else None
        episode = v.uuid_str(f.episode_id, "episode_id") if f.episode_id else None
        for i, kind in enumerate(f.kinds):
            if kind not in KINDS:
                raise errors.InvalidArgument(f"kinds[{i}]", "must be " + ", ".join(KINDS))
        v.window(f.start, f.end)
        limit = v.count(page_size, "page_size", DEFAULT_LIST_PAGE, MAX_LIST_PAGE)
        after_at: datetime | None = None
        after_id: str | None = None
        if page_token:
            data = _decode(page_token, "memories")
            try:
                after_at = datetime.fromisoformat(str(data["at"]))
                after_id = v.uuid_str(str(data["id"]), "page_token")
            except (KeyError, ValueError, errors.InvalidArgument):
                raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS) from None
        params = {
            "created_by": created_by,
            "kinds": list(dict.fromkeys(f.kinds)) or None,
            "episode": episode,
            "from": f.start,
            "to": f.end,
            "include_superseded": f.include_superseded,
            "after_at": after_at,
            "after_id": after_id,
            # The same bounds, as the walk's index conditions (owner_queries._list_memories).
            "since": f.start.isoformat() if f.start else "-infinity",
            "until": f.end.isoformat() if f.end else "infinity",
            "at_most": after_at.isoformat() if after_at else "infinity",
            "limit": limit + 1,
        }
        if created_by:
            listing, settings = oq.LIST_MEMORIES_BY_AUTHOR, AUTHOR_ORDER
        elif params["kinds"]:
            listing, settings = oq.LIST_MEMORIES_OF_KINDS, KIND_ORDER
        elif episode:
            listing, settings = oq.LIST_MEMORIES_OF_EPISODE, AUTHOR_ORDER
        else:
            listing, settings = oq.LIST_MEMORIES, NEWEST_ORDER
        with self.transaction(caller, settings) as conn:
            rows = conn.execute(listing, params).fetchall()
        views = [memory_view(r) for r in rows[:limit]]
        # A page of long memories ends where the answer's size budget is
        # spent; its token goes on from the last one answered.
        kept = answer_budget.fitting(views, ANSWER_BUDGET_BYTES)
        more = len(rows) > limit or kept < len(views)
        del views[kept:]
        token = ""
        if more:
            last = views[-1]
            token = page_tokens.encode(
                {"w": "memories", "at": last.created_at.isoformat(), "id": last.id}
            )
        return MemoryPage(views, token)

    def audit(
        self, caller: Caller, f: AuditFilter, page_size: int = 0, page_token: str = ""
    ) -> AuditPage:
        if caller.role != "owner":
            raise errors.PermissionDenied("only a workspace owner may read its audit log")
        member = v.uuid_str(f.member_id, "member_id") if f.member_id else None
        if len(f.actions) > MAX_AUDIT_ACTIONS:
            raise errors.InvalidArgument("actions", f"at most {MAX_AUDIT_ACTIONS}")
        for i, action in enumerate(f.actions):
            # A name the log cannot hold would answer an empty page, as if
            # nobody had done it.
            if action not in AUDIT_ACTIONS:
                raise errors.InvalidArgument(
                    f"actions[{i}]", "not an audit action: one of " + ", ".join(AUDIT_ACTIONS)
                )
        v.window(f.start, f.end)
        limit = v.count(page_size, "page_size", DEFAULT_LIST_PAGE, MAX_AUDIT_PAGE)
        after_id: int | None = None
        if page_token:
            try:
                after_id = int(_decode(page_token, "audit")["id"])
                if not 0 <= after_id < 2**63:  # an audit id is a bigint
                    raise ValueError(after_id)
            except (KeyError, ValueError, TypeError, OverflowError):
                raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS) from None
        params = {
            "member": member,
            "actions": list(dict.fromkeys(f.actions)) or None,
            "from": f.start,
            "to": f.end,
            "after_id": after_id,
            "limit": limit + 1,
        }
        window = f.start is not None or f.end is not None
        listing, settings = AUDIT_LISTINGS[bool(member), bool(params["actions"]), window]
        with self.transaction(caller, settings) as conn:
            rows = conn.execute(listing, params).fetchall()
        handles = self._handles(caller.workspace_id, {str(r[2]) for r in rows[:limit]})
        events = [
            AuditEvent(
                int(r[0]),
                r[1],
                r[2],
                handles.get(r[2], ""),
                r[3],
                r[4] or "",
                {k: val for k, val in (r[5] or {}).items() if k not in HIDDEN_DETAIL},
            )
            for r in rows[:limit]
        ]
        token = page_tokens.encode({"w": "audit", "id": events[-1].id}) if len(rows) > limit else ""
        return AuditPage(events, token)

    def _handles(self, workspace_id: str, member_ids: set[str]) -> dict[str, str]:
        """The handles of the page's members only: a page of the log costs
        the same however many members the workspace has had."""
        wanted = sorted(member_ids - {OPERATOR_ID})
        found: dict[str, str] = {}
        if wanted:
            with self.control.dbs.control_conn() as conn:
                rows = conn.execute(oq.MEMBER_HANDLES_OF, (wanted, workspace_id))
                found = {str(r[0]): str(r[1]) for r in rows}
        return {**found, OPERATOR_ID: "operator"}
