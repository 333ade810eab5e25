"""The store's gRPC adapter: translates messages to domain calls and back.
Errors are domain exceptions, mapped to status codes by recallatron.grpcserver."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence

import grpc

from recallatron import convert, embed_input, errors, internal_auth
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2 as pb
from recallatron.v1 import store_pb2_grpc
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    KIND,
    LINK_KIND,
    MODE,
    ORIGIN,
    PURPOSE,
    ROLE,
)
from services.store import control as ctl
from services.store import embedding_job
from services.store.db import Caller
from services.store.dedup import DedupStore
from services.store.entity_merge import EntityMergeStore
from services.store.episodes import EpisodeStore, NewEpisode
from services.store.graph import GraphStore
from services.store.graph_adapter import (
    alias_msg,
    attribute_msg,
    card_msg,
    entity_of,
    graph_of,
    merge_msg,
    nodes_msg,
    pair_msg,
    relation_msg,
)
from services.store.history import HistorySearch
from services.store.memories import MemoryStore, MemoryView, MentionIn, NewMemory, Ref
from services.store.recall import Candidate, Filters, RecallQueries
from services.store.revocations import RevocationFeed
from services.store.timeline import TimelineStore
from services.store.trust import EMPTY, AudienceValue, Trust, _Empty

SETTINGS_FIELDS = {
    "default_recall_mode",
    "dense_floor",
    "rerank_depth",
    "expiry_days",
    "members_may_edit",
}
REVISION_ACTIONS = {
    "create": cpb.REVISION_ACTION_CREATE,
    "correct": cpb.REVISION_ACTION_CORRECT,
    "supersede": cpb.REVISION_ACTION_SUPERSEDE,
    "forget": cpb.REVISION_ACTION_FORGET,
}


def caller_of(msg: cpb.Caller) -> Caller:
    """The request's Caller, which must be exactly the member the call's
    assertion vouches for (recallatron/internal_auth.py)."""
    internal_auth.check_caller(msg)
    purpose = PURPOSE.parse(msg.purpose, "caller.purpose") or DEFAULT_PURPOSE
    if not msg.workspace_id or not msg.member_id:
        raise errors.InvalidArgument("caller", "workspace_id and member_id are required")
    role = "owner" if msg.role == cpb.ROLE_OWNER else "member"
    return Caller(msg.workspace_id, msg.member_id, purpose, role)


def audience_of(msg: cpb.Audience, present: bool) -> AudienceValue | _Empty:
    if not present:
        return EMPTY
    which = msg.WhichOneof("scope")
    if which == "member_id":
        return msg.member_id
    if which == "workspace" and msg.workspace:
        return None
    raise errors.InvalidArgument("audience", "set workspace=true or a member_id")


def mentions_of(items: Sequence[cpb.MentionInput]) -> list[MentionIn]:
    return [entity_of(m, f"mentions[{i}]") for i, m in enumerate(items)]


def new_memory(req: object) -> NewMemory:
    r = req  # a request with the NewMemory fields
    return NewMemory(
        kind=KIND.parse(r.kind, "kind"),  # type: ignore[attr-defined]
        title=r.title,  # type: ignore[attr-defined]
        body=r.body,  # type: ignore[attr-defined]
        confidence=r.confidence if r.HasField("confidence") else None,  # type: ignore[attr-defined]
        audience=audience_of(r.audience, r.HasField("audience")),  # type: ignore[attr-defined]
        purposes=[
            PURPOSE.parse(p, f"purposes[{i}]")
            for i, p in enumerate(r.purposes)  # type: ignore[attr-defined]
        ],
        mentions=mentions_of(r.mentions),  # type: ignore[attr-defined]
        about_ids=list(getattr(r, "about_ids", [])),
        graph=graph_of(r),
        episode_id=getattr(r, "episode_id", "") or None,
    )


def filters_of(msg: cpb.RecallFilters) -> Filters:
    kinds = []
    for i, k in enumerate(msg.kinds):
        kind = KIND.parse(k, f"filters.kinds[{i}]")
        if kind is None:
            raise errors.InvalidArgument(f"filters.kinds[{i}]", "must be a kind")
        kinds.append(kind)
    return Filters(kinds, list(msg.mention_entity_ids), msg.include_superseded)


def candidates_msg(items: Sequence[Candidate]) -> list[pb.Candidate]:
    return [pb.Candidate(id=c.id, rank=c.rank, score=c.score) for c in items]


def ref_msg(ref: Ref) -> cpb.MemoryRef:
    return cpb.MemoryRef(
        id=ref.id,
        visible=ref.visible,
        title=ref.title,
        kind=KIND.value(ref.kind) if ref.kind else cpb.KIND_UNSPECIFIED,
    )


def memory_msg(m: MemoryView) -> cpb.Memory:
    audience = cpb.Audience(member_id=m.audience) if m.audience else cpb.Audience(workspace=True)
    return cpb.Memory(
        id=m.id,
        kind=KIND.value(m.kind),
        title=m.title,
        body=m.body,
        confidence=m.confidence,
        origin=ORIGIN.value(m.origin),
        revision=m.revision,
        audience=audience,
        purposes=[PURPOSE.value(p) for p in m.purposes],
        created_by=m.created_by,
        created_at=convert.timestamp(m.created_at),
        updated_at=convert.timestamp(m.updated_at),
        superseded_by_id=m.superseded_by_id or "",
        episode_id=m.episode_id or "",
        links=[cpb.Link(kind=LINK_KIND.value(k), target=ref_msg(r)) for k, r in m.links],
        mentions=[cpb.Mention(entity_id=e, name=n) for e, n in m.mentions],
        supersedes=[ref_msg(r) for r in m.supersedes],
        superseded_by=[ref_msg(r) for r in m.superseded_by],
        revisions=[
            cpb.Revision(
                revision=r.revision,
                action=REVISION_ACTIONS[r.action],
                changed_by=r.changed_by,
                changed_at=convert.timestamp(r.changed_at),
                reason=r.reason,
            )
            for r in m.revisions
        ],
        claims=[attribute_msg(a) for a in m.claims],
        relations=[relation_msg(r) for r in m.relations],
        aliases=[alias_msg(a) for a in m.aliases],
    )


def settings_msg(s: ctl.WorkspaceSettings) -> pb.WorkspaceSettings:
    return pb.WorkspaceSettings(
        default_recall_mode=MODE.value(s.default_recall_mode),
        dense_floor=s.dense_floor,
        rerank_depth=s.rerank_depth,
        expiry_days=s.expiry_days,
        members_may_edit=s.members_may_edit,
    )


def workspace_msg(w: ctl.Workspace) -> pb.Workspace:
    return pb.Workspace(
        id=w.id,
        slug=w.slug,
        database_name=w.database_name,
        server=w.server,
        settings=settings_msg(w.settings),
        created_at=convert.timestamp(w.created_at),
    )


class StoreServicer(store_pb2_grpc.StoreServiceServicer):
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
        ws = self.control.create_workspace(request.slug, request.server)
        return pb.CreateWorkspaceResponse(workspace=workspace_msg(ws))

    def CreateMember(
        self,
        request: pb.CreateMemberRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateMemberResponse:
        internal_auth.check_admin(request.workspace_id)
        role = ROLE.parse(request.role, "role") or "member"
        m = self.control.create_member(request.workspace_id, request.handle, role)
        return pb.CreateMemberResponse(
            member=pb.Member(
                id=m.id,
                workspace_id=m.workspace_id,
                handle=m.handle,
                role=ROLE.value(m.role),
                created_at=convert.timestamp(m.created_at),
            )
        )

    def CreateToken(
        self,
        request: pb.CreateTokenRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateTokenResponse:
        internal_auth.check_admin(request.workspace_id)
        purposes = []
        for i, p in enumerate(request.purposes):
            purpose = PURPOSE.parse(p, f"purposes[{i}]")
            if purpose is None:
                raise errors.InvalidArgument(f"purposes[{i}]", "must be a purpose")
            purposes.append(purpose)
        token, token_id = self.control.create_token(
            request.member_id,
            request.label,
            request.workspace_id or None,
            tuple(purposes),
            request.read_only,
        )
        return pb.CreateTokenResponse(token=token, token_id=token_id)

    def RevokeToken(
        self,
        request: pb.RevokeTokenRequest,
        context: grpc.ServicerContext,
    ) -> pb.RevokeTokenResponse:
        internal_auth.check_admin(request.workspace_id)
        self.control.revoke_token(request.token_id, request.workspace_id or None)
        return pb.RevokeTokenResponse()

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
        return pb.AuthenticateResponse(
            workspace_id=ident.workspace_id,
            member_id=ident.member_id,
            role=ROLE.value(ident.role),
            workspace_slug=ident.workspace_slug,
            purposes=[PURPOSE.value(p) for p in ident.purposes],
            read_only=ident.read_only,
        )

    def GetWorkspaceSettings(
        self, request: pb.GetWorkspaceSettingsRequest, context: grpc.ServicerContext
    ) -> pb.GetWorkspaceSettingsResponse:
        internal_auth.check_workspace(request.workspace_id)
        ws_id = ctl.parse_uuid(request.workspace_id, "workspace_id")
        return pb.GetWorkspaceSettingsResponse(settings=settings_msg(self.control.settings(ws_id)))

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
        for name in request.update_fields:
            if name not in SETTINGS_FIELDS:
                raise errors.InvalidArgument("update_fields", f"unknown setting {name!r}")
            if name == "default_recall_mode":
                mode = MODE.parse(s.default_recall_mode, "settings.default_recall_mode")
                if mode is None:
                    raise errors.InvalidArgument("settings.default_recall_mode", MODE.one_of())
                changes[name] = mode
            else:
                changes[name] = getattr(s, name)
        merged = self.control.update_settings(caller.workspace_id, changes)
        return pb.UpdateWorkspaceSettingsResponse(settings=settings_msg(merged))

    # -- memory tools ------------------------------------------------------

    def CreateMemory(
        self,
        request: pb.CreateMemoryRequest,
        context: grpc.ServicerContext,
    ) -> pb.CreateMemoryResponse:
        result = self.memories.remember(
            caller_of(request.caller),
            request.request_id,
            new_memory(request),
            convert.when(request.captured_at, request.HasField("captured_at")),
        )
        return pb.CreateMemoryResponse(memory=memory_msg(result.memory), replayed=result.replayed)

    def DeriveMemory(
        self,
        request: pb.DeriveMemoryRequest,
        context: grpc.ServicerContext,
    ) -> pb.DeriveMemoryResponse:
        result = self.memories.derive(
            caller_of(request.caller),
            request.request_id,
            list(request.source_ids),
            new_memory(request),
        )
        return pb.DeriveMemoryResponse(memory=memory_msg(result.memory), replayed=result.replayed)

    def CorrectMemory(
        self,
        request: pb.CorrectMemoryRequest,
        context: grpc.ServicerContext,
    ) -> pb.CorrectMemoryResponse:
        result = self.memories.correct(
            caller_of(request.caller),
            request.request_id,
            request.id,
            request.expected_revision,
            request.title if request.HasField("title") else None,
            request.body if request.HasField("body") else None,
            request.confidence if request.HasField("confidence") else None,
            request.reason,
            graph_of(request),
            request.replace_claims,
        )
        return pb.CorrectMemoryResponse(memory=memory_msg(result.memory), replayed=result.replayed)

    def SupersedeMemory(
        self,
        request: pb.SupersedeMemoryRequest,
        context: grpc.ServicerContext,
    ) -> pb.SupersedeMemoryResponse:
        result = self.memories.supersede(
            caller_of(request.caller),
            request.request_id,
            request.id,
            request.expected_revision,
            new_memory(request),
            request.reason,
            request.replace_claims,
            list(request.source_ids),
        )
        return pb.SupersedeMemoryResponse(
            memory=memory_msg(result.memory),
            superseded=memory_msg(result.superseded) if result.superseded else None,
            replayed=result.replayed,
        )

    def ForgetMemory(
        self,
        request: pb.ForgetMemoryRequest,
        context: grpc.ServicerContext,
    ) -> pb.ForgetMemoryResponse:
        result = self.memories.forget(
            caller_of(request.caller), request.request_id, request.id, request.reason
        )
        return pb.ForgetMemoryResponse(
            id=result.id,
            forgotten_at=convert.timestamp(result.forgotten_at),
            replayed=result.replayed,
        )

    def GetMemories(
        self,
        request: pb.GetMemoriesRequest,
        context: grpc.ServicerContext,
    ) -> pb.GetMemoriesResponse:
        found = self.memories.read(
            caller_of(request.caller), list(request.ids), request.with_provenance
        )
        seen = {m.id for m in found}
        return pb.GetMemoriesResponse(
            memories=[memory_msg(m) for m in found],
            not_found_ids=[i for i in request.ids if i not in seen],
        )

    # -- recall support ----------------------------------------------------

    def LookupEntities(
        self, request: pb.LookupEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.LookupEntitiesResponse:
        cards = self.graph.lookup(
            caller_of(request.caller),
            request.name,
            convert.when(request.as_of, request.HasField("as_of")),
            request.include_history,
        )
        return pb.LookupEntitiesResponse(entities=[card_msg(c) for c in cards])

    def EntityNeighbors(
        self, request: pb.EntityNeighborsRequest, context: grpc.ServicerContext
    ) -> pb.EntityNeighborsResponse:
        found = self.graph.neighbors(
            caller_of(request.caller),
            request.entity_id,
            request.hops,
            list(request.predicates),
            convert.when(request.as_of, request.HasField("as_of")),
        )
        return pb.EntityNeighborsResponse(
            nodes=nodes_msg(found),
            edges=[relation_msg(r) for r in found.edges],
            truncated=found.truncated,
        )

    def NamedEntities(
        self, request: pb.NamedEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.NamedEntitiesResponse:
        cards = self.graph.named_in(caller_of(request.caller), request.text)
        return pb.NamedEntitiesResponse(entities=[card_msg(c) for c in cards])

    def CreateEpisode(
        self, request: pb.StoreServiceCreateEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceCreateEpisodeResponse:
        caller = caller_of(request.caller)
        started = convert.when(request.started_at, request.HasField("started_at"))
        if started is None:
            raise errors.InvalidArgument("started_at", "is required")
        audience = audience_of(request.audience, request.HasField("audience"))
        purposes = frozenset(
            PURPOSE.parse(p, f"purposes[{i}]") or DEFAULT_PURPOSE
            for i, p in enumerate(request.purposes)
        ) or frozenset({DEFAULT_PURPOSE})
        trust = Trust(caller.member_id if isinstance(audience, _Empty) else audience, purposes)
        episode_id = self.episodes.create(
            caller,
            NewEpisode(
                request.title,
                started,
                convert.when(request.ended_at, request.HasField("ended_at")),
                trust,
                list(request.member_ids),
                list(request.entity_ids),
            ),
        )
        return pb.StoreServiceCreateEpisodeResponse(episode_id=episode_id)

    def Timeline(
        self, request: pb.StoreServiceTimelineRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceTimelineResponse:
        page = self.timelines.timeline(
            caller_of(request.caller),
            request.entity_id or None,
            request.episode_id or None,
            convert.when(getattr(request, "from"), request.HasField("from")),
            convert.when(request.to, request.HasField("to")),
            request.page_token,
        )
        return pb.StoreServiceTimelineResponse(
            events=[
                cpb.TimelineEvent(
                    at=convert.timestamp(e.at),
                    kind=e.kind,
                    memory_id=e.memory_id,
                    entity_id=e.entity_id or "",
                    summary=e.summary,
                )
                for e in page.events
            ],
            next_page_token=page.next_page_token,
        )

    def LexicalCandidates(
        self, request: pb.LexicalCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.LexicalCandidatesResponse:
        result = self.recall.lexical(
            caller_of(request.caller), request.query, request.limit, filters_of(request.filters)
        )
        return pb.LexicalCandidatesResponse(
            candidates=candidates_msg(result.candidates),
            terms_kept=result.terms_kept,
            terms_dropped=result.terms_dropped,
        )

    def DenseCandidates(
        self, request: pb.DenseCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.DenseCandidatesResponse:
        result = self.recall.dense(
            caller_of(request.caller),
            list(request.vector),
            request.model_id,
            embed_input.EMBED_INPUT_VERSION,
            request.limit,
            filters_of(request.filters),
        )
        return pb.DenseCandidatesResponse(
            candidates=candidates_msg(result.candidates),
            embeddings_available=result.embeddings_available,
            floor=result.floor,
        )

    def AdmitCandidates(
        self, request: pb.AdmitCandidatesRequest, context: grpc.ServicerContext
    ) -> pb.AdmitCandidatesResponse:
        walk = self.memories.walk(
            caller_of(request.caller),
            list(request.ids),
            request.hydrate_limit,
            request.include_superseded,
        )
        return pb.AdmitCandidatesResponse(
            admitted_ids=walk.admitted, memories=[memory_msg(m) for m in walk.memories]
        )

    def SearchHistory(
        self, request: pb.SearchHistoryRequest, context: grpc.ServicerContext
    ) -> pb.SearchHistoryResponse:
        # Owner-only: anyone else gets an empty list (see services/store/history.py).
        hits = HistorySearch(self.memories.dbs, self.control).search(
            caller_of(request.caller), request.query, request.limit
        )
        return pb.SearchHistoryResponse(
            entries=[
                cpb.HistoryEntry(
                    id=h.id,
                    chat_id=h.chat_id,
                    role=h.role,
                    text=h.text,
                    occurred_at=convert.timestamp(h.occurred_at),
                    score=h.score,
                )
                for h in hits
            ]
        )

    def GetEmbeddingStatus(
        self, request: pb.GetEmbeddingStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetEmbeddingStatusResponse:
        claims = internal_auth.check_workspace(request.workspace_id)
        # A member (an owner) counts what they may see; the operator, all.
        member = claims.member_id if claims.kind == internal_auth.MEMBER else None
        status = embedding_job.status(
            self.memories.dbs,
            self.control,
            ctl.parse_uuid(request.workspace_id, "workspace_id"),
            member,
        )
        return pb.GetEmbeddingStatusResponse(
            memories=status.memories,
            embedded=status.embedded,
            pending=status.pending,
            input_version=embed_input.EMBED_INPUT_VERSION,
            parked=status.parked,
            parked_reasons=[pb.ParkedReason(reason=r, count=n) for r, n in status.parked_reasons],
        )

    # -- dedup review ------------------------------------------------------

    def ListDuplicatePairs(
        self, request: pb.StoreServiceListDuplicatePairsRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceListDuplicatePairsResponse:
        pairs = self.dedup.pairs(
            caller_of(request.caller), request.window, request.min_cosine, request.limit
        )
        return pb.StoreServiceListDuplicatePairsResponse(
            pairs=[
                pb.StoreDuplicatePair(first_id=p.first_id, second_id=p.second_id, cosine=p.cosine)
                for p in pairs
            ]
        )

    def DismissDuplicatePair(
        self, request: pb.StoreServiceDismissDuplicatePairRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceDismissDuplicatePairResponse:
        self.dedup.dismiss(caller_of(request.caller), request.first_id, request.second_id)
        return pb.StoreServiceDismissDuplicatePairResponse()

    def ListEntityPairs(
        self, request: pb.StoreServiceListEntityPairsRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceListEntityPairsResponse:
        pairs = self.entity_merge.pairs(caller_of(request.caller), request.limit)
        return pb.StoreServiceListEntityPairsResponse(pairs=[pair_msg(p) for p in pairs])

    def MergeEntities(
        self, request: pb.StoreServiceMergeEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceMergeEntitiesResponse:
        merge, created = self.entity_merge.merge(
            caller_of(request.caller), request.kept_id, request.merged_id
        )
        return pb.StoreServiceMergeEntitiesResponse(merge=merge_msg(merge), created=created)

    def KeepEntitiesApart(
        self, request: pb.StoreServiceKeepEntitiesApartRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceKeepEntitiesApartResponse:
        self.entity_merge.keep_apart(caller_of(request.caller), request.first_id, request.second_id)
        return pb.StoreServiceKeepEntitiesApartResponse()

    def UndoEntityMerge(
        self, request: pb.StoreServiceUndoEntityMergeRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceUndoEntityMergeResponse:
        self.entity_merge.undo(caller_of(request.caller), request.merge_id)
        return pb.StoreServiceUndoEntityMergeResponse()

    def ListEntityMerges(
        self, request: pb.StoreServiceListEntityMergesRequest, context: grpc.ServicerContext
    ) -> pb.StoreServiceListEntityMergesResponse:
        merges = self.entity_merge.merges(caller_of(request.caller), request.limit)
        return pb.StoreServiceListEntityMergesResponse(merges=[merge_msg(m) for m in merges])
