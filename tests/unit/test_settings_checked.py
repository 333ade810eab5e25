"""A setting the environment gives that a process cannot run with stops it
at start, naming the variable: not a traceback, and never later, in the
middle of a call (RRF_K=-60 divided by zero inside recall; ARM_LIMIT past
the walk failed every recall on a field the client never set)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from recallatron.settings import CommonSettings, SettingsInvalid
from services.embed.settings import EmbedSettings
from services.gateway.settings import GatewaySettings
from services.rank.settings import RankSettings
from services.store.settings import StoreSettings

SERVICES = (CommonSettings, EmbedSettings, GatewaySettings, RankSettings, StoreSettings)


@pytest.mark.parametrize(
    ("settings", "variable", "value"),
    [
        (RankSettings, "RECALLATRON_RRF_K", "-60"),
        (RankSettings, "RECALLATRON_ARM_LIMIT", "600"),
        (RankSettings, "RECALLATRON_WALK_LIMIT", "900"),
        (RankSettings, "RECALLATRON_STORE_TIMEOUT_SECONDS", "0"),
        (RankSettings, "RECALLATRON_SERVER_THREADS", "abc"),
        (StoreSettings, "RECALLATRON_CONNECTION_BUDGET", "0"),
        (StoreSettings, "RECALLATRON_CONNECTION_BUDGET", "abc"),
        (StoreSettings, "RECALLATRON_POOL_MAX_IDLE_SECONDS", "0"),
        (StoreSettings, "RECALLATRON_STORE_REPLICAS", "0"),
        (StoreSettings, "RECALLATRON_DENSE_EXACT_ROWS", "-1"),
        (StoreSettings, "RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "0"),
        (StoreSettings, "RECALLATRON_UNFINISHED_IMPORTS_SWEEP_SECONDS", "0"),
        # With the embed service down the job retried without a pause: CPU and log flood.
        (StoreSettings, "RECALLATRON_JOB_MAX_BACKOFF_SECONDS", "0"),
        (StoreSettings, "RECALLATRON_JOB_MAX_BACKOFF_SECONDS", "0.01"),
        # The embed service refused every call with a batch of 0: every memory parked.
        (EmbedSettings, "RECALLATRON_MAX_BATCH", "0"),
        (EmbedSettings, "RECALLATRON_ONNX_THREADS", "0"),
        (GatewaySettings, "RECALLATRON_WORKSPACE_CONCURRENCY", "0"),
        (GatewaySettings, "RECALLATRON_RATE_LIMIT_PER_SECOND", "-1"),
        (GatewaySettings, "RECALLATRON_AUTH_FAILURES_PER_SECOND", "-1"),
        (GatewaySettings, "RECALLATRON_STORE_TIMEOUT_SECONDS", "-1"),
        (GatewaySettings, "RECALLATRON_SHUTDOWN_GRACE_SECONDS", "-5"),
        (GatewaySettings, "RECALLATRON_HTTP_CONNECTIONS_PER_ADDRESS", "0"),
        # Settings read once and then never again: a change never seen.
        (RankSettings, "RECALLATRON_SETTINGS_CACHE_SECONDS", "inf"),
        (RankSettings, "RECALLATRON_SETTINGS_CACHE_SECONDS", "1e400"),
        (RankSettings, "RECALLATRON_SETTINGS_CACHE_SECONDS", "nan"),
        (RankSettings, "RECALLATRON_SETTINGS_CACHE_SECONDS", "-1"),
        (RankSettings, "RECALLATRON_SETTINGS_CACHE_SECONDS", "86400"),
        # A negative recheck reopens the gate at once; NaN never closes it.
        (RankSettings, "RECALLATRON_CROSS_ENCODER_RECHECK_SECONDS", "-1"),
        (RankSettings, "RECALLATRON_CROSS_ENCODER_RECHECK_SECONDS", "nan"),
        (RankSettings, "RECALLATRON_CROSS_ENCODER_RECHECK_SECONDS", "7200"),
    ],
)
def test_a_service_refuses_a_setting_it_cannot_run_with(
    monkeypatch: pytest.MonkeyPatch, settings: type[CommonSettings], variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsInvalid) as info:
        settings()
    assert variable in str(info.value.code)


def test_the_arms_must_fit_the_walk_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLATRON_ARM_LIMIT", "200")
    monkeypatch.setenv("RECALLATRON_WALK_LIMIT", "300")
    with pytest.raises(SettingsInvalid) as info:
        RankSettings()
    assert "RECALLATRON_ARM_LIMIT" in str(info.value.code)
    assert "RECALLATRON_WALK_LIMIT" in str(info.value.code)


def test_a_service_started_with_one_stops_with_a_line_not_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from services.rank.settings import RankSettings; RankSettings()"],
        env={**os.environ, "RECALLATRON_RRF_K": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "RECALLATRON_RRF_K" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "variable", ["RECALLATRON_RATE_LIMIT_PER_SECOND", "RECALLATRON_AUTH_FAILURES_PER_SECOND"]
)
def test_a_gateway_limit_the_docs_turn_off_with_0_takes_0(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """docs/reliability.md: "0 turns it off" (the limiters take 0 per second
    as no limit); the gateway refused to start with it."""
    from services.gateway.ratelimit import FailureLimiter, RateLimiter

    monkeypatch.setenv(variable, "0")
    settings = GatewaySettings()
    calls = RateLimiter(settings.rate_limit_per_second, 1)
    failures = FailureLimiter(settings.auth_failures_per_second, 1)
    for _ in range(3):  # past a burst of 1: never refused by the limit turned off
        if variable == "RECALLATRON_RATE_LIMIT_PER_SECOND":
            calls.check("token")
        else:
            failures.failed("ipv4:10.0.0.7:1")
            failures.check("ipv4:10.0.0.7:2")


def test_the_defaults_are_good() -> None:
    assert RankSettings().rrf_k == 60 and StoreSettings().connection_budget >= 1


@pytest.mark.parametrize("settings", SERVICES, ids=lambda c: c.__name__)
def test_every_number_a_service_takes_states_its_bounds(settings: type[CommonSettings]) -> None:
    """A count or a time below what the process can run with stops it at
    start (README, Configuration): every numeric setting says where its range
    begins, so that none is taken unchecked (a batch or a share of 0)."""
    unbounded = [
        name
        for name, field in settings.model_fields.items()
        if field.annotation in (int, float)
        and not any(hasattr(m, attr) for m in field.metadata for attr in ("ge", "gt"))
    ]
    assert unbounded == []


@pytest.mark.parametrize("settings", SERVICES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_no_number_a_service_takes_may_be_infinite(
    monkeypatch: pytest.MonkeyPatch, settings: type[CommonSettings], value: str
) -> None:
    """An infinite time never ends (a cache never refreshed, a wait never
    over) and NaN compares false with every bound: each is refused at start."""
    for name, field in settings.model_fields.items():
        if field.annotation is not float:
            continue
        variable = f"RECALLATRON_{name.upper()}"
        with monkeypatch.context() as env:
            env.setenv(variable, value)
            with pytest.raises(SettingsInvalid) as info:
                settings()
        assert variable in str(info.value.code)


def test_every_local_listener_has_a_port_of_its_own() -> None:
    """Beside `make run`'s stack, an MCP server started with its defaults (as
    docs/agents.md shows) must bind: it took the gateway's HTTP/JSON port."""
    from recallatron import settings as common
    from recallatron_devkit.stack import DEFAULT_PG_PORT
    from recallatron_mcp.options import DEFAULT_HTTP

    gateway = GatewaySettings()
    listeners = [
        common.GATEWAY_ADDRESS,
        common.STORE_ADDRESS,
        common.EMBED_ADDRESS,
        common.RANK_ADDRESS,
        gateway.review_listen,
        gateway.http_listen,
        DEFAULT_HTTP,
        f"127.0.0.1:{DEFAULT_PG_PORT}",
    ]
    ports = [address.rsplit(":", 1)[1] for address in listeners]
    assert len(set(ports)) == len(ports), listeners
