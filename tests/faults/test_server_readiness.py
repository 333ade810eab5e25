"""Readiness with several Postgres servers (docs/kubernetes.md, 'Probes and
termination'): a store whose second server is away stays SERVING, since
leaving its Service would take every workspace on the other servers with it;
that server's own state is said apart, as the health service name
``postgres/<server>`` and the metric ``recallatron_store_postgres_server_up``,
and comes back with the server. A store-only stack with servers `default`
and `b`."""

from __future__ import annotations

import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recallatron_devkit.stack import Stack, free_port, own_config
from tests.conftest import wait_for
from tests.faults.stackutil import running
from tests.faults.test_readiness import _status

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_stack() -> Iterator[Stack]:
    config = own_config(
        Path(tempfile.mkdtemp(prefix="recallatron-faults-")),
        services=("store",),
        embedding_job=False,
        metrics_ports={"store": free_port()},
        extra_servers=("b",),
        env={"RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1"},
    )
    with running(Stack(config)) as stack:
        yield stack


def _up(stack: Stack) -> dict[str, float]:
    """recallatron_store_postgres_server_up by server, as scraped."""
    port = stack.config.metrics_ports["store"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("recallatron_store_postgres_server_up{"):
            labels, _, value = line.rpartition(" ")
            server = labels.split('server="', 1)[1].split('"', 1)[0]
            found[server] = float(value)
    return found


def test_a_second_server_away_is_said_apart_and_the_store_stays_ready(two_stack: Stack) -> None:
    b = two_stack.extra_postgres["b"]
    wait_for(
        lambda: (
            _status(two_stack, "store", "postgres/b") == "SERVING"
            and _status(two_stack, "store", "postgres/default") == "SERVING"
        ),
        "each server's own health SERVING",
    )
    assert _up(two_stack) == {"default": 1.0, "b": 1.0}
    b.stop()
    try:
        wait_for(
            lambda: _status(two_stack, "store", "postgres/b") == "NOT_SERVING",
            "server b's health NOT_SERVING with it stopped",
        )
        wait_for(lambda: _up(two_stack).get("b") == 0.0, "server b's metric 0")
        # The store still serves every workspace of the default server.
        assert _status(two_stack, "store") == "SERVING"
        assert _status(two_stack, "store", "postgres/default") == "SERVING"
        assert _up(two_stack)["default"] == 1.0
    finally:
        b.start()
    wait_for(
        lambda: _status(two_stack, "store", "postgres/b") == "SERVING",
        "server b's health SERVING again once it is back",
    )
    assert _up(two_stack) == {"default": 1.0, "b": 1.0}
    assert _status(two_stack, "store") == "SERVING"
