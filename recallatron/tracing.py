"""Distributed tracing with OpenTelemetry, off unless the environment asks.

Each service calls :func:`setup` once where it starts, before it makes its
gRPC server, its channels or a database connection. With none of the standard
variables set it returns at once and nothing is imported or instrumented, so
tracing off costs nothing. On (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER`` set), spans
go over OTLP/gRPC in batches; the exporter, sampler and propagators read the
rest of the standard ``OTEL_*`` variables themselves (headers, certificates,
``OTEL_TRACES_SAMPLER``, ``OTEL_PROPAGATORS``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``).

What is traced: every gRPC call served and made (the trace context travels in
the call's metadata next to the caller assertion of recallatron/internal_auth.py),
except health checks and reflection; and in the store every SQL statement
(its text with placeholders, never the parameters: memory content stays out
of the spans). A statement composed with ``psycopg.sql`` shows each literal
in it as a placeholder too: a literal there is a value all the same (the app
role's password the store sets at start, a source's connection string a move
subscribes to)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

# The variables that turn tracing on; any other OTEL_* variable only tunes it.
SWITCHES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)
EXPORTERS = ("otlp", "console")

_configured = False


def exporter_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the environment asks for; empty: tracing is off.
    ``OTEL_TRACES_EXPORTER`` names them (comma-separated); without it an OTLP
    endpoint means ``otlp``. ``OTEL_SDK_DISABLED=true`` or ``none`` turns it off."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    named = [n for n in named if n]
    if named:
        return [] if "none" in named else named
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def _exporter(name: str) -> Any:
    if name == "otlp":
        protocol = os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        )
        if protocol not in ("", "grpc"):
            raise ValueError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only grpc is supported "
                "(point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP/gRPC port, 4317)"
            )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    raise ValueError(f"OTEL_TRACES_EXPORTER={name}: not one of {', '.join(EXPORTERS)} (or none)")


def _untraced(details: Any) -> bool:
    """Health checks and reflection: polled often, about nothing, kept out."""
    method = str(getattr(details, "method", "") or getattr(details, "full_method", ""))
    return method.startswith(("/grpc.health.v1.Health/", "/grpc.reflection."))


def statement_text(statement: Any, context: Any = None) -> str:
    """The text a span shows of a statement composed with ``psycopg.sql``:
    as Postgres gets it, but each ``Literal`` (a value written into the text)
    shown as the placeholder ``%s``."""
    from psycopg import sql

    if isinstance(statement, sql.Literal):
        return "%s"
    if isinstance(statement, sql.Composed):
        return "".join(statement_text(part, context) for part in statement)
    return str(statement.as_string(context))


def _trace_statements() -> None:
    """Psycopg's instrumentation with composed statements shown by
    :func:`statement_text`: its own shows them as sent, literals and all."""
    from opentelemetry.instrumentation import psycopg as traced
    from psycopg.sql import Composable

    class CursorTracer(traced.CursorTracer):
        def get_statement(self, cursor: Any, args: Sequence[Any]) -> str:
            if args and isinstance(args[0], Composable):
                return statement_text(args[0], cursor)
            return str(super().get_statement(cursor, list(args)))

    # The instrumentation makes each connection's tracer from this name.
    traced.CursorTracer = CursorTracer  # type: ignore[misc]


def setup(service: str, database: bool = False) -> bool:
    """Turns tracing on for this process when the environment asks (see the
    module's description); ``database``: the process talks to Postgres, whose
    statements are traced too. True when tracing is on. Once per process."""
    global _configured
    names = exporter_names()
    if _configured or not names:
        return _configured
    # Imported only when on: tracing off loads none of the SDK.
    from opentelemetry import trace
    from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient, GrpcInstrumentorServer
    from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Our name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES give one.
    resource = Resource.create({SERVICE_NAME: f"recallatron-{service}"}).merge(
        OTELResourceDetector().detect()
    )
    provider = TracerProvider(resource=resource)
    # The exporters make their channels before gRPC is instrumented, so their
    # own calls are never traced.
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    trace.set_tracer_provider(provider)

    def traced(details: Any) -> bool:
        return not _untraced(details)

    # The gRPC instrumentation's constructors carry no annotations.
    GrpcInstrumentorServer(filter_=traced).instrument()  # type: ignore[no-untyped-call]
    GrpcInstrumentorClient(filter_=traced).instrument()  # type: ignore[no-untyped-call]
    if database:
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        _trace_statements()
        PsycopgInstrumentor().instrument()
    _configured = True
    return True
