"""The embedding job within the embed service's limits: a claim larger than
the texts one Embed call may hold (the service's max_batch) is sent in calls
the service takes, and later claims are no larger."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
import pytest

from recallatron.internal_auth import new_key
from recallatron_devkit.embed_fixture import EmbedProcess
from recallatron_devkit.stack import Stack
from services.embedding_job.embedder import Embedder, EmbedUnavailable
from services.embedding_job.job import EmbeddingJob
from services.store.domain.control import ControlPlane
from tests.conftest import Team, free_port, wait_for
from tests.integration.test_embedding_job import FixedEmbedder, job_alone, vectors_of

pytestmark = pytest.mark.integration


class TooMany(grpc.RpcError):
    """What the embed service answers a call above its max_batch."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return "texts: holds too many texts; at most 4 per call"


class TakesFour(FixedEmbedder):
    """An embed service whose max_batch is 4: a call with more texts is
    refused whole, as the real service refuses one above its setting."""

    limit = 4

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        self.calls.append(len(texts))
        if len(texts) > self.limit:
            raise TooMany()
        return super().embed(texts)

    def max_batch(self) -> int:
        return self.limit


def test_a_batch_size_above_the_embed_services_limit_is_sent_within_it(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """job_batch_size above the embed service's max_batch: every claim was
    refused whole and then embedded one memory a call (a call and a log line
    per memory); now the claim is sent in calls of max_batch, the job says
    so once, and its next claims hold at most max_batch."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        settings = settings.model_copy(update={"job_batch_size": 10})
        made = [
            ada.remember(f"Limit rule {i}", f"body {i}", audience_to="workspace").memory.id
            for i in range(16)
        ]
        embedder = TakesFour()
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=embedder)  # type: ignore[arg-type]
        with caplog.at_level(logging.INFO, logger="recallatron.store.embedding_job"):
            first = job.claim(team.workspace_id)
            assert len(first.rows) == 10
            assert job.process(first) == 10
            # One refused call, then the ten in calls the service takes.
            assert embedder.calls == [10, 4, 4, 2]
            embedder.calls.clear()
            second = job.claim(team.workspace_id)
            assert len(second.rows) == 4
            assert job.process(second) == 4
            assert embedder.calls == [4]
        said = [r.getMessage() for r in caplog.records if "max_batch" in r.getMessage()]
        assert len(said) == 1 and "job_batch_size" in said[0], said
        assert len(set(made) - vectors_of(stack, team, FixedEmbedder.model)) == 2
        # The real service says its limit (0 would be one of an older version).
        assert Embedder(settings.embed_target, 30.0, settings).max_batch() > 0


def _embed_on(
    workdir: Path, models_dir: Path, address: str, key: str, max_batch: int
) -> EmbedProcess:
    """A real embed service at ``address`` that takes ``max_batch`` texts a call."""
    process = EmbedProcess(
        workdir,
        {
            "RECALLATRON_MODELS_DIR": str(models_dir),
            "RECALLATRON_EMBED_LISTEN": address,
            "RECALLATRON_INTERNAL_KEY": key,
            "RECALLATRON_MAX_BATCH": str(max_batch),
        },
    )
    process.wait_serving()
    return process


def test_a_larger_limit_is_learned_when_the_embed_service_comes_back_with_one(
    stack: Stack,
    team: Team,
    monkeypatch: pytest.MonkeyPatch,
    prepared_models_dir: Path,
    tmp_path: Path,
) -> None:
    """The job learned a max_batch of 4 from a real embed service, which is
    then restarted (the job meeting it away meanwhile) with a max_batch of 64:
    the job kept claiming 4 until it restarted itself; now its next claim
    holds job_batch_size again."""
    ada = team.clients["ada"]
    address = f"127.0.0.1:{free_port()}"
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        key = settings.internal_signing_key().decode() or new_key()
        settings = settings.model_copy(
            update={
                "job_batch_size": 10,
                "embed_target": address,
                "internal_key": key,
                "internal_key_file": "",
            }
        )
        for i in range(40):
            ada.remember(f"Restart rule {i}", f"body {i}", audience_to="workspace")
        job = EmbeddingJob(
            settings, dbs, ControlPlane(dbs), embedder=Embedder(address, 30.0, settings)
        )
        # Only the service's absence may make the job ask again here, never
        # the periodic refresh (60 s) a slow run could reach.
        job.limit_refresh_seconds = 1e9
        embed = _embed_on(tmp_path / "small", prepared_models_dir, address, key, 4)
        try:
            first = job.claim(team.workspace_id)
            assert len(first.rows) == 10
            assert job.process(first) == 10
            assert len(job.claim(team.workspace_id).rows) == 4
        finally:
            embed.stop()
        # The service away: the claimed rows go back to the queue.
        with pytest.raises(EmbedUnavailable):
            job.process(job.claim(team.workspace_id))
        embed = _embed_on(tmp_path / "large", prepared_models_dir, address, key, 64)
        try:
            # The job's channel may still be waiting out its reconnect backoff
            # when the service is back: each claim asks again until answered.
            wait_for(lambda: job.batch_size() == 10 or None, "the limit asked again")
            again = job.claim(team.workspace_id)
            assert len(again.rows) == 10, job.batch_limit
            assert job.process(again) == 10
        finally:
            embed.stop()


def test_a_held_limit_is_asked_again_when_due(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embed service's max_batch rises while the job holds a smaller one
    and is never found away: the job asks again when the limit is due (every
    limit_refresh_seconds) and claims job_batch_size again."""
    ada = team.clients["ada"]
    with job_alone(stack, monkeypatch, team.database_name) as (settings, dbs):
        settings = settings.model_copy(update={"job_batch_size": 10})
        for i in range(20):
            ada.remember(f"Refresh rule {i}", f"body {i}", audience_to="workspace")
        embedder = TakesFour()
        job = EmbeddingJob(settings, dbs, ControlPlane(dbs), embedder=embedder)  # type: ignore[arg-type]
        assert job.process(job.claim(team.workspace_id)) == 10
        assert job.batch_limit == 4
        embedder.limit = 64
        assert len(job.claim(team.workspace_id).rows) == 4  # not due yet
        job.limit_refresh_seconds = 0.0
        assert len(job.claim(team.workspace_id).rows) == 6  # the rest, in one claim
        assert job.batch_limit == 0
