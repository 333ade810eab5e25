"""The embedding job while the embed service is away: what it says of the
queue (the gauges the stall and backlog alerts read, k8s/monitoring/alerts.yaml)
keeps following the queue."""

from __future__ import annotations

import grpc
import pytest
from prometheus_client import REGISTRY

from recallatron_devkit.stack import Stack
from services.embedding_job.embedder import EmbedUnavailable
from services.embedding_job.job import EmbeddingJob, drop_series
from services.store.domain.control import ControlPlane
from tests.conftest import Team
from tests.integration.test_embedding_job import FixedEmbedder, job_alone

pytestmark = pytest.mark.integration


class Away(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection refused"


class Unreachable(FixedEmbedder):
    """An embed service that cannot be reached."""

    def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        raise Away()


def test_the_backlog_gauge_follows_the_queue_while_embed_is_away(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gauge was set only after a batch was embedded: an embed service
    gone while the workspace's queue was empty (its series dropped) left the
    backlog absent, read as zero, however many memories were then queued,
    so RecallatronEmbeddingStalled (backlog > 0 and nothing embedded), the
    alert for exactly this outage, never fired."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        drop_series(team.workspace_id)  # the queue was empty: no series
        for i in range(3):
            ada.remember(f"Written while embed is away {i}", "body", audience_to="workspace")
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=Unreachable())  # type: ignore[arg-type]
        with pytest.raises(EmbedUnavailable):
            job.visit(team.workspace_id)
        labels = {"workspace": team.workspace_id}
        assert REGISTRY.get_sample_value("recallatron_embedding_job_backlog", labels) == 3
        # Released without spending an attempt: the stack's job embeds them.
        assert REGISTRY.get_sample_value("recallatron_embedding_job_parked", labels) == 0
