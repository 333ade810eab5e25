"""A small client of the gateway, so the CLI, the MCP server, the review page,
scripts and tests need not touch raw stubs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron.grpcclient import make_channel
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc
from recallatron.vocabulary import DEFAULT_PURPOSE, KIND, MODE, PURPOSE

DEFAULT_GATEWAY = "127.0.0.1:7400"


def default_gateway() -> str:
    """The gateway address: RECALLATRON_GATEWAY, else the local stack's."""
    return os.environ.get("RECALLATRON_GATEWAY", DEFAULT_GATEWAY)


def audience(value: str | None) -> cpb.Audience | None:
    """'workspace', a member id, or None for the default (only the caller)."""
    if value is None:
        return None
    if value == "workspace":
        return cpb.Audience(workspace=True)
    return cpb.Audience(member_id=value)


def mentions(names: Sequence[str] = (), entity_ids: Sequence[str] = ()) -> list[cpb.MentionInput]:
    return [cpb.MentionInput(name=n) for n in names] + [
        cpb.MentionInput(entity_id=e) for e in entity_ids
    ]


# -- the graph's JSON shapes (recallatron/tools.py) as messages --------------------

GraphItems = Sequence[dict[str, Any]]


def rfc3339(value: str, field: str) -> datetime:
    """An RFC 3339 time with its offset ("2026-05-01T09:00:00Z")."""
    try:
        at = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: not an RFC 3339 time: {value!r:.60}") from None
    if at.tzinfo is None:
        raise ValueError(f"{field}: an RFC 3339 time needs its offset (Z or +hh:mm)")
    return at


def _ts(value: str, field: str) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(rfc3339(value, field))
    return ts


def entity(item: dict[str, Any]) -> cpb.MentionInput:
    """{entity_id} or {name, type?}."""
    if "entity_id" in item:
        return cpb.MentionInput(entity_id=item["entity_id"], type=item.get("type", ""))
    return cpb.MentionInput(name=item.get("name", ""), type=item.get("type", ""))


def _span(msg: Any, item: dict[str, Any], where: str) -> None:
    for key in ("valid_from", "valid_until"):
        if item.get(key):
            getattr(msg, key).CopyFrom(_ts(item[key], f"{where}.{key}"))
    if item.get("confidence") is not None:
        msg.confidence = float(item["confidence"])


def claims(items: GraphItems) -> list[cpb.ClaimInput]:
    out = []
    for i, item in enumerate(items):
        msg = cpb.ClaimInput(
            entity=entity(item.get("entity", {})),
            attribute=item.get("attribute", ""),
            value=item.get("value", ""),
        )
        _span(msg, item, f"claims[{i}]")
        out.append(msg)
    return out


def relations(items: GraphItems) -> list[cpb.RelationInput]:
    out = []
    for i, item in enumerate(items):
        msg = cpb.RelationInput(
            subject=entity(item.get("subject", {})),
            predicate=item.get("predicate", ""),
            object=entity(item.get("object", {})),
        )
        _span(msg, item, f"relations[{i}]")
        out.append(msg)
    return out


def aliases(items: GraphItems) -> list[cpb.AliasInput]:
    return [
        cpb.AliasInput(entity=entity(item.get("entity", {})), alias=item.get("alias", ""))
        for item in items
    ]


def _graph(
    req: Any, claim_items: GraphItems, relation_items: GraphItems, alias_items: GraphItems
) -> None:
    req.claims.extend(claims(claim_items))
    req.relations.extend(relations(relation_items))
    req.aliases.extend(aliases(alias_items))


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

    def _md(self) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.token}")]

    def call(self, stub_method: Any, request: Any, timeout: float | None = None) -> Any:
        return stub_method(request, metadata=self._md(), timeout=timeout or self.timeout)

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
        req = pb.RememberRequest(
            request_id=request_id or str(uuid.uuid4()),
            kind=KIND.value(kind),
            title=title,
            body=body,
            purposes=[PURPOSE.value(p) for p in purposes],
            mentions=mentions(mention_names, mention_ids),
            about_ids=list(about),
            purpose=PURPOSE.value(purpose),
            episode_id=episode_id,
        )
        aud = audience(audience_to)
        if aud is not None:
            req.audience.CopyFrom(aud)
        if confidence is not None:
            req.confidence = confidence
        _graph(req, claims, relations, aliases)
        return self.call(self.memory.Remember, req)

    def read(self, ids: Sequence[str], purpose: str = DEFAULT_PURPOSE) -> pb.ReadResponse:
        return self.call(
            self.memory.Read, pb.ReadRequest(ids=list(ids), purpose=PURPOSE.value(purpose))
        )

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
        req = pb.RecallRequest(
            query=query,
            mode=MODE.value(mode) if mode else cpb.RECALL_MODE_UNSPECIFIED,
            limit=limit,
            purpose=PURPOSE.value(purpose),
            filters=cpb.RecallFilters(
                kinds=[KIND.value(k) for k in kinds],
                mention_entity_ids=list(mention_ids),
                include_superseded=include_superseded,
            ),
            skip_rerank=skip_rerank,
            include_history=include_history,
        )
        return self.call(self.memory.Recall, req, timeout)

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
        req = pb.DeriveRequest(
            request_id=request_id or str(uuid.uuid4()),
            source_ids=list(sources),
            kind=KIND.value(kind),
            title=title,
            body=body,
            purposes=[PURPOSE.value(p) for p in purposes],
            purpose=PURPOSE.value(purpose),
        )
        aud = audience(audience_to)
        if aud is not None:
            req.audience.CopyFrom(aud)
        _graph(req, claims, relations, aliases)
        return self.call(self.memory.Derive, req)

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
        req = pb.CorrectRequest(
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            expected_revision=expected_revision,
            reason=reason,
            purpose=PURPOSE.value(purpose),
        )
        if title is not None:
            req.title = title
        if body is not None:
            req.body = body
        if confidence is not None:
            req.confidence = confidence
        _graph(req, claims, relations, aliases)
        req.replace_claims = replace_claims
        return self.call(self.memory.Correct, req)

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
        req = pb.SupersedeRequest(
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            expected_revision=expected_revision,
            kind=KIND.value(kind),
            title=title,
            body=body,
            reason=reason,
            purpose=PURPOSE.value(purpose),
        )
        _graph(req, claims, relations, aliases)
        req.replace_claims = replace_claims
        return self.call(self.memory.Supersede, req)

    def lookup(
        self,
        name: str,
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        include_history: bool = False,
    ) -> pb.LookupResponse:
        req = pb.LookupRequest(
            name=name, purpose=PURPOSE.value(purpose), include_history=include_history
        )
        if as_of:
            req.as_of.CopyFrom(_ts(as_of, "as_of"))
        return self.call(self.memory.Lookup, req)

    def neighbors(
        self,
        entity_id: str,
        hops: int = 1,
        predicates: Sequence[str] = (),
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        timeout: float | None = None,
    ) -> pb.NeighborsResponse:
        req = pb.NeighborsRequest(
            entity_id=entity_id,
            hops=hops,
            predicates=list(predicates),
            purpose=PURPOSE.value(purpose),
        )
        if as_of:
            req.as_of.CopyFrom(_ts(as_of, "as_of"))
        return self.call(self.memory.Neighbors, req, timeout)

    def forget(
        self,
        memory_id: str,
        reason: str,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
    ) -> pb.ForgetResponse:
        req = pb.ForgetRequest(
            request_id=request_id or str(uuid.uuid4()),
            id=memory_id,
            reason=reason,
            purpose=PURPOSE.value(purpose),
        )
        return self.call(self.memory.Forget, req)

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
        req = pb.CaptureRequest(
            request_id=request_id,
            speaker_member_id=speaker_member_id,
            text=text,
            purpose=PURPOSE.value(purpose),
            episode_id=episode_id,
        )
        if occurred_at is not None:
            req.occurred_at.FromDatetime(occurred_at)
        return self.call(self.memory.Capture, req)

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
        req = pb.CreateEpisodeRequest(
            title=title,
            purposes=[PURPOSE.value(p) for p in purposes],
            member_ids=list(member_ids),
            entity_ids=list(entity_ids),
            purpose=PURPOSE.value(purpose),
        )
        req.started_at.CopyFrom(_ts(started_at, "started_at"))
        if ended_at:
            req.ended_at.CopyFrom(_ts(ended_at, "ended_at"))
        aud = audience(audience_to)
        if aud is not None:
            req.audience.CopyFrom(aud)
        return self.call(self.memory.CreateEpisode, req)

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
        req = pb.TimelineRequest(
            entity_id=entity_id,
            episode_id=episode_id,
            page_token=page_token,
            purpose=PURPOSE.value(purpose),
        )
        if start:
            getattr(req, "from").CopyFrom(_ts(start, "from"))
        if end:
            req.to.CopyFrom(_ts(end, "to"))
        return self.call(self.memory.Timeline, req)

    # -- dedup review ------------------------------------------------------

    def duplicate_pairs(
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListDuplicatePairsResponse:
        return self.call(
            self.review.ListDuplicatePairs,
            pb.ListDuplicatePairsRequest(purpose=PURPOSE.value(purpose), limit=limit),
        )

    def dismiss_pair(
        self, first_id: str, second_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.DismissDuplicatePairResponse:
        return self.call(
            self.review.DismissDuplicatePair,
            pb.DismissDuplicatePairRequest(
                first_id=first_id, second_id=second_id, purpose=PURPOSE.value(purpose)
            ),
        )

    def entity_pairs(
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListEntityPairsResponse:
        return self.call(
            self.review.ListEntityPairs,
            pb.ListEntityPairsRequest(purpose=PURPOSE.value(purpose), limit=limit),
        )

    def merge_entities(
        self, kept_id: str, merged_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.MergeEntitiesResponse:
        return self.call(
            self.review.MergeEntities,
            pb.MergeEntitiesRequest(
                kept_id=kept_id, merged_id=merged_id, purpose=PURPOSE.value(purpose)
            ),
        )

    def keep_entities_apart(
        self, first_id: str, second_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.KeepEntitiesApartResponse:
        return self.call(
            self.review.KeepEntitiesApart,
            pb.KeepEntitiesApartRequest(
                first_id=first_id, second_id=second_id, purpose=PURPOSE.value(purpose)
            ),
        )

    def undo_entity_merge(
        self, merge_id: str, purpose: str = DEFAULT_PURPOSE
    ) -> pb.UndoEntityMergeResponse:
        return self.call(
            self.review.UndoEntityMerge,
            pb.UndoEntityMergeRequest(merge_id=merge_id, purpose=PURPOSE.value(purpose)),
        )

    def entity_merges(
        self, purpose: str = DEFAULT_PURPOSE, limit: int = 0
    ) -> pb.ListEntityMergesResponse:
        return self.call(
            self.review.ListEntityMerges,
            pb.ListEntityMergesRequest(purpose=PURPOSE.value(purpose), limit=limit),
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
        return self.call(
            self.admin.CreateMember,
            pb.AdminServiceCreateMemberRequest(
                workspace_id=workspace_id,
                handle=handle,
                role=cpb.ROLE_OWNER if owner else cpb.ROLE_MEMBER,
            ),
        )

    def create_token(
        self,
        member_id: str,
        label: str = "",
        purposes: Sequence[str] = (),
        read_only: bool = False,
    ) -> pb.AdminServiceCreateTokenResponse:
        """A token; scoped to ``purposes`` (empty: all) and to the read-only calls."""
        return self.call(
            self.admin.CreateToken,
            pb.AdminServiceCreateTokenRequest(
                member_id=member_id,
                label=label,
                purposes=[PURPOSE.value(p) for p in purposes],
                read_only=read_only,
            ),
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
        from recallatron.v1 import store_pb2

        settings = store_pb2.WorkspaceSettings()
        for key, value in changes.items():
            if key == "default_recall_mode":
                value = MODE.value(value)
            setattr(settings, key, value)
        return self.call(
            self.admin.UpdateSettings,
            pb.UpdateSettingsRequest(settings=settings, update_fields=list(changes)),
        )


def is_status(exc: BaseException, code: grpc.StatusCode) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() == code
