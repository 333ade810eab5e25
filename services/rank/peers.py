"""The pipeline's two peers over gRPC: adapters that turn stub calls into the
plain interfaces of :mod:`services.rank.ports`, each call with a deadline.

Store failures are the recall's failure (UNAVAILABLE, or the store's own
status relayed), except in the dense arm, which degrades. Embed failures
always degrade, so they become :class:`ports.Degraded`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc

from recallatron import errors, packed_vectors
from recallatron.peer import Method, Peer, Pending, Req, Resp, method
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, store_pb2
from recallatron.vocabulary import DEFAULT_MODE, MODE
from services.rank.ports import (
    Beside,
    Candidate,
    Degraded,
    DenseArm,
    QueryVector,
    Walked,
    WorkspaceSettings,
)

_STORE = store_pb2.DESCRIPTOR.services_by_name["StoreService"]
_EMBED = embed_pb2.DESCRIPTOR.services_by_name["EmbedService"]
SETTINGS = method(
    _STORE,
    "GetWorkspaceSettings",
    store_pb2.GetWorkspaceSettingsRequest,
    store_pb2.GetWorkspaceSettingsResponse,
)
LEXICAL = method(
    _STORE,
    "LexicalCandidates",
    store_pb2.LexicalCandidatesRequest,
    store_pb2.LexicalCandidatesResponse,
)
DENSE = method(
    _STORE, "DenseCandidates", store_pb2.DenseCandidatesRequest, store_pb2.DenseCandidatesResponse
)
ADMIT = method(
    _STORE, "AdmitCandidates", store_pb2.AdmitCandidatesRequest, store_pb2.AdmitCandidatesResponse
)
NAMED_ENTITIES = method(
    _STORE, "NamedEntities", store_pb2.NamedEntitiesRequest, store_pb2.NamedEntitiesResponse
)
SEARCH_HISTORY = method(
    _STORE, "SearchHistory", store_pb2.SearchHistoryRequest, store_pb2.SearchHistoryResponse
)
EMBED = method(_EMBED, "Embed", embed_pb2.EmbedRequest, embed_pb2.EmbedResponse)
RERANK = method(_EMBED, "Rerank", embed_pb2.RerankRequest, embed_pb2.RerankResponse)

_KINDS = {
    grpc.StatusCode.UNAVAILABLE: "unavailable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "timeout",
    grpc.StatusCode.FAILED_PRECONDITION: "absent",
}


def _unavailable(exc: grpc.RpcError, peer: str, timeout: float) -> Degraded:
    code = exc.code()
    kind = _KINDS.get(code, "failed")
    if kind == "unavailable":
        return Degraded(kind, f"the {peer} is unavailable")
    if kind == "timeout":
        return Degraded(kind, f"the {peer} did not answer within {timeout:.2g} s")
    if kind == "absent":
        return Degraded(kind, exc.details() or "not configured")
    return Degraded(kind, f"the {peer} failed ({code.name}): {exc.details()}")


def _degradable(
    peer: Peer, m: Method[Req, Resp], request: Req, timeout: float | None, name: str
) -> Resp:
    """The call's answer; its failure as Degraded, for a part of the recall
    that goes on without it (``name``: the peer, as the reason names it)."""
    try:
        return peer.raw(m, request, "", timeout)
    except grpc.RpcError as exc:
        raise _unavailable(exc, name, peer.limit(timeout)) from None


T = TypeVar("T")


def _beside(pending: Pending[Resp], part: str, pick: Callable[[Resp], T]) -> Callable[[], T]:
    """The answer of a call made beside the arms, read when the recall wants
    it; its failure is that part's degrade (Degraded, naming ``part``), never
    the recall's."""

    def read() -> T:
        try:
            return pick(pending.result())
        except errors.DomainError as exc:
            raise Degraded("failed", f"{part}: {exc}") from None

    return read


def _candidates(items: Sequence[store_pb2.Candidate]) -> list[Candidate]:
    return [Candidate(c.id, c.rank, c.score, c.matches_every_term) for c in items]


class StoreClient:
    """The store, its calls carrying the recall's own assertion (the channel
    forwards it: recallatron.internal_channels.forwarding_channel)."""

    def __init__(self, channel: grpc.Channel, timeout: float) -> None:
        self.peer = Peer(channel, timeout, "the store")

    def settings(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        resp = self.peer.call(
            SETTINGS, store_pb2.GetWorkspaceSettingsRequest(workspace_id=workspace_id), "", timeout
        )
        s = resp.settings
        return WorkspaceSettings(
            default_recall_mode=MODE.parse(s.default_recall_mode, "default_recall_mode")
            or DEFAULT_MODE,
            rerank_depth=s.rerank_depth,
        )

    def lexical(
        self,
        caller: cpb.Caller,
        query: str,
        limit: int,
        filters: cpb.RecallFilters,
        timeout: float | None = None,
    ) -> list[Candidate]:
        resp = self.peer.call(
            LEXICAL,
            store_pb2.LexicalCandidatesRequest(
                caller=caller, query=query, limit=limit, filters=filters
            ),
            "",
            timeout,
        )
        return _candidates(resp.candidates)

    def dense(
        self,
        caller: cpb.Caller,
        vector: QueryVector,
        limit: int,
        filters: cpb.RecallFilters,
        timeout: float | None = None,
        words: str = "",
    ) -> DenseArm:
        packed = packed_vectors.pack(vector.values)
        request = store_pb2.DenseCandidatesRequest(
            caller=caller,
            vector_packed=packed,
            model_id=vector.model_id,
            limit=limit,
            filters=filters,
            query=words,
        )
        # A store of a version before vector_packed reads only the floats,
        # and in a rolling upgrade any store may answer: both forms go in this
        # release; the next may send vector_packed alone.
        packed_vectors.fill_floats(request, "vector", packed)
        resp = _degradable(self.peer, DENSE, request, timeout, "store")
        return DenseArm(
            _candidates(resp.candidates), resp.embeddings_available, resp.floor, resp.not_embedded
        )

    def walk(
        self,
        caller: cpb.Caller,
        ids: Sequence[str],
        hydrate: int,
        filters: cpb.RecallFilters | None = None,
        timeout: float | None = None,
        neighbours_of: int = 0,
    ) -> Walked[cpb.Memory]:
        resp = self.peer.call(
            ADMIT,
            store_pb2.AdmitCandidatesRequest(
                caller=caller,
                ids=ids,
                hydrate_limit=hydrate,
                include_superseded=bool(filters and filters.include_superseded),
                neighbours_of=neighbours_of,
            ),
            "",
            timeout,
        )
        return Walked(
            list(resp.admitted_ids),
            {m.id: m for m in resp.memories},
            [(n.of_id, n.memory_id) for n in resp.neighbours],
        )

    def entity_cards(
        self, caller: cpb.Caller, text: str, timeout: float | None = None
    ) -> Callable[[], Beside]:
        pending = self.peer.start(
            NAMED_ENTITIES, store_pb2.NamedEntitiesRequest(caller=caller, text=text), "", timeout
        )
        return _beside(
            pending, "entity cards", lambda r: Beside(r.entities, more_entities=r.more_entities)
        )

    def history(
        self, caller: cpb.Caller, query: str, limit: int, timeout: float | None = None
    ) -> Callable[[], Beside]:
        request = store_pb2.SearchHistoryRequest(caller=caller, query=query, limit=limit)
        pending = self.peer.start(SEARCH_HISTORY, request, "", timeout)
        return _beside(pending, "history", lambda r: Beside(r.entries, left_out=r.left_out))


class EmbedClient:
    def __init__(self, channel: grpc.Channel, embed_timeout: float, rerank_timeout: float) -> None:
        self.embedder = Peer(channel, embed_timeout, "the embed service")
        self.reranker = Peer(channel, rerank_timeout, "the cross-encoder")

    def embed_query(self, text: str, timeout: float | None = None) -> QueryVector:
        # As every peer call: cancelled when the recall is abandoned, and
        # delivered by the channel's thread, which answers sooner than a
        # blocking call's own wait when the peer works for milliseconds
        # (benchmarks/hop_bench.py --busy).
        request = embed_pb2.EmbedRequest(texts=[text], queries=True, packed=True)
        resp = _degradable(self.embedder, EMBED, request, timeout, "embed service")
        if len(resp.vectors) != 1:
            raise Degraded("failed", "the embed service returned no vector")
        answered = resp.vectors[0]
        try:
            # A service of a version before `packed` answers the floats.
            values = packed_vectors.unpack(answered.packed, answered.values, "vectors[0].packed")
        except errors.InvalidArgument as exc:
            raise Degraded("failed", f"the embed service answered a bad vector: {exc}") from None
        return QueryVector(resp.model_id, values)

    def rerank(
        self, query: str, passages: Sequence[str], timeout: float | None = None
    ) -> list[float]:
        request = embed_pb2.RerankRequest(query=query, passages=passages)
        resp = _degradable(self.reranker, RERANK, request, timeout, "cross-encoder")
        return list(resp.scores)
