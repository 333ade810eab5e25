"""The gateway's peers, store and rank, and the methods it calls on them,
each with its message types (recallatron/peer.py). Every call carries an
assertion for exactly the identity the gateway authenticated."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.message import Message

from recallatron import internal_auth, internal_channels
from recallatron.grpcclient import peer_channel
from recallatron.peer import Method, Peer, Req, Resp, method, methods
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as gpb
from recallatron.v1 import rank_pb2, store_pb2, tools_pb2
from recallatron.v1 import rank_pb2 as rpb
from recallatron.v1 import store_pb2 as spb
from services.gateway.authcache import Identity
from services.gateway.settings import GatewaySettings

Relayed = TypeVar("Relayed", bound=Message)

_STORE = store_pb2.DESCRIPTOR.services_by_name["StoreService"]
AUTHENTICATE = method(_STORE, "Authenticate", spb.AuthenticateRequest, spb.AuthenticateResponse)
CREATE_WORKSPACE = method(
    _STORE, "CreateWorkspace", spb.CreateWorkspaceRequest, spb.CreateWorkspaceResponse
)
CREATE_MEMBER = method(_STORE, "CreateMember", spb.CreateMemberRequest, spb.CreateMemberResponse)
CREATE_TOKEN = method(_STORE, "CreateToken", spb.CreateTokenRequest, spb.CreateTokenResponse)
REVOKE_TOKEN = method(_STORE, "RevokeToken", spb.RevokeTokenRequest, spb.RevokeTokenResponse)
ROTATE_TOKEN = method(_STORE, "RotateToken", spb.RotateTokenRequest, spb.RotateTokenResponse)
LIST_TOKENS = method(_STORE, "ListTokens", spb.ListTokensRequest, spb.ListTokensResponse)
LIST_MEMBERS = method(_STORE, "ListMembers", spb.ListMembersRequest, spb.ListMembersResponse)
LIST_WORKSPACES = method(
    _STORE, "ListWorkspaces", spb.ListWorkspacesRequest, spb.ListWorkspacesResponse
)
GET_SETTINGS = method(
    _STORE,
    "GetWorkspaceSettings",
    spb.GetWorkspaceSettingsRequest,
    spb.GetWorkspaceSettingsResponse,
)
UPDATE_SETTINGS = method(
    _STORE,
    "UpdateWorkspaceSettings",
    spb.UpdateWorkspaceSettingsRequest,
    spb.UpdateWorkspaceSettingsResponse,
)
GET_STATUS = method(
    _STORE, "GetEmbeddingStatus", spb.GetEmbeddingStatusRequest, spb.GetEmbeddingStatusResponse
)
SEARCH_HISTORY = method(
    _STORE, "SearchHistory", spb.SearchHistoryRequest, spb.SearchHistoryResponse
)
GET_MEMORIES = method(_STORE, "GetMemories", spb.GetMemoriesRequest, spb.GetMemoriesResponse)
LIST_DUPLICATE_PAIRS = method(
    _STORE,
    "ListDuplicatePairs",
    spb.StoreServiceListDuplicatePairsRequest,
    spb.StoreServiceListDuplicatePairsResponse,
)
RANK = method(
    rank_pb2.DESCRIPTOR.services_by_name["RankService"], "Rank", rpb.RankRequest, rpb.RankResponse
)
# The tools the store answers with the public messages (tools.proto).
_TOOLS = tools_pb2.DESCRIPTOR.services_by_name["ToolService"]
TOOLS: dict[str, Method[Message, Message]] = methods(_TOOLS)
# Every tool is forwarded from TOOLS; remember is also called by name (capture).
REMEMBER = method(_TOOLS, "Remember", gpb.RememberRequest, gpb.RememberResponse)


class Peers:
    """Store and rank, and the stack's signer: the gateway vouches only for
    identities it authenticated (recallatron/internal_auth.py)."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.signer = internal_auth.Signer(settings.internal_signing_key(), "gateway")
        # An assertion made for one call is bound to its request as it is sent
        # (a recall's, forwarded by rank to several calls, is not).
        self.store_channel = internal_channels.binding_channel(
            peer_channel(settings.store_target, settings), self.signer
        )
        self.store = Peer(self.store_channel, settings.store_timeout_seconds, "the store")
        self.rank = Peer(
            internal_channels.binding_channel(
                peer_channel(settings.rank_target, settings), self.signer
            ),
            settings.rank_timeout_seconds,
            "rank",
        )

    def member(self, who: cpb.Caller, *paths: str) -> str:
        """An assertion for a member (and purpose) the gateway authenticated,
        good for the methods of ``paths`` (``Method.path``)."""
        return self.signer.member(who, paths)

    def identity(self, ident: Identity, *paths: str) -> str:
        """For a member's identity, as a call about the workspace (no purpose)."""
        who = cpb.Caller(
            workspace_id=ident.workspace_id,
            member_id=ident.member_id,
            role=ident.role,
            purpose=cpb.PURPOSE_ASSIST,
        )
        return self.member(who, *paths)

    def operator(self, *paths: str) -> str:
        return self.signer.operator(paths)

    def admin(self, owner: Identity | None, *paths: str) -> str:
        """For an admin call: the owner's identity, or the operator's (None)."""
        return self.identity(owner, *paths) if owner else self.operator(*paths)

    # The store's answer to one call, vouched for that method alone.

    def as_member(self, m: Method[Req, Resp], request: Req, who: cpb.Caller) -> Resp:
        return self.store.call(m, request, self.member(who, m.path))

    def as_identity(self, m: Method[Req, Resp], request: Req, ident: Identity) -> Resp:
        return self.store.call(m, request, self.identity(ident, m.path))

    def as_admin(
        self, m: Method[Req, Resp], request: Req, owner: Identity | None, store: Peer | None = None
    ) -> Resp:
        """As the owner, or the operator (None); on ``store``, a longer deadline's."""
        return (store or self.store).call(m, request, self.admin(owner, m.path))

    def service(self, *paths: str) -> str:
        return self.signer.service(paths)


def relayed(into: type[Relayed], source: Message, **given: Any) -> Relayed:
    """The message ``into`` made of ``source``: every field both messages name,
    as ``source`` set it (a field it left unset stays unset), and ``given`` in
    place of any. Admin calls ask the store with the public request's fields
    under the store's message (``given``: what the gateway vouches for, such
    as the workspace), and answer with the store's fields under the public
    message's name."""
    values = {}
    for f in into.DESCRIPTOR.fields:
        theirs = source.DESCRIPTOR.fields_by_name.get(f.name)
        if theirs is None or (theirs.has_presence and not source.HasField(f.name)):
            continue
        values[f.name] = getattr(source, f.name)
    return into(**{**values, **given})
