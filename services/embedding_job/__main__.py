"""`python -m services.embedding_job` (or `recallatron embed-job`): the embedding
job's process. Its workers take the workspaces the store's writes marked
(services/store/infrastructure/work_marks.py), claim rows with SKIP LOCKED and
embed them through the embed service."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from prometheus_client import start_http_server

from recallatron.logs import configure_logging
from services.embedding_job.heartbeat import FILE_NAME as HEARTBEAT_FILE
from services.embedding_job.heartbeat import Heartbeat
from services.embedding_job.job import EmbeddingJob
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.infrastructure.follow import DeletionFollower, MoveFollower
from services.store.infrastructure.work_marks import WorkListener
from services.store.settings import StoreSettings
from services.store.sql import queries


def build(settings: StoreSettings | None = None, wait: bool = True) -> EmbeddingJob:
    """The job on the servers of the settings, stopped by SIGTERM or SIGINT
    (``job.stop_event``); exits when the database never came up or a recorded
    server is unknown. The service waits for Postgres (services start in any
    order); a one-shot command (``wait=False``, `rebuild`) is told at once:
    psycopg.OperationalError, and keeps its own signal handling (the CLI's:
    a stop ends it where it is, saying what it left)."""
    settings = settings or StoreSettings()
    dbs = Databases(settings, process="embedding job")
    stop = threading.Event()
    if wait:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    control = ControlPlane(dbs)
    try:
        # The default server's budget is checked as it is bootstrapped.
        if not wait:
            dbs.bootstrap()
        elif not dbs.wait_and_bootstrap(stop):
            sys.exit(0)
        control.check_recorded_servers()  # unknown server names fail at start-up
        dbs.ensure_all_servers()  # and a budget the servers cannot hold
    except RuntimeError as exc:
        sys.exit(f"embedding job cannot run: {exc}")
    MoveFollower(dbs.control_url(), stop, control.follow_move).start()
    DeletionFollower(dbs.control_url(), stop, dbs, control.forget_workspace).start()
    job = EmbeddingJob(settings, dbs, control)
    job.stop_event = stop
    return job


def main() -> int:
    settings = StoreSettings()
    log = configure_logging("embedding-job", settings.log_level)
    if settings.metrics_port:
        start_http_server(settings.metrics_port)
    job = build(settings)
    if settings.job_sweep_on_start:
        job.queue.mark_all(job.control.all_workspaces())
    WorkListener(
        job.dbs.control_url(),
        job.queue,
        job.stop_event,
        lambda conn: [str(r[0]) for r in conn.execute(queries.WORK_MARKS)],
        refresh_seconds=settings.job_marks_refresh_seconds,
        everything=lambda conn: [str(r[0]) for r in conn.execute(queries.ALL_WORKSPACE_IDS)],
    ).start()
    # Read by the Deployment's liveness probe (k8s/base/embed-job.yaml).
    job.beat = Heartbeat(Path(settings.state_dir) / HEARTBEAT_FILE).beat
    log.info("embedding job running", extra={"workers": settings.job_workers})
    # Claims use SKIP LOCKED, so workers never take the same rows.
    workers = [
        threading.Thread(target=job.run_forever, name=f"embed-worker-{i}")
        for i in range(max(1, settings.job_workers))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    job.dbs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
