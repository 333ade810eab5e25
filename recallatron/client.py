"""A small client of the gateway, so the CLI, the MCP server, the review page,
scripts and tests need not touch raw stubs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from recallatron.grpcclient import make_channel
from recallatron.protojson import to_message
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc
from recallatron.vocabulary import DEFAULT_PURPOSE

DEFAULT_GATEWAY = "127.0.0.1:7400"

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


def default_gateway() -> str:
    """The gateway address: RECALLATRON_GATEWAY, else the local stack's."""
    return os.environ.get("RECALLATRON_GATEWAY", DEFAULT_GATEWAY)


# The graph's claims, relations and aliases in the agents' JSON shape
# (recallatron/tools.py), proto field names.
GraphItems = Sequence[dict[str, Any]]


class Client:
    def __init__(
        self, address: str, token: str, timeout: float = 10.0, ca_file: str | None = None
    ) -> None:
        # TLS when a CA is given (or RECALLATRON_TLS_CA_FILE is set).
        self.channel = make_channel(address, ca_file=ca_file)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.admin = gateway_pb2_grpc.AdminServiceStub(self.channel)
        self.review = gateway_pb2_grpc.ReviewServiceStub(self.channel)
        self.token = token
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def _md(self) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {self.token}"),)

    def call(
        self,
        stub_method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None = None,
    ) -> Resp:
        return stub_method(request, metadata=self._md(), timeout=timeout or self.timeout)

    def ask(
        self,
        method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: type[Req],
        timeout: float | None = None,
        /,
        **f: Any,
    ) -> Resp:
        """Calls ``method`` with the request its fields give by proto name, in
        plain values (recallatron/protojson.py): an enum's name, an RFC 3339
        time, "workspace" or a member id; a field None or left out stays unset."""
        return self.call(method, to_message(request, f), timeout)

    # -- tools -------------------------------------------------------------

    def remember(
        self,
        title: str,
        body: str = "",
        kind: str = "note",
        *,
        audience_to: str | None = None,
        purposes: Sequence[str] = (),
        mention_names: Sequence[str] = (),
        mention_ids: Sequence[str] = (),
        about: Sequence[str] = (),
        confidence: float | None = None,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        claims: GraphItems = (),
        relations: GraphItems = (),
        aliases: GraphItems = (),
        episode_id: str = "",
    ) -> pb.RememberResponse:
        return self.ask(
            self.memory.Remember,
            pb.RememberRequest,
            request_id=request_id or str(uuid.uuid4()),
            kind=kind,
            title=title,
            body=body,
            confidence=confidence,
            audience=audience_to,
            purposes=purposes,
            mentions=[{"name": n} for n in mention_names] + [{"entity_id": e} for e in mention_ids],
            about_ids=about,
            purpose=purpose,
            claims=claims,
            relations=relations,
            aliases=aliases,
            episode_id=episode_id,
        )

    def read(self, ids: Sequence[str], purpose: str = DEFAULT_PURPOSE) -> pb.ReadResponse:
        return self.ask(self.memory.Read, pb.ReadRequest, ids=ids, purpose=purpose)

    def recall(
        self,
        query: str,
        mode: str | None = None,
        limit: int = 10,
        purpose: str = DEFAULT_PURPOSE,
        kinds: Sequence[str] = (),
        mention_ids: Sequence[str] = (),
        include_superseded: bool = False,
        skip_rerank: bool = False,
        timeout: float | None = None,
        include_history: bool = False,
    ) -> pb.RecallResponse:
        return self.ask(
            self.memory.Recall,
            pb.RecallRequest,
            timeout,
            query=query,
            mode=mode or None,
            limit=limit,
            purpose=purpose,
            filters={
                "kinds": kinds,
                "mention_entity_ids": mention_ids,
                "include_superseded": include_superseded,
            },
            skip_rerank=skip_rerank,
            include_history=include_history,
        )

    def derive(
        self,
        sources: Sequence[str],
        title: str,
        body: str = "",
        kind: str = "summary",
        *,
        audience_to: str | None = None,
        purposes: Sequence[str] = (),
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        claims: GraphItems = (),
        relations: GraphItems = (),
        aliases: GraphItems = (),
    ) -> pb.DeriveResponse:
        return self.ask(
            self.memory.Derive,
            pb.DeriveRequest,
            request_id=request_id or str(uuid.uuid4()),
            source_ids=sources,
            kind=kind,
            title=title,
            body=body,
            audience=audience_to,
            purposes=purposes,
            purpose=purpose,
            claims=claims,
            relations=relations,
            aliases=aliases,
        )

    def correct(
        self,
        memory_id: str,
        expected_revision: int,
        reason: str,
        *,
        title: str | None = None,
        body: str | None = None,
        confidence: float | None = None,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        claims: GraphItems = (),
        relations: GraphItems = (),
        aliases: GraphItems = (),
        replace_claims: bool = False,
    ) -> pb.CorrectResponse:
        return self.ask(
            self.memory.Correct,
            pb.CorrectRequest,
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            expected_revision=expected_revision,
            title=title,
            body=body,
            confidence=confidence,
            reason=reason,
            purpose=purpose,
            claims=claims,
            relations=relations,
            aliases=aliases,
            replace_claims=replace_claims,
        )

    def supersede(
        self,
        memory_id: str,
        expected_revision: int,
        title: str,
        body: str = "",
        kind: str = "note",
        reason: str = "",
        *,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        claims: GraphItems = (),
        relations: GraphItems = (),
        aliases: GraphItems = (),
        replace_claims: bool = False,
    ) -> pb.SupersedeResponse:
        return self.ask(
            self.memory.Supersede,
            pb.SupersedeRequest,
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            expected_revision=expected_revision,
            kind=kind,
            title=title,
            body=body,
            reason=reason,
            purpose=purpose,
            claims=claims,
            relations=relations,
            aliases=aliases,
            replace_claims=replace_claims,
        )

    def lookup(
        self,
        name: str,
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        include_history: bool = False,
    ) -> pb.LookupResponse:
        return self.ask(
            self.memory.Lookup,
            pb.LookupRequest,
            name=name,
            as_of=as_of or None,
            purpose=purpose,
            include_history=include_history,
        )

    def neighbors(
        self,
        entity_id: str,
        hops: int = 1,
        predicates: Sequence[str] = (),
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        timeout: float | None = None,
    ) -> pb.NeighborsResponse:
        return self.ask(
            self.memory.Neighbors,
            pb.NeighborsRequest,
            timeout,
            entity_id=entity_id,
            hops=hops,
            predicates=predicates,
            as_of=as_of or None,
            purpose=purpose,
        )

    def forget(
        self,
        memory_id: str,
        reason: str,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
    ) -> pb.ForgetResponse:
        return self.ask(
            self.memory.Forget,
            pb.ForgetRequest,
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            reason=reason,
            purpose=purpose,
        )

    def capture(
        self,
        text: str,
        *,
        occurred_at: datetime | None = None,
        speaker_member_id: str = "",
        purpose: str = DEFAULT_PURPOSE,
        request_id: str = "",
        episode_id: str = "",
    ) -> pb.CaptureResponse:
        return self.ask(
            self.memory.Capture,
            pb.CaptureRequest,
            request_id=request_id,
            speaker_member_id=speaker_member_id,
            text=text,
            occurred_at=occurred_at,
            purpose=purpose,
            episode_id=episode_id,
        )

    def create_episode(
        self,
        title: str,
        started_at: str,
        ended_at: str | None = None,
        *,
        audience_to: str | None = None,
        purposes: Sequence[str] = (),
        member_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        purpose: str = DEFAULT_PURPOSE,
    ) -> pb.CreateEpisodeResponse:
        return self.ask(
            self.memory.CreateEpisode,
            pb.CreateEpisodeRequest,
            title=title,
            started_at=started_at,
            ended_at=ended_at or None,
            audience=audience_to,
            purposes=purposes,
            member_ids=member_ids,
            entity_ids=entity_ids,
            purpose=purpose,
        )

    def timeline(
        self,
        entity_id: str = "",
        episode_id: str = "",
        *,
        start: str | None = None,
        end: str | None = None,
        page_token: str = "",
        purpose: str = DEFAULT_PURPOSE,
    ) -> pb.TimelineResponse:
        return self.ask(
            self.memory.Timeline,
            pb.TimelineRequest,
            entity_id=entity_id,
            episode_id=episode_id,
            page_token=page_token,
            purpose=purpose,
            **{"from": start or None, "to": end or None},
        )

    # -- dedup review ------------------------------------------------------

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
        self, first_id: str, second_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.DismissDuplicatePairResponse:
        return self.ask(
            self.review.DismissDuplicatePair,
            pb.DismissDuplicatePairRequest,
            first_id=first_id,
            second_id=second_id,
            purpose=purpose,
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
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListEntityMergesResponse:
        return self.ask(
            self.review.ListEntityMerges, pb.ListEntityMergesRequest, purpose=purpose, limit=limit
        )

    # -- admin -------------------------------------------------------------

    def create_workspace(
        self, slug: str, server: str = ""
    ) -> pb.AdminServiceCreateWorkspaceResponse:
        """``server``: a configured server's name; empty lets the placement
        policy pick (docs/servers.md)."""
        return self.call(
            self.admin.CreateWorkspace,
            pb.AdminServiceCreateWorkspaceRequest(slug=slug, server=server),
        )

    def create_member(
        self, workspace_id: str, handle: str, owner: bool = False
    ) -> pb.AdminServiceCreateMemberResponse:
        return self.ask(
            self.admin.CreateMember,
            pb.AdminServiceCreateMemberRequest,
            workspace_id=workspace_id,
            handle=handle,
            role="owner" if owner else "member",
        )

    def create_token(
        self,
        member_id: str,
        label: str = "",
        purposes: Sequence[str] = (),
        read_only: bool = False,
    ) -> pb.AdminServiceCreateTokenResponse:
        """A token; scoped to ``purposes`` (empty: all) and to the read-only calls."""
        return self.ask(
            self.admin.CreateToken,
            pb.AdminServiceCreateTokenRequest,
            member_id=member_id,
            label=label,
            purposes=purposes,
            read_only=read_only,
        )

    def revoke_token(self, token_id: str) -> None:
        self.call(self.admin.RevokeToken, pb.AdminServiceRevokeTokenRequest(token_id=token_id))

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
        import time

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


def is_status(exc: BaseException, code: grpc.StatusCode) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() == code
