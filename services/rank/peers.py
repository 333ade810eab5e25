"""The pipeline's two peers over gRPC: adapters that turn stub calls into the
plain interfaces of :mod:`services.rank.pipeline`, each call with a deadline.

Store failures are the recall's failure (UNAVAILABLE, or the store's own
status relayed), except in the dense arm, which degrades. Embed failures
always degrade, so they become :class:`pipeline.Degraded`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from recallatron.grpcclient import relay, unary
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, embed_pb2_grpc, store_pb2, store_pb2_grpc
from recallatron.vocabulary import DEFAULT_MODE, MODE
from services.rank.pipeline import (
    Candidate,
    Degraded,
    DenseArm,
    QueryVector,
    Walked,
    WorkspaceSettings,
)

Resp = TypeVar("Resp")

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


def _capped(default: float, timeout: float | None) -> float:
    """The call's own deadline, or what is left of the recall's when nearer
    (never zero: gRPC then fails the call at once with DEADLINE_EXCEEDED)."""
    return default if timeout is None else max(0.001, min(default, timeout))


def _candidates(items: Sequence[store_pb2.Candidate]) -> list[Candidate]:
    return [Candidate(c.id, c.rank, c.score) for c in items]


class StoreClient:
    def __init__(self, channel: grpc.Channel, timeout: float) -> None:
        self.stub = store_pb2_grpc.StoreServiceStub(channel)
        self.timeout = timeout

    def _call(self, method: Callable[..., Resp], request: Any, timeout: float | None) -> Resp:
        try:
            return unary(method, request, _capped(self.timeout, timeout))
        except grpc.RpcError as exc:
            raise relay(exc, "the store") from None

    def settings(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        resp = self._call(
            self.stub.GetWorkspaceSettings,
            store_pb2.GetWorkspaceSettingsRequest(workspace_id=workspace_id),
            timeout,
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
        resp = self._call(
            self.stub.LexicalCandidates,
            store_pb2.LexicalCandidatesRequest(
                caller=caller, query=query, limit=limit, filters=filters
            ),
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
    ) -> DenseArm:
        request = store_pb2.DenseCandidatesRequest(
            caller=caller,
            vector=vector.values,
            model_id=vector.model_id,
            limit=limit,
            filters=filters,
        )
        deadline = _capped(self.timeout, timeout)
        try:
            resp = unary(self.stub.DenseCandidates, request, deadline)
        except grpc.RpcError as exc:
            raise _unavailable(exc, "store", deadline) from None
        return DenseArm(_candidates(resp.candidates), resp.embeddings_available)

    def walk(
        self,
        caller: cpb.Caller,
        ids: Sequence[str],
        hydrate: int,
        filters: cpb.RecallFilters | None = None,
        timeout: float | None = None,
    ) -> Walked[cpb.Memory]:
        resp = self._call(
            self.stub.AdmitCandidates,
            store_pb2.AdmitCandidatesRequest(
                caller=caller,
                ids=ids,
                hydrate_limit=hydrate,
                include_superseded=bool(filters and filters.include_superseded),
            ),
            timeout,
        )
        return Walked(list(resp.admitted_ids), {m.id: m for m in resp.memories})


class EmbedClient:
    def __init__(self, channel: grpc.Channel, embed_timeout: float, rerank_timeout: float) -> None:
        self.stub = embed_pb2_grpc.EmbedServiceStub(channel)
        self.embed_timeout = embed_timeout
        self.rerank_timeout = rerank_timeout

    def embed_query(self, text: str, timeout: float | None = None) -> QueryVector:
        deadline = _capped(self.embed_timeout, timeout)
        try:
            # Through unary() as every peer call: cancelled when the recall is
            # abandoned, and delivered by the channel's thread, which answers
            # sooner than a blocking call's own wait when the peer works for
            # milliseconds (benchmarks/hop_bench.py --busy).
            resp = unary(self.stub.Embed, embed_pb2.EmbedRequest(texts=[text]), deadline)
        except grpc.RpcError as exc:
            raise _unavailable(exc, "embed service", deadline) from None
        if len(resp.vectors) != 1:
            raise Degraded("failed", "the embed service returned no vector")
        return QueryVector(resp.model_id, list(resp.vectors[0].values))

    def rerank(
        self, query: str, passages: Sequence[str], timeout: float | None = None
    ) -> list[float]:
        deadline = _capped(self.rerank_timeout, timeout)
        try:
            resp = unary(
                self.stub.Rerank, embed_pb2.RerankRequest(query=query, passages=passages), deadline
            )
        except grpc.RpcError as exc:
            raise _unavailable(exc, "cross-encoder", deadline) from None
        return list(resp.scores)
