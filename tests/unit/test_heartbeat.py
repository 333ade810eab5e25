"""The embedding job's liveness heartbeat (services/embedding_job/heartbeat.py): what
the exec probe concludes from the file, and that the job's worker loop keeps
it fresh while it works or waits out an embed outage, and lets it go stale
when a step hangs. The probe inside the real image, with the job hung by
SIGSTOP, is tests/k8s/test_image.py."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import grpc
import pytest

from services.embedding_job.embedder import EmbedUnavailable
from services.embedding_job.heartbeat import Heartbeat, check, main
from services.embedding_job.job import Batch, EmbeddingJob
from services.store.settings import StoreSettings


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_check_reads_ages_per_worker(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    assert check(path, 10, now=0)[0] is False  # not written yet
    path.write_text("{not json")
    assert check(path, 10, now=0)[0] is False
    path.write_text(json.dumps({"workers": {}}))
    assert check(path, 10, now=0) == (False, "no worker has reported")
    path.write_text(json.dumps({"workers": {"w0": 100.0, "w1": 95.0}}))
    assert check(path, 10, now=104)[0] is True
    alive, why = check(path, 10, now=106)
    assert not alive and "w1 11s" in why and "w0" not in why


def test_beats_are_written_at_most_once_per_interval(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    path.write_text(json.dumps({"workers": {"old-process": 1.0}}))
    clock = Clock()
    beat = Heartbeat(path, min_interval=1.0, clock=clock)
    assert not path.exists(), "an earlier container's file must not speak for this one"
    beat.beat()
    first = path.read_text()
    clock.now += 0.5
    beat.beat()
    assert path.read_text() == first
    clock.now += 0.6
    beat.beat()
    assert json.loads(path.read_text())["workers"] == {threading.current_thread().name: 1001.1}


def test_probe_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hb"
    path.write_text(json.dumps({"workers": {"w0": time.time()}}))
    assert main(["--max-age", "60", "--file", str(path)]) == 0
    path.write_text(json.dumps({"workers": {"w0": time.time() - 120}}))
    assert main(["--max-age", "60", "--file", str(path)]) == 1
    assert "no progress for over 60s" in capsys.readouterr().err


class Down(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class OneWorkspace:
    """A control plane in which one workspace stays marked as having work."""

    def work_seq(self, workspace_id: str) -> int:
        return 1

    def clear_work(self, workspace_id: str, seq: int) -> bool:
        return False


def job_with(claim, process, tmp_path: Path) -> tuple[EmbeddingJob, Path]:  # type: ignore[no-untyped-def]
    settings = StoreSettings(job_poll_seconds=0.01, job_max_backoff_seconds=0.1)
    job = EmbeddingJob(settings, dbs=None, control=OneWorkspace(), embedder=object())  # type: ignore[arg-type]
    job.claim = claim  # type: ignore[method-assign]
    job.process = process  # type: ignore[method-assign]
    job.backlog = lambda _ws: 1  # type: ignore[method-assign,assignment]
    job.queue.mark("ws")
    path = tmp_path / "hb"
    job.beat = Heartbeat(path, min_interval=0.02).beat
    return job, path


def run_for(job: EmbeddingJob, seconds: float) -> threading.Thread:
    worker = threading.Thread(target=job.run_forever, name="embed-worker-0", daemon=True)
    worker.start()
    time.sleep(seconds)
    return worker


def test_an_embed_outage_keeps_the_heartbeat_fresh(tmp_path: Path) -> None:
    def process(_batch: Batch) -> int:
        raise Down()

    job, path = job_with(lambda ws: Batch(ws, [("m", 1, "t", "b")]), process, tmp_path)
    # Fresh within half the time it ran: it kept beating, not just once.
    worker = run_for(job, 0.6)
    try:
        alive, why = check(path, max_age=0.3)
        assert alive, why
    finally:
        job.stop_event.set()
        worker.join(5)


def test_a_hung_step_lets_the_heartbeat_go_stale(tmp_path: Path) -> None:
    release = threading.Event()
    entered = threading.Event()

    def claim(ws: str) -> Batch:
        entered.set()
        release.wait(30)  # a call with no deadline that never answers
        return Batch(ws, [])

    job, path = job_with(claim, lambda _b: 0, tmp_path)
    worker = run_for(job, 0.0)
    try:
        assert entered.wait(5)
        time.sleep(0.4)
        alive, why = check(path, max_age=0.3)
        assert not alive and "embed-worker-0" in why, why
    finally:
        job.stop_event.set()
        release.set()
        worker.join(5)


def test_a_long_backoff_keeps_the_heartbeat_fresh(tmp_path: Path) -> None:
    """An embed outage with a backoff longer than the probe's max-age (say
    JOB_MAX_BACKOFF_SECONDS=300 against --max-age 120): the worker slept
    the whole backoff without a beat, so the probe restarted the job for an
    outage a restart cannot mend. It beats while it waits."""

    def process(_batch: Batch) -> int:
        raise EmbedUnavailable(grpc.StatusCode.UNAVAILABLE)

    job, path = job_with(lambda ws: Batch(ws, [("m", 1, "t", "b")]), process, tmp_path)
    job.settings = StoreSettings(job_poll_seconds=0.01, job_max_backoff_seconds=30)
    job.beat_every = 0.05
    worker = run_for(job, 0.6)
    try:
        alive, why = check(path, max_age=0.3)
        assert alive, why
    finally:
        job.stop_event.set()
        worker.join(5)
    assert not worker.is_alive()
