"""The embedding job while the embed service is away: what it says of the
queue (the gauges the stall and backlog alerts read, k8s/monitoring/alerts.yaml)
keeps following the queue."""

from __future__ import annotations

import grpc
import pytest
from prometheus_client import REGISTRY

from recallatron.grpcclient import make_channel
from recallatron.internal_auth import Signer
from recallatron.internal_channels import service_channel
from recallatron.v1 import embed_pb2_grpc
from recallatron_devkit.stack import Stack
from services.embedding_job.embedder import Embedder, EmbedUnavailable
from services.embedding_job.job import EmbeddingJob, drop_series
from services.store.domain.control import ControlPlane
from services.store.settings import StoreSettings
from tests import dbutil
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


def _embedder_with_another_key(settings: StoreSettings) -> Embedder:
    """The stack's embed service reached with an internal key it does not
    hold: a job on one side of a key rotation (docs/kubernetes.md)."""
    embedder = Embedder(settings.embed_target, 30.0)
    channel = service_channel(
        make_channel(settings.embed_target, settings), Signer(b"another key " * 4, "embedding-job")
    )
    embedder.stub = embed_pb2_grpc.EmbedServiceStub(channel)
    return embedder


QUEUE = """
SELECT attempts, last_error, next_attempt_at = 'infinity'::timestamptz
FROM embedding_job ORDER BY memory_id
"""


def test_an_embed_service_refusing_the_jobs_key_parks_no_memory(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the pods of a key rotation overlap, embed refuses the job's calls
    UNAUTHENTICATED (docs/kubernetes.md: "retried by the clients"): no fault
    of any memory, so no attempt is spent and none is parked; the worker backs
    off as for an embed service away, and embeds them once the keys agree."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        for i in range(3):
            ada.remember(f"Written during a key rotation {i}", "body", audience_to="workspace")
        job = EmbeddingJob(
            settings, dbs, ControlPlane(dbs), embedder=_embedder_with_another_key(settings)
        )
        refusals = []
        for _ in range(settings.job_row_max_attempts + 1):
            try:
                job.visit(team.workspace_id)
            except EmbedUnavailable as exc:
                refusals.append(exc.code)
            # Due again at once, whatever backoff a failure set.
            dbutil.query(
                stack,
                team.database_name,
                "UPDATE embedding_job SET next_attempt_at = now() "
                "WHERE next_attempt_at <> 'infinity' RETURNING 1",
            )
        queue = dbutil.query(stack, team.database_name, QUEUE)
        assert queue == [(0, None, False)] * 3, queue
        assert refusals == [grpc.StatusCode.UNAUTHENTICATED] * len(refusals) and refusals
    team.clients["ada"].wait_embedded(timeout=120)
