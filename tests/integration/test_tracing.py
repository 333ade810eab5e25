"""Tracing across the processes: a stack started with an OTLP endpoint sends
its spans to a receiver in this test's process, and one recall makes one
trace from the gateway through rank to the store (with its SQL) and embed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

from recallatron.client import Client
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running
from tests.conftest import make_team, wait_for

pytestmark = pytest.mark.integration

PKG = "/recallatron.v1."
RECALL = PKG + "MemoryService/Recall"
RANK = PKG + "RankService/Rank"
SERVER = trace_pb2.Span.SPAN_KIND_SERVER
CLIENT = trace_pb2.Span.SPAN_KIND_CLIENT


@dataclass(frozen=True)
class Span:
    service: str
    scope: str
    name: str
    kind: int
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    # Everything the span says (its attributes, events, status), as text.
    said: str = field(default="", compare=False, repr=False)


def _said(span: trace_pb2.Span) -> str:
    """Every value a span carries: its attributes, its events' names and
    attributes (a recorded exception's message among them), its status."""
    values = [span.name, span.status.message]
    for a in [*span.attributes, *(a for e in span.events for a in e.attributes)]:
        shown = a.value.string_value if a.value.HasField("string_value") else str(a.value)
        values.append(f"{a.key}={shown}")
    values += [e.name for e in span.events]
    return "\n".join(values)


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """The OTLP/gRPC trace endpoint of a collector, keeping what it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        got = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    got.append(
                        Span(
                            attributes.get("service.name", ""),
                            scope_spans.scope.name,
                            s.name,
                            s.kind,
                            s.trace_id,
                            s.span_id,
                            s.parent_span_id,
                            _said(s),
                        )
                    )
        with self.lock:
            self.spans.extend(got)
        return trace_service_pb2.ExportTraceServiceResponse()

    def snapshot(self) -> list[Span]:
        with self.lock:
            return list(self.spans)


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[Receiver, int]]:
    servicer = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0)


@pytest.fixture(scope="module")
def traced_stack(
    tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path, receiver
) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    _, port = receiver
    config = own_config(
        tmp_path_factory.mktemp("traced"),
        prepared_models_dir,
        # The standard variables only: the endpoint turns tracing on.
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            # Export every 100 ms rather than 5 s: the test waits for it.
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            **FAST_JOB,
        },
    )
    with running(Stack(config)) as stack:
        yield stack


def _descends(span: Span, ancestor: Span, by_id: dict[bytes, Span]) -> bool:
    node: Span | None = span
    while node is not None:
        if node.parent_id == ancestor.span_id:
            return True
        node = by_id.get(node.parent_id)
    return False


def test_one_recall_is_one_trace_across_the_services(traced_stack: Stack, receiver) -> None:  # type: ignore[no-untyped-def]
    spans_of, _ = receiver
    operator = Client(traced_stack.gateway, traced_stack.admin_token)
    team = make_team(traced_stack, operator, ("ada",))
    ada = team.clients["ada"]
    made = ada.remember("Tracing lunch with the platform team", audience_to="workspace").memory
    # Embedded first, so the recall's dense arm runs too.
    ada.wait_embedded(timeout=120, poll=0.2)
    # The caller assertions still travel beside the trace context: the recall
    # passes rank's, store's and embed's checks and finds the memory.
    outcome = ada.recall("platform team lunch", mode="hybrid", skip_rerank=True).outcome
    assert made.id in [r.memory.id for r in outcome.results]
    assert outcome.dense_available

    def recall_trace() -> list[Span] | None:
        spans = spans_of.snapshot()
        roots = [s for s in spans if s.name == RECALL and s.kind == SERVER]
        if not roots:
            return None
        trace = [s for s in spans if s.trace_id == roots[-1].trace_id]
        services = {s.service for s in trace}
        wanted = {f"recallatron-{n}" for n in ("gateway", "rank", "store", "embed")}
        # Each process exports on its own schedule: wait until all have.
        has_sql = any(s.scope.endswith("psycopg") for s in trace)
        return trace if wanted <= services and has_sql else None

    trace = wait_for(recall_trace, "the recall's spans from all four services", timeout=60)
    by_id = {s.span_id: s for s in trace}
    (root,) = [s for s in trace if s.name == RECALL and s.kind == SERVER]
    assert root.service == "recallatron-gateway"
    # The test's own client is not traced: the gateway's span begins the trace,
    # and every other span hangs under it.
    assert root.parent_id == b""
    assert all(s is root or _descends(s, root, by_id) for s in trace)

    def one(service: str, name: str, kind: int) -> Span:
        found = [s for s in trace if (s.service, s.name, s.kind) == (service, name, kind)]
        assert found, (service, name, kind, sorted({(s.service, s.name) for s in trace}))
        return found[0]

    rank_client = one("recallatron-gateway", RANK, CLIENT)
    assert _descends(rank_client, root, by_id)
    rank_server = one("recallatron-rank", RANK, SERVER)
    assert rank_server.parent_id == rank_client.span_id

    # Each call rank makes: its client span under rank's server span, and the
    # peer's server span the child of exactly that client span.
    calls = [
        ("recallatron-store", PKG + "StoreService/LexicalCandidates"),
        ("recallatron-store", PKG + "StoreService/DenseCandidates"),
        ("recallatron-store", PKG + "StoreService/AdmitCandidates"),
        ("recallatron-embed", PKG + "EmbedService/Embed"),
    ]
    store_servers = []
    for service, name in calls:
        client = one("recallatron-rank", name, CLIENT)
        assert _descends(client, rank_server, by_id), name
        server = one(service, name, SERVER)
        assert server.parent_id == client.span_id, name
        if service == "recallatron-store":
            store_servers.append(server)

    # The store's SQL: psycopg spans in the store, each under one of its calls
    # (those above, and the others of the recall such as its settings).
    sql = [s for s in trace if s.scope.endswith("psycopg")]
    assert sql and all(s.service == "recallatron-store" and s.kind == CLIENT for s in sql)
    served = [s for s in trace if s.service == "recallatron-store" and s.kind == SERVER]
    assert all(any(_descends(s, server, by_id) for server in served) for s in sql)
    for server in store_servers:
        assert any(_descends(s, server, by_id) for s in sql), server.name

    # Health checks stay out of the traces (the stack polled them at start).
    assert not [s for s in spans_of.snapshot() if s.name.startswith("/grpc.health.")]
    operator.close()
    ada.close()


def test_no_span_holds_a_secret_memory_text_or_query(traced_stack: Stack, receiver) -> None:  # type: ignore[no-untyped-def]
    """What a collector receives is kept apart from the stack and outlives
    forget: no span carries a memory's text, a query, a token or a password,
    whatever the call (refused ones too) and whatever ran (the store's start
    included, which sets the app role's password)."""
    spans_of, _ = receiver
    operator = Client(traced_stack.gateway, traced_stack.admin_token)
    team = make_team(traced_stack, operator, ("ada",))
    ada = team.clients["ada"]
    secret_title, secret_body, secret_query = (
        "Zanzibar-title-7f3a",
        "Zanzibar-body-91c2 the vault code",
        "Zanzibar-query-5d0e",
    )
    made = ada.remember(secret_title, secret_body, audience_to="workspace").memory
    ada.recall(secret_query, mode="lexical")
    with pytest.raises(grpc.RpcError):
        ada.correct(made.id, made.revision + 5, "wrong revision", title=secret_title + " again")
    with pytest.raises(grpc.RpcError):
        ada.remember("x" * 5000 + secret_title)
    ada.forget(made.id, "erase it")
    secrets = {
        "memory title": secret_title,
        "memory body": secret_body,
        "query": secret_query,
        "member token": ada.token,
        "operator token": traced_stack.admin_token,
        "app role password": traced_stack.app_password,
    }
    assert all(secrets.values())

    def forgotten() -> list[Span] | None:
        spans = spans_of.snapshot()
        done = any(s.name.endswith("/Forget") and s.service == "recallatron-store" for s in spans)
        return spans if done else None

    spans = wait_for(forgotten, "the store's span of the forget", timeout=60)
    leaks = sorted(
        {
            (what, s.service, s.name)
            for s in spans
            for what, value in secrets.items()
            if value in s.said
        }
    )
    assert not leaks, leaks
    operator.close()
    ada.close()
