"""Tracing is off unless the standard OTEL_* variables ask for it, and off
costs nothing: no SDK loaded, gRPC and psycopg left as they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recallatron.tracing import exporter_names


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, []),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, []),
    ],
)
def test_which_exporters_the_environment_asks_for(env: dict[str, str], names: list[str]) -> None:
    assert exporter_names(env) == names


_PROBE = """
import json, sys, grpc, psycopg
server, channel, connect = grpc.server, grpc.insecure_channel, vars(psycopg.Connection)["connect"]
from recallatron import tracing
on = tracing.setup(sys.argv[1], database=True)
print(json.dumps({
    "on": on,
    "sdk": "opentelemetry.sdk" in sys.modules,
    "grpc": grpc.server is not server or grpc.insecure_channel is not channel,
    "psycopg": vars(psycopg.Connection)["connect"] is not connect,
}))
"""


def _probe(env: dict[str, str]) -> dict[str, bool]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, "store"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return dict(json.loads(out.splitlines()[-1]))


def test_off_instruments_nothing_and_on_instruments_grpc_and_psycopg() -> None:
    assert _probe({}) == {"on": False, "sdk": False, "grpc": False, "psycopg": False}
    # Console: on without a collector to reach.
    on = _probe({"OTEL_TRACES_EXPORTER": "console"})
    assert on == {"on": True, "sdk": True, "grpc": True, "psycopg": True}


def test_an_unknown_exporter_or_protocol_is_refused_at_start() -> None:
    for env in (
        {"OTEL_TRACES_EXPORTER": "jaeger"},
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        },
    ):
        with pytest.raises(subprocess.CalledProcessError) as failed:
            _probe(env)
        assert "OTEL_" in failed.value.stderr


def test_a_composed_statement_is_traced_with_its_literals_as_placeholders() -> None:
    from psycopg import sql

    from recallatron.tracing import statement_text

    password = "s3cret-pass'word"
    statement = sql.SQL("ALTER ROLE {} PASSWORD {}").format(
        sql.Identifier("recallatron_app"), sql.Literal(password)
    )
    assert statement_text(statement) == 'ALTER ROLE "recallatron_app" PASSWORD %s'
    nested = sql.SQL("CREATE SUBSCRIPTION {} CONNECTION {} PUBLICATION {}").format(
        sql.Identifier("s"),
        sql.Composed([sql.Literal("postgres://u:pw@h/db")]),
        sql.Identifier("p"),
    )
    assert statement_text(nested) == 'CREATE SUBSCRIPTION "s" CONNECTION %s PUBLICATION "p"'
