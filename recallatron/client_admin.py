"""The gateway client's review and admin calls: dedup and entity review for a
member, workspaces, members, tokens, status and settings for the operator or an
owner."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol, Self, TypeVar

from google.protobuf.duration_pb2 import Duration

from recallatron.client_connection import Connection
from recallatron.protojson import to_message
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    MAX_MEMBER_PAGE,
    MAX_TOKEN_PAGE,
    MAX_WORKSPACE_PAGE,
)

# Deleting a workspace or removing a member may take longer than a tool call
# (a database dropped, many memories erased).
LONG_CALL_SECONDS = 150.0


class _Page(Protocol):
    """A listing's answer: its items, and where the next page starts."""

    next_page_token: str

    def MergeFrom(self, other_msg: Self, /) -> None: ...


_P = TypeVar("_P", bound=_Page)


class ReviewAndAdmin(Connection):
    # -- dedup review ------------------------------------------------------

    def who_am_i(self) -> pb.WhoAmIResponse:
        """The token's member (handle) and workspace (slug)."""
        return self.call(self.review.WhoAmI, pb.WhoAmIRequest())

    def duplicate_pairs(
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListDuplicatePairsResponse:
        return self.ask(
            self.review.ListDuplicatePairs,
            pb.ListDuplicatePairsRequest,
            purpose=purpose,
            limit=limit,
        )

    def dismiss_pair(
        self,
        first_id: str,
        second_id: str,
        purpose: str = DEFAULT_PURPOSE,
        first_expected_revision: int = 0,
        second_expected_revision: int = 0,
    ) -> pb.DismissDuplicatePairResponse:
        """Keep both; with the revisions read (0: unchecked), a memory
        changed since is not kept (ABORTED)."""
        return self.ask(
            self.review.DismissDuplicatePair,
            pb.DismissDuplicatePairRequest,
            first_id=first_id,
            second_id=second_id,
            purpose=purpose,
            first_expected_revision=first_expected_revision,
            second_expected_revision=second_expected_revision,
        )

    def entity_pairs(
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListEntityPairsResponse:
        return self.ask(
            self.review.ListEntityPairs, pb.ListEntityPairsRequest, purpose=purpose, limit=limit
        )

    def merge_entities(
        self, kept_id: str, merged_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.MergeEntitiesResponse:
        return self.ask(
            self.review.MergeEntities,
            pb.MergeEntitiesRequest,
            kept_id=kept_id,
            merged_id=merged_id,
            purpose=purpose,
        )

    def keep_entities_apart(
        self, first_id: str, second_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.KeepEntitiesApartResponse:
        return self.ask(
            self.review.KeepEntitiesApart,
            pb.KeepEntitiesApartRequest,
            first_id=first_id,
            second_id=second_id,
            purpose=purpose,
        )

    def undo_entity_merge(
        self, merge_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.UndoEntityMergeResponse:
        return self.ask(
            self.review.UndoEntityMerge,
            pb.UndoEntityMergeRequest,
            merge_id=merge_id,
            purpose=purpose,
        )

    def entity_merges(
        self,
        purpose: str = DEFAULT_PURPOSE,
        limit: int = 0,
        page_size: int = 0,
        page_token: str = "",
    ) -> pb.ListEntityMergesResponse:
        """The merges in force, newest first; ``page_size`` (or, from before
        paging, ``limit``) a page, ``page_token`` the previous page's
        next_page_token."""
        return self.ask(
            self.review.ListEntityMerges,
            pb.ListEntityMergesRequest,
            purpose=purpose,
            limit=limit,
            page_size=page_size,
            page_token=page_token,
        )

    # -- admin -------------------------------------------------------------

    def create_workspace(
        self, slug: str, server: str = "", request_id: str | None = None
    ) -> pb.AdminServiceCreateWorkspaceResponse:
        """``server``: a configured server's name; empty lets the placement
        policy pick (docs/servers.md). ``request_id``: a retry with it is
        answered with the workspace its first attempt made; None, one is made
        here, and the call is sent again with it after UNAVAILABLE; "", none
        is sent (and the call is sent once)."""
        request = pb.AdminServiceCreateWorkspaceRequest(
            slug=slug, server=server, request_id=_new_id(request_id)
        )
        return self.call_identified(self.admin.CreateWorkspace, request)

    def create_member(
        self, workspace_id: str, handle: str, owner: bool = False, request_id: str | None = None
    ) -> pb.AdminServiceCreateMemberResponse:
        """``request_id``: as create_workspace's (the member the first attempt made)."""
        request = to_message(
            pb.AdminServiceCreateMemberRequest,
            {
                "workspace_id": workspace_id,
                "handle": handle,
                "role": "owner" if owner else "member",
                "request_id": _new_id(request_id),
            },
        )
        return self.call_identified(self.admin.CreateMember, request)

    def create_token(
        self,
        member_id: str,
        label: str = "",
        purposes: Sequence[str] = (),
        read_only: bool = False,
        expires_in: timedelta | None = None,
        request_id: str = "",
    ) -> pb.AdminServiceCreateTokenResponse:
        """A token; scoped to ``purposes`` (empty: all) and to the read-only
        calls; refused from ``expires_in`` on (None: never expires).
        ``request_id``: a retry with it makes no second token (ALREADY_EXISTS
        naming the first one)."""
        request = to_message(
            pb.AdminServiceCreateTokenRequest,
            {
                "member_id": member_id,
                "label": label,
                "purposes": purposes,
                "read_only": read_only,
                "request_id": request_id,
            },
        )
        if expires_in is not None:
            request.expires_in.CopyFrom(_duration(expires_in))
        return self.call(self.admin.CreateToken, request)

    def revoke_token(self, token_id: str) -> None:
        self.call(self.admin.RevokeToken, pb.AdminServiceRevokeTokenRequest(token_id=token_id))

    def rotate_token(
        self, token_id: str, grace: timedelta | None = None, request_id: str = ""
    ) -> pb.AdminServiceRotateTokenResponse:
        """A new token for the same member and scope, shown once; the old one
        keeps working for ``grace`` (None: the gateway's default, 24 hours).
        ``request_id``: as create_token's."""
        request = pb.AdminServiceRotateTokenRequest(token_id=token_id, request_id=request_id)
        if grace is not None:
            request.grace.CopyFrom(_duration(grace))
        return self.call(self.admin.RotateToken, request)

    def list_tokens(
        self, member_id: str = "", workspace_id: str = ""
    ) -> pb.AdminServiceListTokensResponse:
        """Every token of a member, or of a workspace (an owner may leave both
        empty: their workspace's), ended ones too, by member, each member's
        oldest first, read a page at a time into one answer."""
        return _every_page(
            lambda token: self.list_tokens_page(member_id, workspace_id, MAX_TOKEN_PAGE, token)
        )

    def list_tokens_page(
        self,
        member_id: str = "",
        workspace_id: str = "",
        page_size: int = 0,
        page_token: str = "",
    ) -> pb.AdminServiceListTokensResponse:
        """A page of a member's or a workspace's tokens (``page_size`` and
        ``page_token`` both unset: the whole list in one answer, refused when
        its live tokens pass 1,000)."""
        return self.call(
            self.admin.ListTokens,
            pb.AdminServiceListTokensRequest(
                member_id=member_id,
                workspace_id=workspace_id,
                page_size=page_size,
                page_token=page_token,
            ),
        )

    def list_members(
        self, workspace: str = "", include_removed: bool = False
    ) -> store_pb2.ListMembersResponse:
        """Every member of a workspace, by handle, read a page at a time into
        one answer (an owner may leave ``workspace`` empty: their own; the
        operator names one by id or slug)."""
        return _every_page(
            lambda token: self.list_members_page(workspace, include_removed, MAX_MEMBER_PAGE, token)
        )

    def list_members_page(
        self,
        workspace: str = "",
        include_removed: bool = False,
        page_size: int = 0,
        page_token: str = "",
    ) -> store_pb2.ListMembersResponse:
        """A page of a workspace's members, by handle (``page_size`` 0: every
        one in one answer, refused when they pass one answer's size budget)."""
        return self.call(
            self.admin.ListMembers,
            store_pb2.ListMembersRequest(
                workspace=workspace,
                include_removed=include_removed,
                page_size=page_size,
                page_token=page_token,
            ),
        )

    def list_workspaces(
        self, page_size: int = 0, page_token: str = "", server: str = ""
    ) -> store_pb2.ListWorkspacesResponse:
        """A page of every workspace (or a server's), by slug (operator token)."""
        return self.call(
            self.admin.ListWorkspaces,
            store_pb2.ListWorkspacesRequest(
                page_size=page_size, page_token=page_token, server=server
            ),
        )

    def all_workspaces(self, server: str = "") -> store_pb2.ListWorkspacesResponse:
        """Every workspace (or a server's), by slug, read a page at a time into
        one answer (operator token)."""
        return _every_page(lambda token: self.list_workspaces(MAX_WORKSPACE_PAGE, token, server))

    def status(self) -> pb.GetStatusResponse:
        return self.call(self.admin.GetStatus, pb.GetStatusRequest())

    def wait_embedded(
        self,
        timeout: float = 600.0,
        poll: float = 0.5,
        on_status: Callable[[pb.GetStatusResponse], None] | None = None,
    ) -> pb.GetStatusResponse:
        """Blocks until the embedding job has caught up (owner token): parked
        memories wait for a change, not for the job. ``on_status`` sees every
        status read (progress)."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if on_status is not None:
                on_status(status)
            if status.pending == 0 and status.embedded + status.parked >= status.memories:
                return status
            if time.monotonic() > deadline:
                raise TimeoutError(f"embedding not done: {status}")
            time.sleep(poll)

    def update_settings(self, **changes: Any) -> pb.UpdateSettingsResponse:
        return self.ask(
            self.admin.UpdateSettings,
            pb.UpdateSettingsRequest,
            settings=changes,
            update_fields=list(changes),
        )

    # -- a workspace's and a member's end (operator; owners for members) ------------

    def delete_workspace(
        self, workspace: str, confirm: str
    ) -> pb.AdminServiceDeleteWorkspaceResponse:
        """Deletes ``workspace`` (its id or slug), named again in ``confirm``
        (operator token). Not undone."""
        return self.call(
            self.admin.DeleteWorkspace,
            pb.AdminServiceDeleteWorkspaceRequest(workspace=workspace, confirm=confirm),
            LONG_CALL_SECONDS,
        )

    def remove_member(
        self, member_id: str, private_memories: str, transfer_to: str = ""
    ) -> pb.AdminServiceRemoveMemberResponse:
        """Removes a member; ``private_memories``: "erase", or "transfer" to
        the member ``transfer_to``."""
        return self.ask(
            self.admin.RemoveMember,
            pb.AdminServiceRemoveMemberRequest,
            LONG_CALL_SECONDS,
            member_id=member_id,
            private_memories=private_memories,
            transfer_to=transfer_to,
        )

    # -- an owner's view -------------------------------------------------------

    def list_memories(
        self, purpose: str = DEFAULT_PURPOSE, **filters: Any
    ) -> pb.ListMemoriesResponse:
        """The memories the caller may see, newest first; ``filters`` by the
        request's field names (created_by, kinds, episode_id, from, to,
        include_superseded, page_size, page_token)."""
        return self.ask(
            self.memory.ListMemories, pb.ListMemoriesRequest, purpose=purpose, **filters
        )

    def audit_events(
        self, purpose: str = DEFAULT_PURPOSE, **filters: Any
    ) -> pb.ListAuditEventsResponse:
        """The audit log, newest first (an owner's token); ``filters`` by the
        request's field names (member_id, actions, from, to, page_size, page_token)."""
        return self.ask(
            self.memory.ListAuditEvents, pb.ListAuditEventsRequest, purpose=purpose, **filters
        )


def _new_id(given: str | None) -> str:
    """A request id: the caller's, or a new one when they gave None."""
    return str(uuid.uuid4()) if given is None else given


def _every_page(read: Callable[[str], _P]) -> _P:
    """Every page of a listing in one answer, each page's items after those
    before: ``read`` answers the page a token starts (empty: the first)."""
    every = read("")
    token = every.next_page_token
    while token:
        page = read(token)
        every.MergeFrom(page)
        token = page.next_page_token
    # MergeFrom kept the last token that was not empty.
    every.next_page_token = ""
    return every


def _duration(value: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(value)
    return d
