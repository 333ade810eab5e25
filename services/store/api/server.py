"""The store's gRPC adapter: translates messages to domain calls and back.
Errors are domain exceptions, mapped to status codes by recallatron.grpcserver."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

import grpc

from recallatron import convert, embed_input, errors, internal_auth, packed_vectors
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2 as pb
from recallatron.vocabulary import (
    MODE,
    PURPOSE,
    ROLE,
)
from services.store.api.graph_adapter import (
    card_msg,
    entity_msg,
)
from services.store.api.messages import (
    SETTING_NAMES,
    SETTINGS_LISTED,
    caller_of,
    candidates_answer,
    filters_of,
    listed_workspace_msg,
    member_msg,
    memory_msg,
    message_of,
    names_of,
    optional_timestamp,
    page_answer,
    settings_msg,
    token_msg,
    workspace_msg,
)
from services.store.api.tool_server import ToolServicer
from services.store.domain import control as ctl
from services.store.domain import embedding_status
from services.store.domain.administration import Administration
from services.store.domain.control_records import Workspace
from services.store.domain.dedup import DedupStore
from services.store.domain.deletion import WorkspaceDeletion
from services.store.domain.entity_merge import EntityMergeStore
from services.store.domain.episodes import EpisodeStore
from services.store.domain.graph import GraphStore
from services.store.domain.history import HistorySearch
from services.store.domain.member_pages import member_page
from services.store.domain.member_removal import MemberRemoval
from services.store.domain.memories import MemoryStore
from services.store.domain.owner_view import OwnerView
from services.store.domain.recall import RecallQueries
from services.store.domain.revocations import RevocationFeed
from services.store.domain.timeline import TimelineStore
from services.store.domain.token_pages import token_page
from services.store.domain.validation import uuid_str


def _owner(claims: internal_auth.Claims) -> str | None:
    """Who made an admin call, for its audit entry: the owner, or None for
    the operator."""
    return claims.member_id if claims.kind == internal_auth.MEMBER else None


class StoreServicer:
    """StoreService: the control plane, recall's candidate queries and the
    review page's reads (the tools are ToolService's, tool_server.py)."""

    def __init__(
        self,
        control: ctl.ControlPlane,
        memories: MemoryStore,
        recall: RecallQueries,
        revocations: RevocationFeed | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.control = control
        self.memories = memories
        self.recall = recall
        self.dedup = DedupStore(control)
        self.graph = GraphStore(control)
        self.entity_merge = EntityMergeStore(control)
        self.episodes = EpisodeStore(control)
        self.timelines = TimelineStore(control)
        self.tools = ToolServicer(
            memories,
            self.graph,
            self.episodes,
            self.timelines,
            self.dedup,
            self.entity_merge,
            OwnerView(control),
        )
        self.deletion = WorkspaceDeletion(memories.dbs, control)
        self.removal = MemberRemoval(memories.dbs, control)
        self.admin = Administration(memories.dbs, control)
        self.revocations = revocations
        # Set when the server drains: open watch streams end at once.
        self.stopping = stopping or threading.Event()

    # -- control plane -----------------------------------------------------

    def CreateWorkspace(
        self,
        request: pb.CreateWorkspaceRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateWorkspaceResponse:
        internal_auth.check_kind(internal_auth.OPERATOR)
        ws = self.admin.create_workspace(request.slug, request.server, request.request_id)
        return pb.CreateWorkspaceResponse(workspace=workspace_msg(ws))

    def CreateMember(
        self,
        request: pb.CreateMemberRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateMemberResponse:
        by = _owner(internal_auth.check_admin(request.workspace_id))
        role = ROLE.parse(request.role, "role") or "member"
        m = self.admin.create_member(
            by, request.workspace_id, request.handle, role, request.request_id
        )
        return pb.CreateMemberResponse(member=member_msg(m))

    def CreateToken(
        self,
        request: pb.CreateTokenRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateTokenResponse:
        by = _owner(internal_auth.check_admin(request.workspace_id))
        purposes = names_of(PURPOSE, request.purposes, "purposes", "a purpose")
        made = self.admin.create_token(
            by,
            request.member_id,
            request.label,
            request.workspace_id or None,
            tuple(purposes),
            request.read_only,
            convert.duration(request.expires_in, request.HasField("expires_in"), "expires_in"),
            request.request_id,
        )
        return message_of(
            pb.CreateTokenResponse, made, expires_at=optional_timestamp(made.expires_at)
        )

    def RevokeToken(
        self,
        request: pb.RevokeTokenRequest,
        context: grpc.ServicerContext,
    ) -> pb.RevokeTokenResponse:
        by = _owner(internal_auth.check_admin(request.workspace_id))
        self.admin.revoke_token(by, request.token_id, request.workspace_id or None)
        return pb.RevokeTokenResponse()

    def RotateToken(
        self,
        request: pb.RotateTokenRequest,
        context: grpc.ServicerContext,
    ) -> pb.RotateTokenResponse:
        by = _owner(internal_auth.check_admin(request.workspace_id))
        made, old_expires_at = self.admin.rotate_token(
            by,
            request.token_id,
            request.workspace_id or None,
            convert.duration(request.grace, request.HasField("grace"), "grace"),
            request.request_id,
        )
        return message_of(
            pb.RotateTokenResponse,
            made,
            expires_at=optional_timestamp(made.expires_at),
            old_expires_at=convert.timestamp(old_expires_at),
        )

    def ListTokens(
        self,
        request: pb.ListTokensRequest,
        context: grpc.ServicerContext,
    ) -> pb.ListTokensResponse:
        internal_auth.check_admin(request.workspace_id)
        member_id, workspace_id = self.control.token_listing(
            request.member_id, request.workspace_id or None
        )
        page = token_page(
            self.control.dbs, member_id, workspace_id, request.page_size, request.page_token
        )
        return page_answer(pb.ListTokensResponse, page.tokens, token_msg, page.next_page_token)

    def ListMembers(
        self, request: pb.ListMembersRequest, context: grpc.ServicerContext
    ) -> pb.ListMembersResponse:
        ws = self._listed_workspace(request.workspace)
        page = member_page(
            self.control.dbs,
            ws.id,
            request.include_removed,
            request.page_size,
            request.page_token,
        )
        return page_answer(pb.ListMembersResponse, page.members, member_msg, page.next_page_token)

    def ListWorkspaces(
        self, request: pb.ListWorkspacesRequest, context: grpc.ServicerContext
    ) -> pb.ListWorkspacesResponse:
        internal_auth.check_kind(internal_auth.OPERATOR)
        page = self.control.list_workspaces(request.page_size, request.page_token, request.server)
        return page_answer(
            pb.ListWorkspacesResponse, page.workspaces, listed_workspace_msg, page.next_page_token
        )

    def _listed_workspace(self, given: str) -> Workspace:
        """The workspace named: any for the operator; an owner's own only,
        another one, existing or not, refused alike."""
        claims = internal_auth.asserted()
        if claims.kind == internal_auth.OPERATOR:
            return self.control.workspace_named(given)
        internal_auth.check_admin(claims.workspace_id)
        with suppress(errors.NotFound):
            ws = self.control.workspace_named(given)
            if ws.id == claims.workspace_id:
                return ws
        raise errors.PermissionDenied("workspace: an owner lists their own workspace's members")

    def DeleteWorkspace(
        self, request: pb.DeleteWorkspaceRequest, context: grpc.ServicerContext
    ) -> pb.DeleteWorkspaceResponse:
        internal_auth.check_kind(internal_auth.OPERATOR)
        done = self.deletion.delete(request.workspace, request.confirm)
        return message_of(
            pb.DeleteWorkspaceResponse, done, deleted_at=convert.timestamp(done.deleted_at)
        )

    def RemoveMember(
        self, request: pb.RemoveMemberRequest, context: grpc.ServicerContext
    ) -> pb.RemoveMemberResponse:
        by = _owner(internal_auth.check_admin(request.workspace_id))
        done = self.removal.remove(
            request.member_id,
            request.private_memories,
            request.transfer_to,
            request.workspace_id or None,
            by,
        )
        return message_of(
            pb.RemoveMemberResponse,
            done,
            removed_at=convert.timestamp(done.removed_at),
            memories_erased=done.erased,
            memories_transferred=done.transferred,
            memories_kept=done.kept,
        )

    def WatchRevocations(
        self, request: pb.WatchRevocationsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchRevocationsResponse]:
        # A stream: the error-mapping interceptor wraps unary calls only.
        try:
            internal_auth.check_kind(internal_auth.SERVICE)
            if self.revocations is None:
                raise errors.Unavailable("this store does not publish revocations")
            subscription = self.revocations.subscribe()
        except errors.Unauthenticated as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.message)
        except errors.Unavailable as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, exc.message)
        assert self.revocations is not None  # context.abort raised otherwise
        try:
            yield pb.WatchRevocationsResponse(subscribed=True)
            while context.is_active() and not self.stopping.is_set():
                try:
                    token_id = subscription.get(timeout=0.5)
                except queue.Empty:
                    continue
                if token_id is None:
                    return  # the feed may have missed one: the watcher starts over
                yield pb.WatchRevocationsResponse(token_id=token_id)
        finally:
            self.revocations.unsubscribe(subscription)

    def Authenticate(
        self,
        request: pb.AuthenticateRequest,
        context: grpc.ServicerContext,
    ) -> pb.AuthenticateResponse:
        internal_auth.check_kind(internal_auth.SERVICE)
        ident = self.control.authenticate(request.token)
        return message_of(
            pb.AuthenticateResponse,
            ident,
            role=ROLE.value(ident.role),
            purposes=[PURPOSE.value(p) for p in ident.purposes],
            expires_at=optional_timestamp(ident.expires_at),
        )

    def GetWorkspaceSettings(
        self, request: pb.GetWorkspaceSettingsRequest, context: grpc.ServicerContext
    ) -> pb.GetWorkspaceSettingsResponse:
        internal_auth.check_workspace(request.workspace_id)
        ws_id = uuid_str(request.workspace_id, "workspace_id")
        # Read from the control plane, not this replica's cached record: an
        # owner reads back a change made through any replica at once. Rank
        # keeps its own copy for its settings cache's seconds, so this is one
        # query per workspace that often.
        settings = self.control.settings(ws_id, fresh=True)
        return pb.GetWorkspaceSettingsResponse(settings=settings_msg(settings))

    def UpdateWorkspaceSettings(
        self,
        request: pb.UpdateWorkspaceSettingsRequest,
        context: grpc.ServicerContext,
    ) -> pb.UpdateWorkspaceSettingsResponse:
        caller = caller_of(request.caller)
        if request.caller.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied("only a workspace owner may change its settings")
        if not request.update_fields:
            raise errors.InvalidArgument("update_fields", "name at least one setting to change")
        changes: dict[str, object] = {}
        s = request.settings
        for given in request.update_fields:
            name = SETTING_NAMES.get(given)
            if name is None:
                raise errors.InvalidArgument(
                    "update_fields", f"unknown setting {given!r}; the settings: {SETTINGS_LISTED}"
                )
            if name == "default_recall_mode":
                mode = MODE.parse(s.default_recall_mode, "settings.default_recall_mode")
                if mode is None:
                    raise errors.InvalidArgument("settings.default_recall_mode", MODE.one_of())
                changes[name] = mode
            else:
                changes[name] = getattr(s, name)
        merged = self.admin.update_settings(caller.member_id, caller.workspace_id, changes)
        return pb.UpdateWorkspaceSettingsResponse(
            settings=settings_msg(merged), updated_at=convert.timestamp(datetime.now(UTC))
        )

    # -- memory tools ------------------------------------------------------

    def GetMemories(
        self,
        request: pb.GetMemoriesRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetMemoriesResponse:
        found, more = self.memories.read_answer(
            caller_of(request.caller), list(request.ids), request.with_provenance
        )
        seen = {m.id for m in found} | set(more)
        return pb.GetMemoriesResponse(
            memories=[memory_msg(m) for m in found],
            not_found_ids=[i for i in request.ids if i not in seen],
            more_ids=more,
        )

    # -- recall support ----------------------------------------------------

    def NamedEntities(
        self, request: pb.NamedEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.NamedEntitiesResponse:
        named = self.graph.named_cards(caller_of(request.caller), request.text)
        return pb.NamedEntitiesResponse(
            entities=[card_msg(c) for c in named.cards],
            more_entities=[entity_msg(e) for e in named.left_out],
        )

    def LexicalCandidates(
        self, request: pb.LexicalCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.LexicalCandidatesResponse:
        result = self.recall.lexical(
            caller_of(request.caller), request.query, request.limit, filters_of(request.filters)
        )
        return candidates_answer(pb.LexicalCandidatesResponse, result)

    def DenseCandidates(
        self, request: pb.DenseCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.DenseCandidatesResponse:
        result = self.recall.dense(
            caller_of(request.caller),
            # The floats: from a rank of a version before vector_packed.
            packed_vectors.unpack(request.vector_packed, request.vector, "vector_packed"),
            request.model_id,
            embed_input.EMBED_INPUT_VERSION,
            request.limit,
            filters_of(request.filters),
            words=request.query,
        )
        return candidates_answer(pb.DenseCandidatesResponse, result)

    def AdmitCandidates(
        self, request: pb.AdmitCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.AdmitCandidatesResponse:
        walk = self.memories.walk(
            caller_of(request.caller),
            list(request.ids),
            request.hydrate_limit,
            request.include_superseded,
            request.neighbours_of,
        )
        return pb.AdmitCandidatesResponse(
            admitted_ids=walk.admitted,
            memories=[memory_msg(m) for m in walk.memories],
            neighbours=[pb.EpisodeNeighbour(of_id=s, memory_id=n) for s, n in walk.neighbours],
        )

    def SearchHistory(
        self, request: pb.SearchHistoryRequest, context: grpc.ServicerContext
    ) -> pb.SearchHistoryResponse:
        # Owner-only: anyone else gets an empty list (see services/store/domain/history.py).
        found = HistorySearch(self.memories.dbs, self.control).answer(
            caller_of(request.caller), request.query, request.limit
        )
        return pb.SearchHistoryResponse(
            entries=[
                message_of(cpb.HistoryEntry, h, occurred_at=convert.timestamp(h.occurred_at))
                for h in found.hits
            ],
            left_out=found.left_out,
        )

    def GetEmbeddingStatus(
        self, request: pb.GetEmbeddingStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetEmbeddingStatusResponse:
        claims = internal_auth.check_workspace(request.workspace_id)
        # A member (an owner) counts what they may see; the operator, all.
        member = claims.member_id if claims.kind == internal_auth.MEMBER else None
        status = embedding_status.status(
            self.memories.dbs,
            self.control,
            uuid_str(request.workspace_id, "workspace_id"),
            member,
            names_of(PURPOSE, request.purposes, "purposes", "a purpose"),
        )
        return message_of(
            pb.GetEmbeddingStatusResponse,
            status,
            input_version=embed_input.EMBED_INPUT_VERSION,
            parked_reasons=[pb.ParkedReason(reason=r, count=n) for r, n in status.parked_reasons],
        )

    # -- dedup review ------------------------------------------------------

    def ListDuplicatePairs(
        self, request: pb.StoreServiceListDuplicatePairsRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceListDuplicatePairsResponse:
        pairs, more = self.dedup.pairs(
            caller_of(request.caller), request.window, request.min_cosine, request.limit
        )
        return pb.StoreServiceListDuplicatePairsResponse(
            pairs=[message_of(pb.StoreDuplicatePair, p) for p in pairs], more=more
        )

    def handlers(self) -> dict[str, Callable[..., Any]]:
        """StoreService's handlers by method name (recallatron.grpcserver.add_methods)."""
        return {
            m.name: getattr(self, m.name)
            for m in pb.DESCRIPTOR.services_by_name["StoreService"].methods
            if hasattr(self, m.name)
        }
