"""The gRPC face of the rank service: a thin servicer over
:class:`services.rank.pipeline.Pipeline`, and the process entry point."""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc

from recallatron import errors, internal_auth, internal_channels
from recallatron.grpcclient import peer_channel
from recallatron.grpcserver import Server
from recallatron.logs import configure_logging
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import rank_pb2, rank_pb2_grpc
from recallatron.vocabulary import (
    DEFAULT_RECALL_LIMIT,
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MODE,
    RECALL_LIMIT_RULE,
)
from services.rank.peers import EmbedClient, StoreClient
from services.rank.pipeline import Outcome, Pipeline, PipelineConfig, Request
from services.rank.settings import RankSettings

SERVICE_NAME = rank_pb2.DESCRIPTOR.services_by_name["RankService"].full_name

log = logging.getLogger("recallatron.rank")


# Each answer's dataclass's field names, read once (dataclasses.fields is
# slow beside a recall's per-row work).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _fields(value: Any, **converted: Any) -> dict[str, Any]:
    """A dataclass's fields by name, ``converted`` in place of those its
    message holds in another form. Scores, Counts and Outcome name their
    messages' fields, so each list of fields is written once, in its class."""
    names = _FIELD_NAMES.get(type(value))
    if names is None:
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    return {n: converted.get(n, getattr(value, n)) for n in names}


def outcome_msg(outcome: Outcome[cpb.Memory]) -> cpb.RecallOutcome:
    return cpb.RecallOutcome(
        **_fields(
            outcome,
            results=[
                cpb.RecallResult(memory=r.memory, scores=cpb.RecallScores(**_fields(r.scores)))
                for r in outcome.results
            ],
            mode=cpb.RecallMode.ValueType(MODE.value(outcome.mode)),
            counts=cpb.RecallCounts(**_fields(outcome.counts)),
        )
    )


def request_of(msg: rank_pb2.RankRequest, time_remaining: float | None = None) -> Request:
    if not msg.caller.workspace_id or not msg.caller.member_id:
        raise errors.InvalidArgument("caller", "workspace_id and member_id are required")
    if not msg.query.strip():
        raise errors.InvalidArgument("query", "is required")
    if len(msg.query) > MAX_QUERY_CHARS:
        raise errors.InvalidArgument("query", f"at most {MAX_QUERY_CHARS} characters")
    # The public limits (recallatron.vocabulary), the gateway's own: one rule
    # for the field wherever it is checked.
    limit = msg.limit or DEFAULT_RECALL_LIMIT
    if not 1 <= limit <= MAX_RECALL_LIMIT:
        raise errors.InvalidArgument("limit", RECALL_LIMIT_RULE)
    return Request(
        caller=msg.caller,
        workspace_id=msg.caller.workspace_id,
        query=msg.query,
        mode=MODE.parse(msg.mode, "mode"),
        limit=limit,
        filters=msg.filters,
        skip_rerank=msg.skip_rerank,
        entity_cards=msg.entity_cards,
        include_history=msg.include_history,
        deadline=None if time_remaining is None else time.monotonic() + time_remaining,
    )


class RankServicer(rank_pb2_grpc.RankServiceServicer):
    def __init__(self, pipeline: Pipeline[cpb.Memory]) -> None:
        self.pipeline = pipeline

    def Rank(
        self, request: rank_pb2.RankRequest, context: grpc.ServicerContext
    ) -> rank_pb2.RankResponse:
        # Rank acts only for the member the gateway vouched for; the store
        # checks the same again on each call rank makes with it.
        internal_auth.check_caller(request.caller)
        outcome = self.pipeline.recall(request_of(request, context.time_remaining()))
        return rank_pb2.RankResponse(outcome=outcome_msg(outcome), composed=True)


class ContextExecutor(ThreadPoolExecutor):
    """Runs each task in a copy of the submitter's context, so an arm in its
    own thread forwards the recall's caller assertion as the recall does."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


def build_pipeline(settings: RankSettings) -> Pipeline[cpb.Memory]:
    # Every call to store and embed carries the assertion the recall came with.
    store = StoreClient(
        internal_channels.forwarding_channel(peer_channel(settings.store_target, settings)),
        settings.store_timeout_seconds,
    )
    embed = EmbedClient(
        internal_channels.forwarding_channel(peer_channel(settings.embed_target, settings)),
        settings.embed_timeout_seconds,
        settings.rerank_timeout_seconds,
    )
    config = PipelineConfig(
        arm_limit=settings.arm_limit,
        rrf_k=settings.rrf_k,
        walk_limit=settings.walk_limit,
        settings_cache_seconds=settings.settings_cache_seconds,
        episode_neighbours_of=settings.episode_neighbours_of,
        cross_encoder_recheck_seconds=settings.cross_encoder_recheck_seconds,
    )
    executor = ContextExecutor(max_workers=settings.server_threads, thread_name_prefix="arm")
    return Pipeline(store, embed, config, executor)


def main() -> None:
    settings = RankSettings()
    configure_logging("rank", settings.log_level)
    server = Server(settings, [SERVICE_NAME], internal=True)
    rank_pb2_grpc.add_RankServiceServicer_to_server(
        RankServicer(build_pipeline(settings)), server.grpc_server
    )
    port = server.start(settings.rank_listen)
    log.info("listening", extra={"port": port})
    # Serving from the start: without embed the answers degrade, and without
    # the store each call fails on its own with UNAVAILABLE.
    server.set_serving()
    log.info("serving")
    server.wait_for_termination()
