"""The public API: authentication, request checks, the seven tools and the
admin calls, forwarded to store and rank with deadlines."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from recallatron import convert, deadline, errors, internal_auth
from recallatron.grpcclient import peer_channel, relay, unary
from recallatron.grpcserver import current_method
from recallatron.tools import TOOLS
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc, rank_pb2, rank_pb2_grpc, store_pb2, store_pb2_grpc
from recallatron.vocabulary import (
    DEFAULT_RECALL_LIMIT,
    KIND,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_TURN_CHARS,
    MODE,
    PURPOSE,
)
from services.gateway import capture, scopes
from services.gateway.authcache import AuthCache, Identity
from services.gateway.ratelimit import FailureLimiter, RateLimiter
from services.gateway.settings import GatewaySettings

Resp = TypeVar("Resp")
Req = TypeVar("Req", bound=Message)
log = logging.getLogger("recallatron.gateway")

# Clock skew tolerated on a turn's time.
TURN_CLOCK_SKEW = timedelta(minutes=5)


def bearer_token(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata():
        if key == "authorization":
            scheme, _, token = str(value).partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            raise errors.Unauthenticated("authorization: expected 'Bearer <token>'")
    raise errors.Unauthenticated("authorization: missing bearer token")


# Whom an internal call is vouched for (recallatron/internal_auth.py): the
# Caller inside the request (None), a member's identity, the operator, or the
# gateway itself as a service.
Vouch = Identity | str | None
OPERATOR = internal_auth.OPERATOR
SERVICE = internal_auth.SERVICE


class Peers:
    """Stubs of the store and rank services; every call has a deadline and a
    caller assertion signed with the stack's key (the gateway vouches for the
    identity it authenticated), and a peer's error status is relayed unchanged
    (an unreachable peer or a missed deadline becomes UNAVAILABLE)."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.signer = internal_auth.Signer(settings.internal_signing_key(), "gateway")
        self.store_channel = peer_channel(settings.store_target, settings)
        self.store = store_pb2_grpc.StoreServiceStub(self.store_channel)
        # The store methods' names by their stub attribute, for the assertions.
        self._store_names = {
            id(getattr(self.store, m.name)): m.name
            for m in store_pb2.DESCRIPTOR.services_by_name["StoreService"].methods
        }
        self.rank = rank_pb2_grpc.RankServiceStub(peer_channel(settings.rank_target, settings))

    def assertion(self, methods: list[str] | tuple[str, ...], request: Any, vouch: Vouch) -> str:
        """The assertion for one call: for the request's Caller unless ``vouch``
        says otherwise. Only identities the gateway authenticated get here."""
        if vouch == OPERATOR:
            return self.signer.operator(methods)
        if vouch == SERVICE:
            return self.signer.service(methods)
        if isinstance(vouch, Identity):
            who = cpb.Caller(
                workspace_id=vouch.workspace_id,
                member_id=vouch.member_id,
                role=vouch.role,
                purpose=cpb.PURPOSE_ASSIST,
            )
            return self.signer.member(who, methods)
        if vouch is None and request.HasField("caller"):
            return self.signer.member(request.caller, methods)
        raise AssertionError(f"no identity to vouch for in {type(request).__name__}")

    def call(
        self, method: Callable[..., Resp], request: Any, timeout: float, assertion: str = ""
    ) -> Resp:
        # Never longer than our own caller waits, and cancelled if it leaves (design §9).
        try:
            metadata = internal_auth.metadata(assertion) if assertion else None
            return unary(method, request, timeout, metadata)
        except grpc.RpcError as exc:
            raise relay(exc) from None

    def store_call(self, method: Callable[..., Resp], request: Any, vouch: Vouch = None) -> Resp:
        """A call to one of the store stub's methods (``self.store.GetMemories``),
        with the assertion for exactly that method."""
        return self.call(
            method, request, self.settings.store_timeout_seconds, self._for(method, request, vouch)
        )

    def store_future(
        self, method: Any, request: Any, vouch: Vouch = None, assertion: str = ""
    ) -> Any:
        """The same call started in the background (its ``.result()`` later);
        with ``assertion``, that one (good for the method) instead of a new one."""
        return method.future(
            request,
            timeout=deadline.capped(self.settings.store_timeout_seconds),
            metadata=internal_auth.metadata(assertion or self._for(method, request, vouch)),
        )

    def _for(self, method: Any, request: Any, vouch: Vouch) -> str:
        name = self._store_names[id(method)]
        return self.assertion([internal_auth.store_method(name)], request, vouch)


class Auth:
    def __init__(
        self,
        peers: Peers,
        admin_token: str,
        limiter: RateLimiter | None = None,
        cache: AuthCache | None = None,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.peers = peers
        self.admin_token = admin_token
        self.limiter = limiter or RateLimiter(0, 1)
        self.failures = failures or FailureLimiter(0, 1)
        # Off (never live) unless a RevocationWatcher drives it.
        self.cache = cache or AuthCache(0, 0)

    def token(self, context: grpc.ServicerContext) -> str:
        token = bearer_token(context)
        self.limiter.check(token)
        return token

    def member(self, context: grpc.ServicerContext) -> Identity:
        """The member a token belongs to, with the call checked against the
        token's scope."""
        ident = self._identity(context)
        scopes.check_call(ident.purposes, ident.read_only, current_method())
        return ident

    def as_store(self, request: Any, context: grpc.ServicerContext, store_type: type[Req]) -> Req:
        """A request as the store's, for the member the token belongs to (the
        two messages are kept field-compatible; the purpose becomes the
        caller's)."""
        store_request = store_type(caller=caller(self.member(context), request.purpose))
        _copy_fields(request, store_request, exclude={"purpose"})
        return store_request

    def _identity(self, context: grpc.ServicerContext) -> Identity:
        token = self.token(context)
        cached = self.cache.get(token)
        if cached is not None:
            return cached
        # A peer that sent too many unknown tokens is refused before the store is asked.
        self.failures.check(context.peer())
        generation = self.cache.generation()
        try:
            resp = self.peers.store_call(
                self.peers.store.Authenticate, store_pb2.AuthenticateRequest(token=token), SERVICE
            )
        except errors.Relayed as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND.value[0]:
                self.failures.failed(context.peer())
                raise errors.Unauthenticated("authorization: unknown or revoked token") from None
            raise
        identity = Identity(
            resp.workspace_id,
            resp.member_id,
            resp.role,
            frozenset(resp.purposes),
            resp.read_only,
        )
        self.cache.put(token, identity, generation)
        return identity

    def is_operator(self, context: grpc.ServicerContext) -> bool:
        token = self.token(context)
        return bool(self.admin_token) and hmac.compare_digest(token, self.admin_token)

    def operator_or_owner(self, context: grpc.ServicerContext) -> Identity | None:
        """None for the operator; the owner's identity otherwise."""
        if self.is_operator(context):
            return None
        ident = self.member(context)
        if ident.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied("this call needs a workspace owner's token")
        return ident


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


class MemoryServicer(gateway_pb2_grpc.MemoryServiceServicer):
    def __init__(self, peers: Peers, auth: Auth) -> None:
        self.peers = peers
        self.auth = auth

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> pb.RecallResponse:
        ident = self.auth.member(context)
        if not request.query.strip():
            raise errors.InvalidArgument("query", "is required")
        if len(request.query) > MAX_QUERY_CHARS:
            raise errors.InvalidArgument("query", f"at most {MAX_QUERY_CHARS} characters")
        if "\x00" in request.query:
            raise errors.InvalidArgument("query", "must not contain NUL characters")
        if request.limit < 0 or request.limit > MAX_RECALL_LIMIT:
            raise errors.InvalidArgument("limit", f"must lie in [1, {MAX_RECALL_LIMIT}]")
        MODE.parse(request.mode, "mode")
        # History evidence exists only for the workspace owner: for anyone
        # else the flag changes nothing. Searched while rank works.
        history = None
        who = caller(ident, request.purpose)
        if request.include_history and ident.role == cpb.ROLE_OWNER:
            search = store_pb2.SearchHistoryRequest(
                caller=who, query=request.query, limit=request.limit or DEFAULT_RECALL_LIMIT
            )
            history = self.peers.store_future(self.peers.store.SearchHistory, search)
        rank_request = rank_pb2.RankRequest(
            caller=who,
            query=request.query,
            mode=request.mode,
            limit=request.limit or DEFAULT_RECALL_LIMIT,
            filters=request.filters,
            skip_rerank=request.skip_rerank,
        )
        # Good for the rank call, the store and embed calls rank makes with
        # it, and the entity cards asked for meanwhile.
        assertion = self.peers.assertion(internal_auth.RECALL_METHODS, rank_request, None)
        named = self._named_entities(who, request.query, assertion)
        resp = self.peers.call(
            self.peers.rank.Rank, rank_request, self.peers.settings.rank_timeout_seconds, assertion
        )
        if history is not None:
            pending = history
            # Through peers.call for the same error translation as any call.
            found = self.peers.call(lambda _req, timeout: pending.result(), None, 0)
            resp.outcome.history.extend(found.entries)
        resp.outcome.entities.extend(self._cards(named))
        return pb.RecallResponse(outcome=resp.outcome)

    def _named_entities(self, who: cpb.Caller, query: str, assertion: str) -> Any:
        """The store's entity cards for the names the query contains, asked
        while rank works (with the recall's assertion)."""
        ask = store_pb2.NamedEntitiesRequest(caller=who, text=query)
        return self.peers.store_future(self.peers.store.NamedEntities, ask, assertion=assertion)

    @staticmethod
    def _cards(pending: Any) -> list[cpb.EntityCard]:
        # Cards sit beside the ranked memories: without them recall still
        # answers (design §5, degrade, never refuse).
        try:
            return list(pending.result().entities)
        except grpc.RpcError as exc:
            log.warning("entity cards unavailable", extra={"code": str(exc.code())})
            return []

    def Read(self, request: pb.ReadRequest, context: grpc.ServicerContext) -> pb.ReadResponse:
        ident = self.auth.member(context)
        resp = self.peers.store_call(
            self.peers.store.GetMemories,
            store_pb2.GetMemoriesRequest(
                caller=caller(ident, request.purpose), ids=request.ids, with_provenance=True
            ),
        )
        if resp.not_found_ids:
            # Not visible reads exactly like not there (design §4).
            raise errors.NotFound(f"ids: not found: {', '.join(resp.not_found_ids)}")
        return pb.ReadResponse(memories=resp.memories)

    def Remember(
        self,
        request: pb.RememberRequest,
        context: grpc.ServicerContext,
    ) -> pb.RememberResponse:
        store_request = self.auth.as_store(request, context, store_pb2.CreateMemoryRequest)
        resp = self.peers.store_call(self.peers.store.CreateMemory, store_request)
        return pb.RememberResponse(memory=resp.memory, replayed=resp.replayed)

    def Derive(
        self,
        request: pb.DeriveRequest,
        context: grpc.ServicerContext,
    ) -> pb.DeriveResponse:
        store_request = self.auth.as_store(request, context, store_pb2.DeriveMemoryRequest)
        resp = self.peers.store_call(self.peers.store.DeriveMemory, store_request)
        return pb.DeriveResponse(memory=resp.memory, replayed=resp.replayed)

    def Correct(
        self,
        request: pb.CorrectRequest,
        context: grpc.ServicerContext,
    ) -> pb.CorrectResponse:
        store_request = self.auth.as_store(request, context, store_pb2.CorrectMemoryRequest)
        resp = self.peers.store_call(self.peers.store.CorrectMemory, store_request)
        return pb.CorrectResponse(memory=resp.memory, replayed=resp.replayed)

    def Supersede(
        self,
        request: pb.SupersedeRequest,
        context: grpc.ServicerContext,
    ) -> pb.SupersedeResponse:
        store_request = self.auth.as_store(request, context, store_pb2.SupersedeMemoryRequest)
        resp = self.peers.store_call(self.peers.store.SupersedeMemory, store_request)
        return pb.SupersedeResponse(
            memory=resp.memory, superseded=resp.superseded, replayed=resp.replayed
        )

    def Forget(
        self,
        request: pb.ForgetRequest,
        context: grpc.ServicerContext,
    ) -> pb.ForgetResponse:
        store_request = self.auth.as_store(request, context, store_pb2.ForgetMemoryRequest)
        resp = self.peers.store_call(self.peers.store.ForgetMemory, store_request)
        return pb.ForgetResponse(id=resp.id, forgotten_at=resp.forgotten_at, replayed=resp.replayed)

    def Capture(
        self,
        request: pb.CaptureRequest,
        context: grpc.ServicerContext,
    ) -> pb.CaptureResponse:
        ident = self.auth.member(context)
        # Checked before deciding: a turn not worth storing is still refused
        # for a bad purpose.
        PURPOSE.parse(request.purpose, "purpose")
        scopes.check_purpose(ident.purposes, ident.read_only, request.purpose or cpb.PURPOSE_ASSIST)
        if request.speaker_member_id not in ("", ident.member_id):
            # An agent captures the turns of the member it acts for, nobody else's.
            raise errors.InvalidArgument(
                "speaker_member_id", "must be empty or the member whose token this is"
            )
        if len(request.text) > MAX_TURN_CHARS or "\x00" in request.text:
            raise errors.InvalidArgument(
                "text", f"at most {MAX_TURN_CHARS} characters, no NUL characters"
            )
        occurred = request.occurred_at.ToDatetime(UTC) if request.HasField("occurred_at") else None
        if occurred is not None and occurred > datetime.now(UTC) + TURN_CLOCK_SKEW:
            raise errors.InvalidArgument("occurred_at", "must not lie in the future")
        said = capture.decide(request.text)
        if not said.store:
            return pb.CaptureResponse(stored=False, reason=said.reason)
        audience = (
            cpb.Audience(workspace=True)
            if said.audience == capture.WORKSPACE
            else cpb.Audience(member_id=ident.member_id)
        )
        resp = self.peers.store_call(
            self.peers.store.CreateMemory,
            store_pb2.CreateMemoryRequest(
                caller=caller(ident, request.purpose),
                request_id=request.request_id
                or capture.request_id_for(ident.member_id, request.text, occurred),
                kind=KIND.value(said.kind),
                title=said.title,
                body=capture.body_with_time(said.body, occurred),
                audience=audience,
                purposes=[request.purpose or cpb.PURPOSE_ASSIST],
                episode_id=request.episode_id,
                captured_at=request.occurred_at
                if request.HasField("occurred_at")
                else convert.timestamp(datetime.now(UTC)),
            ),
        )
        return pb.CaptureResponse(stored=True, reason=said.reason, memory=resp.memory)

    def Lookup(self, request: pb.LookupRequest, context: grpc.ServicerContext) -> pb.LookupResponse:
        store_request = self.auth.as_store(request, context, store_pb2.LookupEntitiesRequest)
        resp = self.peers.store_call(self.peers.store.LookupEntities, store_request)
        return pb.LookupResponse(entities=resp.entities)

    def Neighbors(
        self, request: pb.NeighborsRequest, context: grpc.ServicerContext
    ) -> pb.NeighborsResponse:
        store_request = self.auth.as_store(request, context, store_pb2.EntityNeighborsRequest)
        resp = self.peers.store_call(self.peers.store.EntityNeighbors, store_request)
        return pb.NeighborsResponse(nodes=resp.nodes, edges=resp.edges, truncated=resp.truncated)

    def CreateEpisode(
        self, request: pb.CreateEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.CreateEpisodeResponse:
        store_request = self.auth.as_store(
            request, context, store_pb2.StoreServiceCreateEpisodeRequest
        )
        resp = self.peers.store_call(self.peers.store.CreateEpisode, store_request)
        return pb.CreateEpisodeResponse(episode_id=resp.episode_id)

    def Timeline(
        self, request: pb.TimelineRequest, context: grpc.ServicerContext
    ) -> pb.TimelineResponse:
        store_request = self.auth.as_store(request, context, store_pb2.StoreServiceTimelineRequest)
        resp = self.peers.store_call(self.peers.store.Timeline, store_request)
        return pb.TimelineResponse(events=resp.events, next_page_token=resp.next_page_token)

    def DescribeTools(
        self,
        request: pb.DescribeToolsRequest,
        context: grpc.ServicerContext,
    ) -> pb.DescribeToolsResponse:
        return pb.DescribeToolsResponse(
            tools=[
                pb.ToolDescription(
                    name=t.name, description=t.description, input_schema_json=t.schema_json()
                )
                for t in TOOLS
            ]
        )


def _copy_fields(src: Any, dst: Any, exclude: set[str]) -> None:
    """Copies the fields both messages share by name (the tool request and its
    store counterpart are kept field-compatible)."""
    for fd, value in src.ListFields():
        if fd.name in exclude:
            continue
        target = getattr(dst, fd.name)
        if fd.is_repeated:
            target.extend(value)
        elif fd.message_type is not None:
            target.CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


class AdminServicer(gateway_pb2_grpc.AdminServiceServicer):
    def __init__(self, peers: Peers, auth: Auth) -> None:
        self.peers = peers
        self.auth = auth

    def CreateWorkspace(
        self, request: pb.AdminServiceCreateWorkspaceRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateWorkspaceResponse:
        if not self.auth.is_operator(context):
            raise errors.PermissionDenied("creating a workspace needs the operator token")
        resp = self.peers.store_call(
            self.peers.store.CreateWorkspace,
            store_pb2.CreateWorkspaceRequest(slug=request.slug, server=request.server),
            OPERATOR,
        )
        return pb.AdminServiceCreateWorkspaceResponse(workspace=resp.workspace)

    def CreateMember(
        self, request: pb.AdminServiceCreateMemberRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateMemberResponse:
        owner = self.auth.operator_or_owner(context)
        workspace_id = request.workspace_id
        if owner is not None:
            if workspace_id and workspace_id != owner.workspace_id:
                raise errors.NotFound("workspace_id: workspace not found")
            workspace_id = owner.workspace_id
        resp = self.peers.store_call(
            self.peers.store.CreateMember,
            store_pb2.CreateMemberRequest(
                workspace_id=workspace_id, handle=request.handle, role=request.role
            ),
            owner or OPERATOR,
        )
        return pb.AdminServiceCreateMemberResponse(member=resp.member)

    def CreateToken(
        self, request: pb.AdminServiceCreateTokenRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceCreateTokenResponse:
        owner = self.auth.operator_or_owner(context)
        resp = self.peers.store_call(
            self.peers.store.CreateToken,
            store_pb2.CreateTokenRequest(
                member_id=request.member_id,
                label=request.label,
                workspace_id=owner.workspace_id if owner else "",
                purposes=request.purposes,
                read_only=request.read_only,
            ),
            owner or OPERATOR,
        )
        return pb.AdminServiceCreateTokenResponse(token=resp.token, token_id=resp.token_id)

    def RevokeToken(
        self, request: pb.AdminServiceRevokeTokenRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceRevokeTokenResponse:
        owner = self.auth.operator_or_owner(context)
        self.peers.store_call(
            self.peers.store.RevokeToken,
            store_pb2.RevokeTokenRequest(
                token_id=request.token_id, workspace_id=owner.workspace_id if owner else ""
            ),
            owner or OPERATOR,
        )
        # At once on this gateway; others hear of it through the revocation stream.
        self.auth.cache.flush()
        return pb.AdminServiceRevokeTokenResponse()

    def GetSettings(
        self,
        request: pb.GetSettingsRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetSettingsResponse:
        ident = self.auth.member(context)
        resp = self.peers.store_call(
            self.peers.store.GetWorkspaceSettings,
            store_pb2.GetWorkspaceSettingsRequest(workspace_id=ident.workspace_id),
            ident,
        )
        return pb.GetSettingsResponse(settings=resp.settings)

    def UpdateSettings(
        self,
        request: pb.UpdateSettingsRequest,
        context: grpc.ServicerContext,
    ) -> pb.UpdateSettingsResponse:
        ident = self.auth.member(context)
        if ident.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied("only a workspace owner may change its settings")
        resp = self.peers.store_call(
            self.peers.store.UpdateWorkspaceSettings,
            store_pb2.UpdateWorkspaceSettingsRequest(
                caller=caller(ident, cpb.PURPOSE_ASSIST),
                settings=request.settings,
                update_fields=request.update_fields,
            ),
        )
        return pb.UpdateSettingsResponse(settings=resp.settings)

    def GetStatus(
        self,
        request: pb.GetStatusRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetStatusResponse:
        ident = self.auth.member(context)
        if ident.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied("only a workspace owner may read its status")
        resp = self.peers.store_call(
            self.peers.store.GetEmbeddingStatus,
            store_pb2.GetEmbeddingStatusRequest(workspace_id=ident.workspace_id),
            ident,
        )
        return pb.GetStatusResponse(
            memories=resp.memories,
            embedded=resp.embedded,
            pending=resp.pending,
            parked=resp.parked,
            parked_reasons=resp.parked_reasons,
        )
