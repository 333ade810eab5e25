"""The dashboard and the alert rules (k8s/monitoring/) name only metrics the
services export, with labels they carry: every process of the test stack is
scraped after traffic that makes each labelled metric appear (a recall that
degrades included), and every query is checked against what was scraped."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.k8s import monitoring

pytestmark = pytest.mark.integration

PROCESSES = ("gateway", "store", "rank", "embed", "embedding-job")


def scrape(port: int) -> dict[str, set[str]]:
    """sample name -> label names, of one process's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def exported_by_the_stack(stack: Stack, wanted: set[str]) -> dict[str, set[str]]:
    """Every process's samples merged; the embedding job may still be starting
    (and looks at a new workspace on its next poll): retry until ``wanted``
    shows or a minute has passed."""
    deadline = time.monotonic() + 60
    while True:
        exported: dict[str, set[str]] = {}
        for name in PROCESSES:
            try:
                samples = scrape(stack.config.metrics_ports[name])
            except OSError:
                samples = {}
            for sample, labels in samples.items():
                exported.setdefault(sample, set()).update(labels)
        if wanted <= set(exported) or time.monotonic() > deadline:
            return exported
        time.sleep(0.5)


def test_every_metric_and_label_the_dashboard_and_rules_name_is_exported(
    stack: Stack, team: Team
) -> None:
    assert set(PROCESSES) <= set(stack.config.metrics_ports), "the stack scrapes every process"
    ada = team.clients["ada"]
    # Before anything is embedded, a dense recall degrades (no_embeddings):
    # the degrade counter gets its labels.
    degraded = ada.recall("what is on the roadmap", mode="dense").outcome
    assert not degraded.dense_available
    made = ada.remember("The roadmap review is on Thursdays", audience_to="workspace").memory
    ada.wait_embedded(timeout=120)
    # The job's per-workspace gauges show while a workspace holds work (a
    # workspace with none leaves them): one memory parked keeps them, once
    # the next write wakes the job.
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO embedding_job (memory_id, text_revision, next_attempt_at, last_error)"
        " VALUES (%s, 1, 'infinity', 'parked by the test') RETURNING 1",
        (made.id,),
    )
    ada.remember("The roadmap review moved to Fridays", audience_to="workspace")
    for mode in ("lexical", "dense", "hybrid"):
        ada.recall("when is the roadmap review", mode=mode)
    ada.read([made.id])

    queries = monitoring.every_query()
    named = set().union(*(q.metrics for q in queries))
    exported = exported_by_the_stack(stack, named)
    assert monitoring.unexported(queries, exported) == []
    # The check sees what it checks: the degrade labels, the pools, the backlog.
    assert {"part", "reason"} <= exported["recallatron_rank_degraded_total"]
    assert "pool" in exported["recallatron_pool_waiting"]
    assert "workspace" in exported["recallatron_embedding_job_backlog"]


def test_the_check_fails_on_a_name_or_label_no_service_exports(stack: Stack, team: Team) -> None:
    team.clients["ada"].recall("anything at all", mode="lexical")
    exported = exported_by_the_stack(stack, {"recallatron_rpc_total"})
    wrong = [
        monitoring.Query("typo", 'sum(rate(recallatron_rank_recall_total{mode="hybrid"}[5m]))'),
        monitoring.Query("label", 'sum by (tenant) (rate(recallatron_rpc_total{code="OK"}[5m]))'),
        monitoring.Query("matcher", 'recallatron_embedding_job_backlog{member="m1"}'),
    ]
    assert monitoring.unexported(wrong, exported) == [
        "typo: no service exports recallatron_rank_recall_total",
        "label: no metric it reads carries the label 'tenant'",
        "matcher: recallatron_embedding_job_backlog carries no label 'member'",
    ]
