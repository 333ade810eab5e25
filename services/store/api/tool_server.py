"""The store's ToolService (tools.proto): the tools, taking the public request
messages and answering the public responses, for exactly the member the
call's assertion vouches for. A tool's messages are defined once, in
memory.proto and review.proto (gateway_pb2 offers them); this adapter turns
them into domain calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from recallatron import convert, errors, internal_auth
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import tools_pb2_grpc
from recallatron.vocabulary import DEFAULT_PURPOSE, KIND, PURPOSE
from services.store.api.graph_adapter import (
    card_msg,
    graph_of,
    merge_msg,
    nodes_msg,
    pair_msg,
    relation_msg,
)
from services.store.api.messages import (
    audience_of,
    audit_event_msg,
    caller_named,
    memory_msg,
    message_of,
    names_of,
    new_memory,
    page_answer,
    timeline_event_msg,
    when_of,
)
from services.store.domain.dedup import DedupStore
from services.store.domain.entity_merge import EntityMergeStore
from services.store.domain.episodes import EpisodeStore, NewEpisode
from services.store.domain.graph import GraphStore
from services.store.domain.memories import MemoryStore
from services.store.domain.memory_writes import WriteResult
from services.store.domain.owner_view import AuditFilter, MemoryFilter, OwnerView
from services.store.domain.timeline import TimelineStore
from services.store.domain.trust import Trust, _Empty
from services.store.domain.validation import uuid_str
from services.store.infrastructure.db import Caller

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


def asserted_caller() -> Caller:
    """The member (and purpose) the call's assertion vouches for."""
    return caller_named(internal_auth.check_kind(internal_auth.MEMBER))


def written(answer: type[Resp], result: WriteResult) -> Resp:
    """A write's answer: the memory as it now stands, whether the call was a
    replay, and (a supersede's) the memory it replaced."""
    replaced = {"superseded": memory_msg(result.superseded)} if result.superseded else {}
    return message_of(answer, result, memory=memory_msg(result.memory), **replaced)


# The domain services the tools call; compared by identity, as any servicer.
@dataclass(eq=False)
class ToolServicer(tools_pb2_grpc.ToolServiceServicer):
    memories: MemoryStore
    graph: GraphStore
    episodes: EpisodeStore
    timelines: TimelineStore
    dedup: DedupStore
    entity_merge: EntityMergeStore
    owner_view: OwnerView

    # -- the seven tools (design §7) -------------------------------------------------

    def Read(self, request: pb.ReadRequest, context: grpc.ServicerContext) -> pb.ReadResponse:
        found, more = self.memories.read_answer(asserted_caller(), list(request.ids))
        seen = {m.id for m in found} | set(more)
        # Ids as asked (any spelling of a UUID), found in their canonical form.
        missing = [i for i in request.ids if uuid_str(i, "ids") not in seen]
        if missing:
            # Not visible reads exactly like not there (design §4).
            raise errors.NotFound(f"ids: not found: {', '.join(missing)}")
        return pb.ReadResponse(memories=[memory_msg(m) for m in found], more_ids=more)

    def Remember(
        self, request: pb.RememberRequest, context: grpc.ServicerContext
    ) -> pb.RememberResponse:
        occurred = convert.not_future(when_of(request, "occurred_at"), "occurred_at")
        result = self.memories.remember(
            asserted_caller(), request.request_id, new_memory(request), occurred
        )
        return written(pb.RememberResponse, result)

    def Derive(self, request: pb.DeriveRequest, context: grpc.ServicerContext) -> pb.DeriveResponse:
        result = self.memories.derive(
            asserted_caller(), request.request_id, list(request.source_ids), new_memory(request)
        )
        return written(pb.DeriveResponse, result)

    def Correct(
        self, request: pb.CorrectRequest, context: grpc.ServicerContext
    ) -> pb.CorrectResponse:
        result = self.memories.correct(
            asserted_caller(),
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
        return written(pb.CorrectResponse, result)

    def Supersede(
        self, request: pb.SupersedeRequest, context: grpc.ServicerContext
    ) -> pb.SupersedeResponse:
        result = self.memories.supersede(
            asserted_caller(),
            request.request_id,
            request.id,
            request.expected_revision,
            new_memory(request),
            request.reason,
            request.replace_claims,
            list(request.source_ids),
        )
        return written(pb.SupersedeResponse, result)

    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext) -> pb.ForgetResponse:
        result = self.memories.forget(
            asserted_caller(),
            request.request_id,
            request.id,
            request.reason,
            request.expected_revision,
        )
        return message_of(
            pb.ForgetResponse, result, forgotten_at=convert.timestamp(result.forgotten_at)
        )

    # -- the graph ---------------------------------------------------------------------

    def Lookup(self, request: pb.LookupRequest, context: grpc.ServicerContext) -> pb.LookupResponse:
        page = self.graph.lookup(
            asserted_caller(),
            request.name,
            when_of(request, "as_of"),
            request.include_history,
            request.partial,
            request.page_token,
        )
        return page_answer(pb.LookupResponse, page.cards, card_msg, page.next_page_token)

    def Neighbors(
        self, request: pb.NeighborsRequest, context: grpc.ServicerContext
    ) -> pb.NeighborsResponse:
        found = self.graph.neighbors(
            asserted_caller(),
            request.entity_id,
            request.hops,
            list(request.predicates),
            when_of(request, "as_of"),
        )
        return pb.NeighborsResponse(
            nodes=nodes_msg(found),
            edges=[relation_msg(r) for r in found.edges],
            truncated=found.truncated,
        )

    def CreateEpisode(
        self, request: pb.CreateEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.CreateEpisodeResponse:
        caller = asserted_caller()
        started = when_of(request, "started_at")
        if started is None:
            raise errors.InvalidArgument("started_at", "is required")
        audience = audience_of(request.audience, request.HasField("audience"))
        # Each one named (UNSPECIFIED is refused, as remember refuses it: a
        # token's purpose scope is checked on the names); none given: assist.
        purposes = frozenset(
            names_of(PURPOSE, request.purposes, "purposes", "a purpose")
        ) or frozenset({DEFAULT_PURPOSE})
        trust = Trust(caller.member_id if isinstance(audience, _Empty) else audience, purposes)
        episode_id = self.episodes.create(
            caller,
            NewEpisode(
                request.title,
                started,
                when_of(request, "ended_at"),
                trust,
                list(request.member_ids),
                list(request.entity_ids),
            ),
            request.request_id,
        )
        return pb.CreateEpisodeResponse(episode_id=episode_id)

    def Timeline(
        self, request: pb.TimelineRequest, context: grpc.ServicerContext
    ) -> pb.TimelineResponse:
        page = self.timelines.timeline(
            asserted_caller(),
            request.entity_id or None,
            request.episode_id or None,
            when_of(request, "from"),
            when_of(request, "to"),
            request.page_token,
        )
        return page_answer(
            pb.TimelineResponse, page.events, timeline_event_msg, page.next_page_token
        )

    # -- an owner's view ---------------------------------------------------------------

    def ListMemories(
        self, request: pb.ListMemoriesRequest, context: grpc.ServicerContext
    ) -> pb.ListMemoriesResponse:
        kinds = [KIND.parse(k, f"kinds[{i}]") for i, k in enumerate(request.kinds)]
        page = self.owner_view.memories(
            asserted_caller(),
            MemoryFilter(
                created_by=request.created_by,
                kinds=[k for k in kinds if k],
                episode_id=request.episode_id,
                start=when_of(request, "from"),
                end=when_of(request, "to"),
                include_superseded=request.include_superseded,
            ),
            request.page_size,
            request.page_token,
        )
        return page_answer(pb.ListMemoriesResponse, page.memories, memory_msg, page.next_page_token)

    def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: grpc.ServicerContext
    ) -> pb.ListAuditEventsResponse:
        page = self.owner_view.audit(
            asserted_caller(),
            AuditFilter(
                member_id=request.member_id,
                actions=list(request.actions),
                start=when_of(request, "from"),
                end=when_of(request, "to"),
            ),
            request.page_size,
            request.page_token,
        )
        return page_answer(
            pb.ListAuditEventsResponse, page.events, audit_event_msg, page.next_page_token
        )

    # -- the review page's decisions -------------------------------------------------------

    def DismissDuplicatePair(
        self, request: pb.DismissDuplicatePairRequest, context: grpc.ServicerContext
    ) -> pb.DismissDuplicatePairResponse:
        self.dedup.dismiss(
            asserted_caller(),
            request.first_id,
            request.second_id,
            request.first_expected_revision,
            request.second_expected_revision,
        )
        return pb.DismissDuplicatePairResponse()

    def ListEntityPairs(
        self, request: pb.ListEntityPairsRequest, context: grpc.ServicerContext
    ) -> pb.ListEntityPairsResponse:
        pairs, more = self.entity_merge.pairs(asserted_caller(), request.limit)
        return pb.ListEntityPairsResponse(pairs=[pair_msg(p) for p in pairs], more=more)

    def MergeEntities(
        self, request: pb.MergeEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.MergeEntitiesResponse:
        merge, created = self.entity_merge.merge(
            asserted_caller(), request.kept_id, request.merged_id
        )
        return pb.MergeEntitiesResponse(merge=merge_msg(merge), created=created)

    def KeepEntitiesApart(
        self, request: pb.KeepEntitiesApartRequest, context: grpc.ServicerContext
    ) -> pb.KeepEntitiesApartResponse:
        self.entity_merge.keep_apart(asserted_caller(), request.first_id, request.second_id)
        return pb.KeepEntitiesApartResponse()

    def UndoEntityMerge(
        self, request: pb.UndoEntityMergeRequest, context: grpc.ServicerContext
    ) -> pb.UndoEntityMergeResponse:
        self.entity_merge.undo(asserted_caller(), request.merge_id)
        return pb.UndoEntityMergeResponse()

    def ListEntityMerges(
        self, request: pb.ListEntityMergesRequest, context: grpc.ServicerContext
    ) -> pb.ListEntityMergesResponse:
        page = self.entity_merge.merges(
            asserted_caller(), request.limit, request.page_size, request.page_token
        )
        return page_answer(
            pb.ListEntityMergesResponse, page.merges, merge_msg, page.next_page_token
        )
