"""The admin calls that end something: deleting a workspace (the operator
token) and removing a member (the operator, or an owner of the workspace).
Both revoke tokens in the store, which publishes each revocation; this
gateway empties its cache at once and the others on hearing of it."""

from __future__ import annotations

from typing import Any

import grpc

from recallatron import errors
from recallatron.peer import Peer, method
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron.v1 import store_pb2 as spb
from services.gateway.authcache import Identity
from services.gateway.peers import Peers, relayed

_STORE = store_pb2.DESCRIPTOR.services_by_name["StoreService"]
DELETE_WORKSPACE = method(
    _STORE, "DeleteWorkspace", spb.DeleteWorkspaceRequest, spb.DeleteWorkspaceResponse
)
REMOVE_MEMBER = method(_STORE, "RemoveMember", spb.RemoveMemberRequest, spb.RemoveMemberResponse)

# Dropping a database (its checkpoint) or erasing many memories takes longer
# than a tool call: the store is given this long (the caller's deadline still
# bounds it).
LONG_CALL_SECONDS = 120.0

# The request's enum as the store names it.
PRIVATE_MEMORIES = {
    pb.PRIVATE_MEMORIES_ERASE: "erase",
    pb.PRIVATE_MEMORIES_TRANSFER: "transfer",
}


class Leaving:
    """Mixed into the gateway's AdminServicer (services/gateway/server.py)."""

    peers: Peers
    # services/gateway/auth.py Auth: typed loosely here, as the module above it defines it.
    auth: Any
    _long: Peer | None = None

    def _store(self) -> Peer:
        """The store, with the long deadline of these calls."""
        if self._long is None:
            self._long = Peer(self.peers.store_channel, LONG_CALL_SECONDS, "the store")
        return self._long

    def DeleteWorkspace(
        self, request: pb.AdminServiceDeleteWorkspaceRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceDeleteWorkspaceResponse:
        self.auth.operator(context, "deleting a workspace needs the operator token")
        resp = self.peers.as_admin(
            DELETE_WORKSPACE,
            spb.DeleteWorkspaceRequest(workspace=request.workspace, confirm=request.confirm),
            None,
            self._store(),
        )
        self.auth.cache.flush()
        return relayed(pb.AdminServiceDeleteWorkspaceResponse, resp)

    def RemoveMember(
        self, request: pb.AdminServiceRemoveMemberRequest, context: grpc.ServicerContext
    ) -> pb.AdminServiceRemoveMemberResponse:
        owner: Identity | None = self.auth.operator_or_owner(context)
        mode = PRIVATE_MEMORIES.get(request.private_memories)
        if mode is None:
            raise errors.InvalidArgument(
                "private_memories", "must be PRIVATE_MEMORIES_ERASE or PRIVATE_MEMORIES_TRANSFER"
            )
        if owner is not None and owner.is_member(request.member_id):
            raise errors.InvalidArgument(
                "member_id", "an owner cannot remove themselves; another owner or the operator can"
            )
        resp = self.peers.as_admin(
            REMOVE_MEMBER,
            spb.RemoveMemberRequest(
                member_id=request.member_id,
                workspace_id=owner.workspace_id if owner else "",
                private_memories=mode,
                transfer_to=request.transfer_to,
            ),
            owner,
            self._store(),
        )
        self.auth.cache.flush()
        return relayed(pb.AdminServiceRemoveMemberResponse, resp)


__all__ = ["DELETE_WORKSPACE", "REMOVE_MEMBER", "Leaving"]
