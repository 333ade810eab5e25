"""The server side every service shares: options, health, reflection, error
mapping (status.py), metrics and each call's handling (calls.py) and graceful
shutdown, built in one place."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server

from recallatron import fairness
from recallatron.grpcserver.calls import (
    REFUSED,
    RPC_LATENCY,
    RPC_STATUS,
    KeyOf,
    ServiceInterceptor,
    current_method,
    internal_key_of,
)
from recallatron.grpcserver.status import status_for
from recallatron.settings import CommonSettings

__all__ = [
    "LIVENESS",
    "REFUSED",
    "RPC_LATENCY",
    "RPC_STATUS",
    "KeyOf",
    "Server",
    "add_methods",
    "current_method",
    "internal_key_of",
    "status_for",
]

log = logging.getLogger("recallatron.server")

# The health service name a liveness probe asks: SERVING from start() until
# shutdown, whatever the dependencies do. The empty name and each service's
# own name are readiness (set_serving, follow_readiness): a dependency's
# outage takes the process out of its Service without restarting it.
LIVENESS = "liveness"


class Server:
    """A gRPC server with health (readiness NOT_SERVING until
    :meth:`set_serving`, liveness under :data:`LIVENESS`), reflection, error
    mapping, metrics and a SIGTERM drain. ``internal``: a service inside the
    stack (store, rank, embed), whose every call but health and reflection
    must carry a caller assertion signed with the stack's internal key;
    without a key it does not start."""

    def __init__(
        self,
        settings: CommonSettings,
        service_names: Iterable[str],
        internal: bool = False,
        key_of: KeyOf | None = None,
    ) -> None:
        self.settings = settings
        internal_key = settings.internal_signing_key() if internal else b""
        if internal and not internal_key:
            raise RuntimeError(
                "no internal key: set RECALLATRON_INTERNAL_KEY_FILE (or RECALLATRON_INTERNAL_KEY) "
                "to the stack's key; `recallatron up` generates one in the state directory"
            )
        self.service_names = list(service_names)
        options = [
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.max_send_message_length", settings.max_message_bytes),
            # Two servers on one port would split calls between them silently:
            # binding a port in use must fail instead.
            ("grpc.so_reuseport", 0),
            # Keep idle client connections alive through proxies, but refuse
            # pings more frequent than clients are configured to send.
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
        ]
        if settings.max_connection_age_seconds > 0:
            # Clients resolve DNS again only when a connection closes: cycling
            # connections lets round-robin clients find pods added by scaling.
            # A call begun on the old connection after its GOAWAY was sent is
            # never seen by the server, and gRPC's clients send it again on the
            # new one by themselves.
            options += [
                ("grpc.max_connection_age_ms", round(settings.max_connection_age_seconds * 1000)),
                (
                    "grpc.max_connection_age_grace_ms",
                    round(settings.max_connection_age_grace_seconds * 1000),
                ),
            ]
        if settings.max_streams_per_connection > 0:
            options += [
                ("grpc.max_concurrent_streams", settings.max_streams_per_connection),
                # The limit counts the streams open on the connection, as the
                # client counts them when it holds calls back. gRPC's default
                # counts the streams this process has not yet freed, some of
                # them calls the client has already seen end: a client within
                # the limit then had new calls refused (HTTP/2 REFUSED_STREAM,
                # UNAVAILABLE to the caller), several times in a row under
                # load, past its retries (tests/faults/test_connection_cycling.py).
                # A call the client cancelled still holds its place in the fair
                # pool until it ends, so work per token stays bounded there.
                ("grpc.http.overload_protection", 0),
            ]
        # Handlers run on a fair pool: a queue per workspace, threads in turn
        # (recallatron/fairness.py). The key comes from the call's assertion
        # inside the stack, from ``key_of`` (the gateway's tokens) outside it.
        self.executor = fairness.FairExecutor(
            settings.server_threads,
            fairness.Limits(
                settings.workspace_concurrency,
                settings.workspace_queue,
                settings.token_outstanding,
                settings.workspace_concurrency_alone,
                settings.workspace_alone_after_seconds,
            ),
            name="rpc",
        )
        # Inside the stack the key is the verified assertion's (calls.py).
        self.interceptor = ServiceInterceptor(internal_key, self.executor, key_of)
        self.grpc_server = grpc.server(
            # gRPC only submit()s to its pool, so any Executor serves; the stubs
            # ask for a ThreadPoolExecutor.
            self.executor,  # type: ignore[arg-type]
            interceptors=[self.interceptor],
            options=options,
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        for name in [*self.service_names, "", LIVENESS]:
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self._ready = False
        self._ready_lock = threading.Lock()
        # Set by SIGTERM/SIGINT; start-up waits (say, for Postgres) watch it.
        self.stopped = threading.Event()
        self.port = 0

    def start(self, address: str) -> int:
        reflection.enable_server_reflection(
            [*self.service_names, reflection.SERVICE_NAME, health.SERVICE_NAME], self.grpc_server
        )
        s = self.settings
        if s.tls_cert_file and s.tls_key_file:
            credentials = grpc.ssl_server_credentials(
                [(Path(s.tls_key_file).read_bytes(), Path(s.tls_cert_file).read_bytes())]
            )
            self.port = self.grpc_server.add_secure_port(address, credentials)
        else:
            self.port = self.grpc_server.add_insecure_port(address)
        if self.port == 0:
            raise RuntimeError(f"could not bind {address}")
        self.grpc_server.start()
        # Alive once it answers; only the drain turns it off.
        self.health.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
        if self.settings.metrics_port:
            start_http_server(self.settings.metrics_port)

        def _handle(signum: int, _frame: object) -> None:
            log.info("signal received, draining", extra={"signal": signum})
            self.stopped.set()

        signal.signal(signal.SIGTERM, _handle)
        signal.signal(signal.SIGINT, _handle)
        # Lets a parent that started us on port 0 learn the port.
        port_file = os.environ.get("RECALLATRON_PORT_FILE")
        if port_file:
            with open(port_file + ".tmp", "w") as f:
                f.write(str(self.port))
            os.replace(port_file + ".tmp", port_file)
        return self.port

    def set_serving(self, serving: bool = True) -> None:
        """Readiness: the empty name and every service's own (never liveness).
        Set only on a change, so health's watchers hear each change once."""
        state = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        with self._ready_lock:
            if serving == self._ready:
                return
            self._ready = serving
            for name in [*self.service_names, ""]:
                self.health.set(name, state)

    def set_detail(self, name: str, serving: bool) -> None:
        """A health name of its own (a dependency's state, say one Postgres
        server's): never readiness nor liveness, which it does not change."""
        if name in {*self.service_names, "", LIVENESS}:
            raise ValueError(f"{name!r} is readiness or liveness, not a detail")
        self.health.set(
            name,
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING,
        )

    def follow_readiness(self, ready: Callable[[], bool], every_seconds: float, what: str) -> None:
        """Readiness follows ``ready()`` (something the process already knows,
        or one bounded check) asked now and every ``every_seconds`` until
        shutdown, in a thread of its own; ``what``: the dependency, for the
        log, which says each change once. A check that raises counts as not
        ready."""

        def run() -> None:
            while not self.stopped.is_set():
                error = ""
                try:
                    serving = bool(ready())
                except Exception as exc:
                    serving, error = False, f"{type(exc).__name__}: {exc}"
                if serving != self._ready:
                    if serving:
                        log.info("ready", extra={"dependency": what})
                    else:
                        extra = {"dependency": what, **({"error": error} if error else {})}
                        log.warning("not ready: dependency away", extra=extra)
                self.set_serving(serving)
                self.stopped.wait(every_seconds)

        threading.Thread(target=run, name="readiness", daemon=True).start()

    def wait_for_termination(
        self,
        on_stop: Callable[[], None] | None = None,
        before_drain: Callable[[float], None] | None = None,
    ) -> None:
        """Blocks until SIGTERM or SIGINT, then drains: health (readiness and
        liveness) goes NOT_SERVING for good, new calls are refused, in-flight
        calls get the grace period to finish.
        ``before_drain(grace)``: drains what calls this server (a front in the
        same process) while it still serves them; the drain gets what is left
        of the grace."""

        self.stopped.wait()
        self.health.enter_graceful_shutdown()
        grace = self.settings.shutdown_grace_seconds
        if before_drain is not None:
            began = time.monotonic()
            before_drain(grace)
            grace = max(0.0, grace - (time.monotonic() - began))
        self.grpc_server.stop(grace).wait()
        if on_stop is not None:
            on_stop()
        log.info("stopped")

    def stop(self) -> None:
        self.stopped.set()


def add_methods(
    server: grpc.Server, service: ServiceDescriptor, handlers: Mapping[str, Callable[..., Any]]
) -> None:
    """Serves ``service`` from one handler per method, found by name (the
    generated ``add_*Servicer_to_server`` does the same from a servicer's
    attributes); a method without a handler refuses to start."""
    missing = [m.name for m in service.methods if m.name not in handlers]
    if missing:
        raise TypeError(f"{service.name}: no handler for {', '.join(missing)}")
    table = {}
    for m in service.methods:
        make = (
            grpc.unary_stream_rpc_method_handler
            if m.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        table[m.name] = make(
            handlers[m.name],
            request_deserializer=GetMessageClass(m.input_type).FromString,
            response_serializer=GetMessageClass(m.output_type).SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, table),)
    )
    server.add_registered_method_handlers(service.full_name, table)
