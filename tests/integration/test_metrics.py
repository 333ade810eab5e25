"""Every process exposes Prometheus metrics on its own port."""

from __future__ import annotations

import time
import urllib.request

import pytest

from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration


def scrape(port: int, needle: str = "") -> str:
    """The embedding job starts after the services and may still be starting:
    retry until the endpoint answers (and shows `needle`)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = str(resp.read().decode())
            if needle in text or time.monotonic() > deadline:
                return text
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_metrics_after_some_traffic(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    ada.remember("Metrics are scraped every 15 seconds", audience_to="workspace")
    ada.recall("how often are metrics scraped", mode="hybrid")
    ports = stack.config.metrics_ports
    gateway = scrape(ports["gateway"])
    assert 'recallatron_rpc_total{code="OK",method="/recallatron.v1.MemoryService/Remember"}' in (
        gateway
    )
    assert "recallatron_rpc_duration_seconds_bucket" in gateway
    store = scrape(ports["store"])
    assert "recallatron_pool_connections" in store and "recallatron_pool_waiting" in store
    assert "LexicalCandidates" in store
    rank = scrape(ports["rank"])
    assert "recallatron_rpc_total" in rank
    job = scrape(ports["embedding-job"], "recallatron_embedding_job_backlog")
    assert "recallatron_embedding_job_backlog" in job
    assert "recallatron_embedding_job_embedded_total" in job


def test_the_embedding_job_keeps_series_only_for_workspaces_with_work(
    stack: Stack, team: Team
) -> None:
    """The backlog and parked gauges carry a workspace label: a series for
    every workspace the job ever saw grew with all of them (100,000 series at
    100,000 workspaces); a workspace whose queue is empty and nothing parked
    leaves both."""
    from tests.conftest import wait_for

    ada = team.clients["ada"]
    ada.remember("Series come and go with the work", audience_to="workspace")
    ada.wait_embedded(timeout=120)
    port = stack.config.metrics_ports["embedding-job"]
    label = f'workspace="{team.workspace_id}"'

    def gone() -> bool | None:
        lines = [
            line
            for line in scrape(port).splitlines()
            if line.startswith(
                ("recallatron_embedding_job_backlog", "recallatron_embedding_job_parked")
            )
        ]
        return all(label not in line for line in lines) or None

    wait_for(gone, "the idle workspace's series to leave", timeout=60)
