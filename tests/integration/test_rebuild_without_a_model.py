"""`recallatron rebuild` against an embed service that is up but has not loaded
its model yet (a pod starting, models not prepared): it answers GetModelInfo
with no model, and no model is not a model every vector is stale for."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from recallatron_devkit.embed_fixture import EmbedProcess
from recallatron_devkit.stack import Stack
from services.embedding_job.embedder import Embedder, EmbedUnavailable
from services.embedding_job.job import EmbeddingJob
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.settings import StoreSettings
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

VECTORS = "SELECT memory_id::text, model_id FROM memory_embedding ORDER BY 1"
QUEUED = "SELECT count(*) FROM embedding_job"


def test_rebuild_without_a_loaded_model_changes_nothing(
    stack: Stack, team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = team.clients["ada"]
    for i in range(3):
        ada.remember(f"Rebuild without a model {i}", "kept vectors", audience_to="workspace")
    ada.wait_embedded(timeout=120)
    vectors = dbutil.query(stack, team.database_name, VECTORS)
    assert len(vectors) == 3
    models = tmp_path / "no-models"
    models.mkdir()
    key = stack.internal_key.decode()
    # Waiting for its models, as a pod does: up, answering, NOT_SERVING.
    embed = EmbedProcess(
        tmp_path / "embed",
        {
            "RECALLATRON_MODELS_DIR": str(models),
            "RECALLATRON_INTERNAL_KEY": key,
            "RECALLATRON_WAIT_FOR_MODELS": "true",
        },
    )
    env = stack.env_for("embedding-job")
    env.pop("RECALLATRON_INTERNAL_KEY_FILE", None)
    env.update({"RECALLATRON_EMBED_TARGET": embed.address, "RECALLATRON_INTERNAL_KEY": key})
    try:
        # The rebuild's last step, as when the service restarts between the
        # drain and it: refused, every vector kept.
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = StoreSettings()
        dbs = Databases(settings, process="embedding job")
        assert dbs.wait_and_bootstrap(threading.Event())
        try:
            job = EmbeddingJob(
                settings, dbs, ControlPlane(dbs), Embedder(embed.address, 30.0, settings)
            )
            with pytest.raises(EmbedUnavailable, match="no model loaded yet"):
                dropped = job.drop_stale(team.workspace_id)
                left = len(dbutil.query(stack, team.database_name, VECTORS))
                pytest.fail(f"{dropped} vectors deleted as stale, {left} left")
            with pytest.raises(EmbedUnavailable, match="no model loaded yet"):
                job.enqueue_rebuild(team.workspace_id)
        finally:
            dbs.close()
        proc = subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", "rebuild", "--workspace", team.slug],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        # One line naming the embed service, no traceback; nothing queued
        # (every memory was queued again, as if its vector were stale).
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("error: the embed service cannot embed now"), proc.stderr
        assert "no model loaded yet" in proc.stderr
        assert dbutil.query(stack, team.database_name, QUEUED) == [(0,)]
    finally:
        embed.stop()
    assert dbutil.query(stack, team.database_name, VECTORS) == vectors
