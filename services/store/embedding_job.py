"""The embedding job (design §6): embeds memories after they commit, never in the
write path. Memories enter the `embedding_job` queue by trigger in their own
transaction; workers here claim batches with FOR UPDATE SKIP LOCKED and a
lease, call the embed service outside any transaction, and store a vector only
if the memory's text is still the one they embedded."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
import numpy as np
from prometheus_client import Counter, Gauge

from recallatron import internal_auth
from recallatron.embed_input import EMBED_INPUT_VERSION, compose
from recallatron.grpcclient import make_channel
from recallatron.internal_auth import Signer
from recallatron.v1 import embed_pb2, embed_pb2_grpc
from services.store.control import ControlPlane
from services.store.db import Databases
from services.store.settings import StoreSettings

log = logging.getLogger("recallatron.store.embedding_job")

# The embed input: its composition is versioned (recallatron.embed_input).
# Changing it (or the model) makes every stored vector stale; the dense arm
# uses only rows of this stamp.
embed_input = compose


EMBEDDED = Counter("recallatron_embedding_job_embedded_total", "Memories embedded.")
FAILURES = Counter("recallatron_embedding_job_failures_total", "Failed embed calls.")
BACKLOG = Gauge("recallatron_embedding_job_backlog", "Queued memories.", ["workspace"])

CLAIM = """
UPDATE embedding_job j
SET next_attempt_at = now() + make_interval(secs => %s), attempts = j.attempts + 1
FROM (
    SELECT memory_id FROM embedding_job
    WHERE next_attempt_at <= now()
    ORDER BY enqueued_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED
) due, memory m
WHERE j.memory_id = due.memory_id AND m.id = j.memory_id
RETURNING j.memory_id, j.text_revision, m.title, m.body
"""
# Only the worker that removes the queue entry for this exact text stores a
# vector: a memory corrected or forgotten meanwhile is skipped.
COMPLETE = "DELETE FROM embedding_job WHERE memory_id = %s AND text_revision = %s"
STORE_VECTOR = """
INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)
VALUES (%s, %s, %s, %b)
ON CONFLICT (memory_id, model_id, input_version) DO UPDATE SET embedding = EXCLUDED.embedding,
    created_at = now()
"""
RELEASE = """
UPDATE embedding_job SET next_attempt_at = now() + make_interval(secs => %s)
WHERE memory_id = ANY(%s)
"""
BACKLOG_COUNT = "SELECT count(*) FROM embedding_job"
# Memories whose current-stamp vector is missing: queued by rebuild.
ENQUEUE_MISSING = """
INSERT INTO embedding_job (memory_id, text_revision)
SELECT m.id, m.revision FROM memory m
WHERE m.invalidated_at IS NULL AND m.superseded_by_id IS NULL
  AND (%s OR NOT EXISTS (
        SELECT 1 FROM memory_embedding e
        WHERE e.memory_id = m.id AND e.model_id = %s AND e.input_version = %s))
ON CONFLICT (memory_id) DO UPDATE SET next_attempt_at = now(), attempts = 0
"""
DROP_STALE = """
DELETE FROM memory_embedding WHERE model_id <> %s OR input_version <> %s
"""
# Counts over what one member may see by audience (the workspace's and their
# own; NULL: every memory, for the operator): an owner's status must not count
# members' private memories (design §4, "Not found means not found").
STATUS = """
WITH seen AS (
    SELECT id FROM memory
    WHERE %(member)s::uuid IS NULL OR audience_member_id IS NULL
       OR audience_member_id = %(member)s::uuid
)
SELECT
  (SELECT count(*) FROM memory m JOIN seen USING (id)
   WHERE m.invalidated_at IS NULL AND m.superseded_by_id IS NULL),
  (SELECT count(*) FROM memory_embedding e JOIN seen ON seen.id = e.memory_id
   WHERE e.input_version = %(version)s),
  (SELECT count(*) FROM embedding_job j JOIN seen ON seen.id = j.memory_id)
"""


@dataclass(frozen=True)
class Batch:
    workspace: str
    rows: list[tuple[str, int, str, str]]


class Embedder:
    """The embed service, reached with a deadline."""

    def __init__(self, target: str, timeout: float, settings: StoreSettings | None = None) -> None:
        channel = make_channel(target, settings)
        key = settings.internal_signing_key() if settings is not None else b""
        if key:
            # Each call carries a service assertion (recallatron/internal_auth.py).
            channel = internal_auth.service_channel(channel, Signer(key, "embedding-job"))
        self.stub = embed_pb2_grpc.EmbedServiceStub(channel)
        self.timeout = timeout

    def embed(self, texts: Sequence[str]) -> tuple[str, list[list[float]]]:
        resp = self.stub.Embed(embed_pb2.EmbedRequest(texts=list(texts)), timeout=self.timeout)
        return resp.model_id, [list(vec.values) for vec in resp.vectors]

    def model_id(self) -> str:
        info = self.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=self.timeout)
        return info.embedder.model_id


def _vector(values: Sequence[float]) -> np.ndarray:
    # Sent in pgvector's binary form (see services.store.db).
    return np.asarray(values, dtype=np.float32)


class EmbeddingJob:
    def __init__(
        self,
        settings: StoreSettings,
        dbs: Databases,
        control: ControlPlane,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.dbs = dbs
        self.control = control
        self.embedder = embedder or Embedder(
            settings.embed_target, settings.embed_timeout_seconds, settings
        )
        self.stop_event = threading.Event()
        # Called at every step of the worker loop (services/store/heartbeat.py).
        self.beat: Callable[[], None] = lambda: None

    def _pool(self, workspace_id: str):  # type: ignore[no-untyped-def]
        ws = self.control.workspace(workspace_id)
        return self.dbs.owner_pool(ws.server, ws.database_name)

    def claim(self, workspace_id: str) -> Batch:
        BACKLOG.labels(workspace_id)  # exported from the first look, even at zero
        with self._pool(workspace_id).connection() as conn:
            rows = conn.execute(
                CLAIM, (self.settings.job_lease_seconds, self.settings.job_batch_size)
            ).fetchall()
        return Batch(workspace_id, [(str(r[0]), int(r[1]), r[2], r[3]) for r in rows])

    def process(self, batch: Batch) -> int:
        """Embeds one claimed batch; returns how many vectors were stored."""
        texts = [embed_input(title, body) for _, _, title, body in batch.rows]
        try:
            model_id, vectors = self.embedder.embed(texts)
        except grpc.RpcError:
            FAILURES.inc()
            # Leave the rows to be claimed again after a short pause.
            with self._pool(batch.workspace).connection() as conn:
                conn.execute(
                    RELEASE,
                    (self.settings.job_max_backoff_seconds, [r[0] for r in batch.rows]),
                )
            raise
        stored = 0
        with self._pool(batch.workspace).connection() as conn, conn.transaction():
            for (memory_id, revision, _, _), vector in zip(batch.rows, vectors, strict=True):
                if conn.execute(COMPLETE, (memory_id, revision)).rowcount == 1:
                    conn.execute(
                        STORE_VECTOR,
                        (memory_id, model_id, EMBED_INPUT_VERSION, _vector(vector)),
                    )
                    stored += 1
        EMBEDDED.inc(stored)
        return stored

    def backlog(self, workspace_id: str) -> int:
        with self._pool(workspace_id).connection() as conn:
            row = conn.execute(BACKLOG_COUNT).fetchone()
        count = int(row[0]) if row else 0
        BACKLOG.labels(workspace_id).set(count)
        return count

    def enqueue_rebuild(self, workspace_id: str, force: bool = False) -> int:
        """Queues every live memory lacking a vector of the current model and
        stamp (all of them with force); vectors of other stamps are dropped
        once no longer needed, by `drop_stale`."""
        model_id = self.embedder.model_id()
        with self._pool(workspace_id).connection() as conn:
            return conn.execute(ENQUEUE_MISSING, (force, model_id, EMBED_INPUT_VERSION)).rowcount

    def drop_stale(self, workspace_id: str) -> int:
        model_id = self.embedder.model_id()
        with self._pool(workspace_id).connection() as conn:
            return conn.execute(DROP_STALE, (model_id, EMBED_INPUT_VERSION)).rowcount

    def drain(self, workspace_id: str, progress: Callable[[int], None] | None = None) -> int:
        """Processes a workspace's queue until it is empty (used by rebuild)."""
        total = 0
        while not self.stop_event.is_set():
            batch = self.claim(workspace_id)
            if not batch.rows:
                if self.backlog(workspace_id) == 0:
                    return total
                time.sleep(self.settings.job_poll_seconds)
                continue
            total += self.process(batch)
            if progress:
                progress(self.backlog(workspace_id))
        return total

    def run_forever(self) -> None:
        """The worker loop: every workspace, batch after batch; backs off
        while the embed service is unreachable and drains when it returns."""
        backoff = 0.0
        # A workspace with nothing queued is looked at less and less often (up
        # to job_idle_max_seconds), so many quiet workspaces cost little.
        idle: dict[str, tuple[float, float]] = {}  # workspace -> (next look, interval)
        poll = self.settings.job_poll_seconds
        while not self.stop_event.is_set():
            self.beat()
            busy = False
            try:
                for workspace_id in self.control.all_workspaces():
                    self.beat()
                    now = time.monotonic()
                    next_look, interval = idle.get(workspace_id, (0.0, 0.0))
                    if now < next_look:
                        continue
                    batch = self.claim(workspace_id)
                    if batch.rows:
                        busy = True
                        idle.pop(workspace_id, None)
                        self.process(batch)
                        self.backlog(workspace_id)
                    else:
                        if not interval:
                            self.backlog(workspace_id)
                        interval = min(max(interval * 2, poll), self.settings.job_idle_max_seconds)
                        idle[workspace_id] = (now + interval, interval)
                backoff = 0.0
            except grpc.RpcError as exc:
                backoff = min(max(backoff * 2, 0.2), self.settings.job_max_backoff_seconds)
                log.warning(
                    "embed service unavailable; backing off",
                    extra={"code": str(exc.code()), "backoff_s": backoff},  # type: ignore[attr-defined]
                )
            except Exception:
                backoff = min(max(backoff * 2, 0.2), self.settings.job_max_backoff_seconds)
                log.exception("embedding job error; backing off")
            if backoff:
                self.stop_event.wait(backoff)
            elif not busy:
                self.stop_event.wait(self.settings.job_poll_seconds)


def status(
    dbs: Databases, control: ControlPlane, workspace_id: str, member_id: str | None = None
) -> tuple[int, int, int]:
    """(memories, embedded, pending) among what ``member_id`` may see by
    audience; every memory when None (the operator)."""
    ws = control.workspace(workspace_id)
    params = {"member": member_id, "version": EMBED_INPUT_VERSION}
    with dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
        row = conn.execute(STATUS, params).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])
