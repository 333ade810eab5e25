"""The public API: authentication, request checks, the seven tools and the
admin calls, forwarded to store and rank with deadlines."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from recallatron import convert, errors, internal_auth, recall_filters
from recallatron.grpcserver import current_method
from recallatron.peer import Method
from recallatron.tools import TOOLS
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc, rank_pb2, store_pb2
from recallatron.vocabulary import (
    DEFAULT_RECALL_LIMIT,
    KIND,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_TURN_CHARS,
    MODE,
    PURPOSE,
    RECALL_LIMIT_RULE,
)
from services.gateway import capture, scopes
from services.gateway import peers as calls
from services.gateway.auth import Auth, authorization_of
from services.gateway.authcache import Identity
from services.gateway.leaving import Leaving
from services.gateway.peers import Peers, relayed

log = logging.getLogger("recallatron.gateway")


def caller(ident: Identity, purpose: cpb.Purpose.ValueType) -> cpb.Caller:
    """The identity sent to store and rank; the purpose checked against the
    token's scope."""
    PURPOSE.parse(purpose, "purpose")  # rejects numbers outside the enum
    purpose = purpose or cpb.PURPOSE_ASSIST
    scopes.check_purpose(ident.purposes, ident.read_only, purpose)
    return cpb.Caller(
        workspace_id=ident.workspace_id,
        member_id=ident.member_id,
        purpose=purpose,
        role=ident.role,
    )


def written(ident: Identity, request: Message, who: cpb.Caller) -> None:
    """A write's memory purposes checked against the token's scope, and
    narrowed into it where they would be inherited."""
    if not ident.purposes or WRITTEN_PURPOSES_FIELD not in request.DESCRIPTOR.fields_by_name:
        return
    asked = getattr(request, WRITTEN_PURPOSES_FIELD)
    for i, p in enumerate(asked):
        PURPOSE.parse(p, f"{WRITTEN_PURPOSES_FIELD}[{i}]")  # numbers outside the enum
    narrowed = scopes.written_purposes(
        ident.purposes, ident.read_only, current_method(), list(asked), who.purpose
    )
    if narrowed is not None:
        del asked[:]
        asked.extend(narrowed)


def enum_lists_bounded(request: Message, prefix: str = "") -> None:
    """Refuses a repeated enum field (here or in a message field, such as
    recall's filters) holding more entries than its enum has values: each
    entry names one of a closed set, so more can only repeat one, while each
    costs the services behind a check, a copy and a hash (two million kinds
    in a 2 MB recall kept the store busy past rank's deadline)."""
    for fd, value in request.ListFields():
        name = prefix + fd.name
        if fd.type == FieldDescriptor.TYPE_ENUM and fd.is_repeated and fd.enum_type is not None:
            most = len([e for e in fd.enum_type.values if e.number != 0])
            if len(value) > most:
                raise errors.InvalidArgument(name, f"at most {most} entries, each a different one")
        elif fd.type == FieldDescriptor.TYPE_MESSAGE and not fd.is_repeated:
            enum_lists_bounded(value, name + ".")


# Every public tool request names the purpose its caller acts for; a write
# names the purposes of what it writes in another field.
PURPOSE_FIELD = "purpose"
WRITTEN_PURPOSES_FIELD = "purposes"
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class Forwarding:
    """A public service whose tools the store's ToolService answers with the
    request and the response as they are (tools.proto): one path for the
    token, its scope, the purpose, the caller assertion, the deadline and the
    relay of the store's status. The tools are one table, peers.TOOLS: each
    entry is served by :meth:`handlers` with no handler written for it."""

    def __init__(self, peers: Peers, auth: Auth) -> None:
        self.peers = peers
        self.auth = auth

    def forward(self, m: Method[Req, Resp], request: Req, context: grpc.ServicerContext) -> Resp:
        ident = self.auth.member(context)
        enum_lists_bounded(request)
        who = caller(ident, getattr(request, PURPOSE_FIELD))
        written(ident, request, who)
        return self.peers.as_member(m, request, who)

    def handlers(self, service: ServiceDescriptor) -> dict[str, Callable[..., Any]]:
        """The service's handlers by method name (recallatron.grpcserver.add_methods):
        every tool the store answers as it is (peers.TOOLS) forwarded through
        :meth:`forward`, and the servicer's own methods where it defines one."""
        own = {m.name: getattr(self, m.name) for m in service.methods if m.name in vars(type(self))}
        forwarded = {
            m.name: self._forwarder(calls.TOOLS[m.name])
            for m in service.methods
            if m.name in calls.TOOLS and m.name not in own
        }
        return {**forwarded, **own}

    def _forwarder(self, m: Method[Req, Resp]) -> Callable[[Req, grpc.ServicerContext], Resp]:
        def handle(request: Req, context: grpc.ServicerContext) -> Resp:
            return self.forward(m, request, context)

        return handle


class MemoryServicer(Forwarding):
    # Every tool the store answers as it is comes from Forwarding.handlers;
    # what is composed or checked here first is defined below.

    @functools.cached_property
    def capture_key(self) -> bytes:
        return capture.turn_key(self.peers.settings.internal_signing_key())

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> pb.RecallResponse:
        ident = self.auth.member(context)
        if not request.query.strip():
            raise errors.InvalidArgument("query", "is required")
        if len(request.query) > MAX_QUERY_CHARS:
            raise errors.InvalidArgument("query", f"at most {MAX_QUERY_CHARS} characters")
        if "\x00" in request.query:
            raise errors.InvalidArgument("query", "must not contain NUL characters")
        if request.limit < 0 or request.limit > MAX_RECALL_LIMIT:
            raise errors.InvalidArgument("limit", RECALL_LIMIT_RULE)
        enum_lists_bounded(request)
        MODE.parse(request.mode, "mode")
        # Here, not first at the store's lexical arm: a bad filter must cost
        # no query embedding and no store call.
        recall_filters.check(request.filters.kinds, request.filters.mention_entity_ids)
        who = caller(ident, request.purpose)
        # History evidence exists only for the workspace owner: for anyone
        # else the flag changes nothing. The owner hears why it is left out
        # for a purpose it does not serve (the store answers none either).
        history = request.include_history and ident.role == cpb.ROLE_OWNER
        withheld = (
            scopes.history_withheld(ident.purposes, ident.read_only, who.purpose) if history else ""
        )
        history = history and not withheld
        rank_request = rank_pb2.RankRequest(
            caller=who,
            query=request.query,
            mode=request.mode,
            limit=request.limit or DEFAULT_RECALL_LIMIT,
            filters=request.filters,
            skip_rerank=request.skip_rerank,
            entity_cards=True,
            include_history=history,
        )
        # Good for the rank call and every store and embed call rank makes
        # with it (design §5: rank composes the whole answer).
        methods: tuple[str, ...] = internal_auth.RECALL_METHODS
        if history:
            methods = (*methods, calls.SEARCH_HISTORY.path)
        assertion = self.peers.member(who, *methods)
        resp = self.peers.rank.call(calls.RANK, rank_request, assertion)
        if withheld:
            resp.outcome.history_unavailable_reason = withheld
        return pb.RecallResponse(outcome=resp.outcome)

    def Capture(
        self,
        request: pb.CaptureRequest,
        context: grpc.ServicerContext,
    ) -> pb.CaptureResponse:
        ident = self.auth.member(context)
        # Checked before deciding: a turn not worth storing is still refused
        # for a bad purpose or time.
        who = caller(ident, request.purpose)
        if request.speaker_member_id and not ident.is_member(request.speaker_member_id):
            # An agent captures the turns of the member it acts for, nobody
            # else's; their id in any spelling of a UUID, as every id.
            raise errors.InvalidArgument(
                "speaker_member_id", "must be empty or the member whose token this is"
            )
        if len(request.text) > MAX_TURN_CHARS or "\x00" in request.text:
            raise errors.InvalidArgument(
                "text", f"at most {MAX_TURN_CHARS} characters, no NUL characters"
            )
        occurred = convert.not_future(
            convert.when(request.occurred_at, request.HasField("occurred_at"), "occurred_at"),
            "occurred_at",
        )
        episode_id = capture.check_ids(request.request_id, request.episode_id)
        # A derived id reads the turn written alike (capture_ids.said_alike), and so
        # does the claim stored under it: one id, one request. A caller's own id
        # is retried with its own text, as it always was.
        said = capture.decide(
            request.text if request.request_id else capture.said_alike(request.text)
        )
        if not said.store:
            return pb.CaptureResponse(stored=False, reason=said.reason)
        ids = (
            self.capture_key,
            ident.member_id,
            request.text,
            occurred,
            who.purpose,
            episode_id,
        )
        remember = self._remember(
            said,
            request.request_id or capture.request_id_for(*ids),
            ident,
            who,
            occurred,
            episode_id,
        )
        resp = self.peers.as_member(calls.REMEMBER, remember, who)
        # Words with no time and no request id of the caller's are one turn
        # while its memory lives; once forgotten (a replay then answers its id
        # alone: revision 0, which no memory has), saying them again is a new
        # statement, under an id chained from the gone one's.
        for _ in range(capture.MAX_RESTATED):
            if request.request_id or occurred or not (resp.replayed and resp.memory.revision == 0):
                break
            remember.request_id = capture.restated_id(remember.request_id, resp.memory.id)
            resp = self.peers.as_member(calls.REMEMBER, remember, who)
        return pb.CaptureResponse(stored=True, reason=said.reason, memory=resp.memory)

    @staticmethod
    def _remember(
        said: capture.Capture,
        request_id: str,
        ident: Identity,
        who: cpb.Caller,
        occurred: datetime | None,
        episode_id: str,
    ) -> pb.RememberRequest:
        audience = (
            cpb.Audience(workspace=True)
            if said.audience == capture.WORKSPACE
            else cpb.Audience(member_id=ident.member_id)
        )
        return pb.RememberRequest(
            request_id=request_id,
            kind=KIND.value(said.kind),
            title=said.title,
            body=capture.body_with_time(said.body, occurred),
            audience=audience,
            purposes=[who.purpose],
            episode_id=episode_id,
            occurred_at=convert.timestamp(occurred or datetime.now(UTC)),
        )

    def DescribeTools(
        self,
        request: pb.DescribeToolsRequest,
        context: grpc.ServicerContext,
    ) -> pb.DescribeToolsResponse:
        # Needs no token, but two are refused here too, as on every call.
        authorization_of(context)
        return pb.DescribeToolsResponse(
            tools=[
                pb.ToolDescription(
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    input_schema_json=t.schema_json(),
                    output_schema_json=json.dumps(t.output_schema, sort_keys=True),
                    annotations=pb.ToolAnnotations(**t.hints),
                )
                for t in TOOLS
            ]
        )


class AdminServicer(Leaving, gateway_pb2_grpc.AdminServiceServicer):
    def __init__(self, peers: Peers, auth: Auth) -> None:
        self.peers = peers
        self.auth = auth

    def _in_own_workspace(
        self, m: Method[Req, Resp], request: Message, context: grpc.ServicerContext
    ) -> Resp:
        """A call the operator or an owner may make: the public request's
        fields under the store's message, an owner's held to their own
        workspace (the operator's to none: the store takes any)."""
        owner = self.auth.operator_or_owner(context)
        enum_lists_bounded(request)
        asked = relayed(m.request_type, request, workspace_id=owner.workspace_id if owner else "")
        return self.peers.as_admin(m, asked, owner)

    def CreateWorkspace(
        self, request: pb.AdminServiceCreateWorkspaceRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateWorkspaceResponse:
        self.auth.operator(context, "creating a workspace needs the operator token")
        resp = self.peers.store.call(
            calls.CREATE_WORKSPACE,
            relayed(store_pb2.CreateWorkspaceRequest, request),
            self.peers.operator(calls.CREATE_WORKSPACE.path),
        )
        return relayed(pb.AdminServiceCreateWorkspaceResponse, resp)

    def CreateMember(
        self, request: pb.AdminServiceCreateMemberRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateMemberResponse:
        owner = self.auth.operator_or_owner(context)
        workspace_id = request.workspace_id
        if owner is None and not workspace_id:
            raise errors.InvalidArgument("workspace_id", "is required with the operator token")
        if owner is not None:
            if workspace_id and not owner.is_workspace(workspace_id):
                raise errors.NotFound("workspace_id: workspace not found")
            workspace_id = owner.workspace_id
        resp = self.peers.as_admin(
            calls.CREATE_MEMBER,
            relayed(store_pb2.CreateMemberRequest, request, workspace_id=workspace_id),
            owner,
        )
        return relayed(pb.AdminServiceCreateMemberResponse, resp)

    def CreateToken(
        self, request: pb.AdminServiceCreateTokenRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateTokenResponse:
        resp = self._in_own_workspace(calls.CREATE_TOKEN, request, context)
        return relayed(pb.AdminServiceCreateTokenResponse, resp)

    def RevokeToken(
        self, request: pb.AdminServiceRevokeTokenRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceRevokeTokenResponse:
        self._in_own_workspace(calls.REVOKE_TOKEN, request, context)
        # At once on this gateway; others hear of it through the revocation stream.
        self.auth.cache.flush()
        return pb.AdminServiceRevokeTokenResponse()

    def RotateToken(
        self, request: pb.AdminServiceRotateTokenRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceRotateTokenResponse:
        resp = self._in_own_workspace(calls.ROTATE_TOKEN, request, context)
        # The old token's cached identity carries its former expiry: dropped
        # here at once, on other gateways through the revocation stream.
        self.auth.cache.flush()
        return relayed(pb.AdminServiceRotateTokenResponse, resp)

    def ListTokens(
        self, request: pb.AdminServiceListTokensRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceListTokensResponse:
        owner = self.auth.operator_or_owner(context)
        if owner is None and not (request.member_id or request.workspace_id):
            raise errors.InvalidArgument(
                "member_id", "or workspace_id is required with the operator token"
            )
        if (
            owner is not None
            and request.workspace_id
            and not owner.is_workspace(request.workspace_id)
        ):
            raise errors.PermissionDenied("workspace_id: an owner lists their own workspace's")
        resp = self.peers.as_admin(
            calls.LIST_TOKENS,
            relayed(
                store_pb2.ListTokensRequest,
                request,
                workspace_id=owner.workspace_id if owner else request.workspace_id,
            ),
            owner,
        )
        return relayed(pb.AdminServiceListTokensResponse, resp)

    def ListMembers(
        self, request: store_pb2.ListMembersRequest, context: grpc.ServicerContext
    ) -> store_pb2.ListMembersResponse:
        owner = self.auth.operator_or_owner(context)
        forwarded = store_pb2.ListMembersRequest()
        forwarded.CopyFrom(request)
        if owner is None and not request.workspace:
            raise errors.InvalidArgument("workspace", "is required with the operator token")
        if owner is not None and not request.workspace:
            forwarded.workspace = owner.workspace_id
        # The store holds an owner to their own workspace.
        return self.peers.as_admin(calls.LIST_MEMBERS, forwarded, owner)

    def ListWorkspaces(
        self, request: store_pb2.ListWorkspacesRequest, context: grpc.ServicerContext
    ) -> store_pb2.ListWorkspacesResponse:
        self.auth.operator(context, "this call needs the operator token")
        return self.peers.as_admin(calls.LIST_WORKSPACES, request, None)

    def GetSettings(
        self,
        request: pb.GetSettingsRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetSettingsResponse:
        ident = self.auth.member(context)
        resp = self.peers.as_identity(
            calls.GET_SETTINGS,
            store_pb2.GetWorkspaceSettingsRequest(workspace_id=ident.workspace_id),
            ident,
        )
        return relayed(pb.GetSettingsResponse, resp)

    def UpdateSettings(
        self,
        request: pb.UpdateSettingsRequest,
        context: grpc.ServicerContext,
    ) -> pb.UpdateSettingsResponse:
        ident = self.auth.owner(context, "change its settings")
        who = caller(ident, cpb.PURPOSE_ASSIST)
        resp = self.peers.as_member(
            calls.UPDATE_SETTINGS,
            store_pb2.UpdateWorkspaceSettingsRequest(
                caller=who, settings=request.settings, update_fields=request.update_fields
            ),
            who,
        )
        return relayed(pb.UpdateSettingsResponse, resp)

    def GetStatus(
        self,
        request: pb.GetStatusRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetStatusResponse:
        ident = self.auth.owner(context, "read its status")
        resp = self.peers.as_identity(
            calls.GET_STATUS,
            store_pb2.GetEmbeddingStatusRequest(
                workspace_id=ident.workspace_id, purposes=sorted(ident.purposes)
            ),
            ident,
        )
        return relayed(pb.GetStatusResponse, resp)
