"""`recallatron up` on a fresh state directory without prepared models: the
start fails within seconds with the embed service's own reason, instead of
waiting out the start timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from recallatron_devkit.stack import Stack, StackConfig

pytestmark = pytest.mark.integration


def test_start_without_models_fails_fast_with_the_services_reason(tmp_path: Path) -> None:
    stack = Stack(
        StackConfig(
            state_dir=tmp_path / "state",
            # Never connected to: only the embed service runs, and it needs no database.
            database_url="postgresql://127.0.0.1:1/unused",
            ports={"embed": 0},
            models_dir=tmp_path / "no-models",
            services=("embed",),
            embedding_job=False,
        )
    )
    began = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        stack.start()
    # Noticed when the process exited, not at the start timeout (generous
    # margin: a slow machine is slow, not six times slower than that bound).
    assert time.monotonic() - began < stack.config.start_timeout / 2, "waited instead of failing"
    message = str(failed.value)
    assert message.startswith("embed exited with 1: bi-encoder not loaded")
    assert "recallatron prepare-models" in message
    assert "Nones" not in message
    assert stack.processes["embed"].poll() == 1
