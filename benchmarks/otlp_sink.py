"""A stand-in collector for measuring tracing's cost: an OTLP/gRPC trace
endpoint that accepts every export and counts the spans, so the services pay
for making, batching and sending their spans and nothing else.

    python -m benchmarks.otlp_sink --port 4317
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 OTEL_EXPORTER_OTLP_INSECURE=true \\
        recallatron load --memories 2000 --concurrency 1 --duration 20 --mode hybrid --no-rerank

Prints the spans received when stopped (SIGINT or SIGTERM). Not a test.
"""

from __future__ import annotations

import argparse
import signal
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self.lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        n = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with self.lock:
            self.spans += n
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=4317)
    args = p.parse_args()
    sink = Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"listening on 127.0.0.1:{args.port}", flush=True)
    stopped.wait()
    server.stop(1).wait()
    print(f"spans received: {sink.spans}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
