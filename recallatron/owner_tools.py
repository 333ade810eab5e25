"""An owner's view as agents see it: listing memories and reading the audit
log, both read-only. Each is the fields of one recallatron.tools.Tool (which
makes them, and the other tools, into TOOLS), and how its answer reads."""

from __future__ import annotations

from typing import Any

from recallatron.protojson import Arg
from recallatron.protojson_answers import Shown
from recallatron.tool_args import PAGE_TOKEN, PURPOSE, UUID, window_to
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    AUDIT_ACTIONS,
    DEFAULT_LIST_PAGE,
    KINDS,
    MAX_AUDIT_ACTIONS,
    MAX_AUDIT_PAGE,
    MAX_LIST_PAGE,
)

# Taken into recallatron.tools.SHOWN.
OWNER_SHOWN: dict[str, Shown] = {
    pb.ListMemoriesResponse.DESCRIPTOR.full_name: Shown(
        empty_is_null=frozenset({"next_page_token"})
    ),
    pb.ListAuditEventsResponse.DESCRIPTOR.full_name: Shown(
        empty_is_null=frozenset({"next_page_token"})
    ),
    pb.AuditEvent.DESCRIPTOR.full_name: Shown(empty_is_null=frozenset({"memory_id"})),
}


def _paged(most: int) -> dict[str, Arg]:
    """A listing's last arguments: its page (of at most ``most``), the token
    of the next, and the purpose."""
    return {
        "page_size": Arg({"minimum": 1, "maximum": most, "default": DEFAULT_LIST_PAGE}),
        "page_token": PAGE_TOKEN,
        "purpose": PURPOSE,
    }


# Each the keyword arguments of a recallatron.tools.Tool.
OWNER_TOOLS: tuple[dict[str, Any], ...] = (
    dict(
        name="list_memories",
        title="List memories",
        description=(
            "The memories you may see, newest first, optionally only those written by one "
            "member (created_by), of some kinds, of one episode, or created between from and to; "
            "superseded ones only with include_superseded. Each comes without its provenance: "
            "read it before relying on it. A memory is a dated claim, not current truth. At most "
            f"{MAX_LIST_PAGE} per page (fewer when long memories fill the answer); pass "
            "next_page_token for more."
        ),
        method="ListMemories",
        args={
            "created_by": Arg({**UUID, "description": "Only memories this member wrote."}),
            "kinds": Arg({"maxItems": len(KINDS)}),
            "episode_id": Arg(UUID),
            "from": Arg({"description": "Created from this time (RFC 3339, inclusive)."}),
            "to": window_to("Created before"),
            "include_superseded": Arg({"default": False}),
            **_paged(MAX_LIST_PAGE),
        },
        read_only=True,
        destructive=False,
    ),
    dict(
        name="audit_log",
        title="Read the audit log",
        description=(
            "For a workspace owner only (anyone else is refused): the workspace's audit "
            "log, newest first: who did what (remember, derive, correct, supersede, forget, "
            "the members, tokens and settings an owner or the operator changed, ...), when, "
            "on which memory, member or token id, optionally only one member's "
            "actions, some actions, or a time span. It holds ids and counts, never memory text "
            f"nor reasons. At most {MAX_AUDIT_PAGE} events per page; pass next_page_token for more."
        ),
        method="ListAuditEvents",
        args={
            "member_id": Arg({**UUID, "description": "Only what this member did."}),
            "actions": Arg({"maxItems": MAX_AUDIT_ACTIONS}, items={"enum": list(AUDIT_ACTIONS)}),
            "from": Arg({"description": "From this time (RFC 3339, inclusive)."}),
            "to": window_to("Before"),
            **_paged(MAX_AUDIT_PAGE),
        },
        read_only=True,
        destructive=False,
    ),
)
