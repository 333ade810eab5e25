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
