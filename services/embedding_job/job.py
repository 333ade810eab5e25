"""The embedding job (design §6): embeds memories after they commit, never in the
write path. Memories enter the `embedding_job` queue by trigger in their own
transaction; workers here claim batches with FOR UPDATE SKIP LOCKED and a
lease, call the embed service outside any transaction, and store a vector only
if the memory's text is still the one they embedded, holding the memory while
it goes in (HOLD_MEMORIES).

Failures are isolated per row: when the embed service refuses a batch, each
row is tried alone, so one bad row fails alone; a failing row is retried with
backoff and parked after ``job_row_max_attempts`` with its reason (GetStatus,
``recallatron_embedding_job_parked``). An unreachable embed service, or one
refusing the job itself (its key), costs no attempts: the rows go back to the
queue and the worker backs off. A workspace
whose database fails is backed off alone.

Only workspaces with work are visited: writes mark them in the control plane
and the job is notified (services/store/infrastructure/work_marks.py). The
memories it embeds also keep each database's analysis and vacuum up with its
writes (services/embedding_job/upkeep.py)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
import numpy as np
from prometheus_client import Counter, Gauge

from recallatron import errors
from recallatron.embed_input import EMBED_INPUT_VERSION, compose
from services.embedding_job.embedder import Embedder, EmbedUnavailable
from services.embedding_job.queries import (
    BACKLOG_COUNT,
    CLAIM,
    COMPLETE,
    DROP_STALE,
    ENQUEUE_MISSING,
    HOLD_MEMORIES,
    NEXT_DUE,
    RELEASE,
    ROW_FAILED,
    STORE_VECTOR,
    TEXTS,
)
from services.embedding_job.upkeep import Upkeep
from services.embedding_job.vectors import binary, unfit
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases, WorkspacePool
from services.store.infrastructure.work_marks import WorkQueue
from services.store.settings import StoreSettings

log = logging.getLogger("recallatron.store.embedding_job")

# The embed input: its composition is versioned (recallatron.embed_input).
# Changing it (or the model) makes every stored vector stale; the dense arm
# uses only rows of this stamp.
embed_input = compose


EMBEDDED = Counter("recallatron_embedding_job_embedded_total", "Memories embedded.")
FAILURES = Counter("recallatron_embedding_job_failures_total", "Failed embed calls.")
BACKLOG = Gauge("recallatron_embedding_job_backlog", "Queued memories.", ["workspace"])
ROW_FAILURES = Counter(
    "recallatron_embedding_job_row_failures_total",
    "Memories the embed service refused when sent alone, by status code.",
    ["code"],
)
PARKED = Gauge(
    "recallatron_embedding_job_parked",
    "Memories parked after their last failed attempt, by workspace.",
    ["workspace"],
)

# Codes that say the embed service (not the row) is the problem: the rows go
# back to the queue without spending an attempt. A refusal of the job itself
# (its internal key, while a rotation's pods overlap; a service without the
# call) is no row's fault either: spent as attempts, it parked every memory
# written meanwhile for good.
TRANSIENT = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
# A parked row's reason is kept this short (a status, never memory text).
MAX_REASON_CHARS = 300


def drop_series(workspace_id: str) -> None:
    """A workspace with nothing queued or parked leaves the per-workspace
    gauges (absent reads as zero): the series follow the workspaces with
    work, not every workspace the job has seen."""
    for gauge in (BACKLOG, PARKED):
        with contextlib.suppress(KeyError):
            gauge.remove(workspace_id)


@dataclass(frozen=True)
class Batch:
    workspace: str
    rows: list[tuple[str, int, str, str]]


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
        # The marked workspaces (fed by a WorkListener:
        # services/store/infrastructure/work_marks.py).
        self.queue = WorkQueue()
        self.upkeep = Upkeep()
        # Called at every step of the worker loop (services/embedding_job/heartbeat.py).
        self.beat: Callable[[], None] = lambda: None
        # A worker waiting out a backoff beats this often: a backoff longer
        # than the liveness probe's max-age must not read as a hang.
        self.beat_every = 1.0
        # The embed service's max_batch once a claim was refused for being
        # above it (0: none learned); claims then hold no more. A held limit
        # is asked again every limit_refresh_seconds and after the service was
        # found away, so one restarted with another max_batch is followed
        # without restarting the job.
        self.batch_limit = 0
        self.limit_refresh_seconds = 60.0
        self._limit_asked = 0.0  # monotonic; when the held limit was last asked
        self._limit_lock = threading.Lock()

    def _pool(self, workspace_id: str) -> WorkspacePool:
        ws = self.control.workspace(workspace_id)
        return self.dbs.owner_pool(ws.server, ws.database_name)

    def claim(self, workspace_id: str) -> Batch:
        size = self.batch_size()  # may ask the embed service: no connection held
        with self._pool(workspace_id).connection() as conn:
            claimed = conn.execute(CLAIM, (self.settings.job_lease_seconds, size)).fetchall()
            conn.commit()  # the leases stand; the text is read after them
            texts = {
                str(r[0]): (r[1], r[2])
                for r in conn.execute(TEXTS, ([r[0] for r in claimed],)).fetchall()
            }
        # A memory gone since (its queue row went with it) is left out.
        return Batch(
            workspace_id,
            [(str(r[0]), int(r[1]), *texts[str(r[0])]) for r in claimed if str(r[0]) in texts],
        )

    def batch_size(self) -> int:
        """Rows a claim takes: job_batch_size, within the embed service's limit
        (asked again when due)."""
        if self.batch_limit and time.monotonic() - self._limit_asked >= self.limit_refresh_seconds:
            # Unanswered: the limit held stays, asked again at the next claim.
            with contextlib.suppress(EmbedUnavailable):
                self._learn(self.embedder.max_batch())
        size = self.settings.job_batch_size
        return min(size, self.batch_limit) if self.batch_limit else size

    def _limit_stale(self) -> None:
        """The embed service was found away: the one that comes back may take
        another max_batch, so the next claim asks it first."""
        with self._limit_lock:
            self._limit_asked = float("-inf")

    def _learn(self, limit: int) -> None:
        """``limit`` (the service's max_batch; 0: it does not say) becomes the
        one claims keep within; none when job_batch_size fits in it."""
        size = self.settings.job_batch_size
        held = limit if 0 < limit < size else 0
        with self._limit_lock:
            self._limit_asked = time.monotonic()
            if self.batch_limit == held:
                return
            self.batch_limit = held
        if held:
            log.warning(
                f"job_batch_size ({size}) is above the embed service's max_batch "
                f"({held}): claiming {held} memories at a time",
                extra={"job_batch_size": size, "max_batch": held},
            )
        else:
            log.info(
                f"the embed service now takes job_batch_size ({size}) memories a call "
                f"(max_batch {limit or 'not said'}): claiming {size} at a time",
                extra={"job_batch_size": size, "max_batch": limit},
            )

    def _limit_below(self, asked: int) -> int:
        """The embed service's max_batch when ``asked`` texts are above it,
        else 0 (as when it does not say or cannot be asked: each row is then
        tried alone, which finds out)."""
        if self.batch_limit and asked <= self.batch_limit:
            return 0  # within what the service is known to take
        try:
            limit = self.embedder.max_batch()
        except EmbedUnavailable:
            return 0
        if not 0 < limit < asked:
            return 0
        self._learn(limit)
        return limit

    def _in_parts(self, batch: Batch, limit: int) -> int:
        """A claim above the service's limit, sent ``limit`` rows a call; when
        the service goes away midway the rows not sent go back to the queue."""
        stored = 0
        for start in range(0, len(batch.rows), limit):
            try:
                stored += self.process(Batch(batch.workspace, batch.rows[start : start + limit]))
            except EmbedUnavailable:
                if rest := [r[0] for r in batch.rows[start + limit :]]:
                    self._release(batch.workspace, rest)
                raise
        return stored

    def process(self, batch: Batch) -> int:
        """Embeds one claimed batch; returns how many vectors were stored.
        Raises :class:`EmbedUnavailable` when the embed service cannot be
        reached (the rows are back in the queue)."""
        texts = [embed_input(title, body) for _, _, title, body in batch.rows]
        try:
            model_id, vectors = self.embedder.embed(texts)
        except grpc.RpcError as exc:
            FAILURES.inc()
            if exc.code() in TRANSIENT or len(batch.rows) == 1:
                return self._alone(batch.workspace, batch.rows, exc)
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT and (
                limit := self._limit_below(len(batch.rows))
            ):
                # More texts than the service takes in a call (job_batch_size
                # above its max_batch): in calls it takes, not one per row.
                return self._in_parts(batch, limit)
            # The service refused the batch: one row may be at fault, so each
            # is tried alone and only the bad one fails.
            log.info(
                "embed call refused; trying each memory alone",
                extra={"workspace": batch.workspace, "rows": len(batch.rows)},
            )
            return self._alone(batch.workspace, batch.rows)
        if len(vectors) != len(batch.rows) and len(batch.rows) > 1:
            # An answer that does not match the texts asked: each row alone.
            return self._alone(batch.workspace, batch.rows)
        return self._store(batch.workspace, batch.rows, model_id, vectors)

    def _alone(
        self,
        workspace: str,
        rows: Sequence[tuple[str, int, str, str]],
        failed: grpc.RpcError | None = None,
    ) -> int:
        """Each row in its own call (``failed``: the first row's call already
        failed so). A transient failure puts the rest back and raises."""
        stored = 0
        for i, row in enumerate(rows):
            memory_id, revision, title, body = row
            exc = failed if i == 0 else None
            if exc is None:
                try:
                    model_id, vectors = self.embedder.embed([embed_input(title, body)])
                except grpc.RpcError as err:
                    exc = err
                else:
                    stored += self._store(workspace, [row], model_id, vectors)
                    continue
            code = exc.code()
            if code in TRANSIENT:
                self._limit_stale()
                self._release(workspace, [r[0] for r in rows[i:]])
                raise EmbedUnavailable(code, exc.details() or "") from exc
            self._row_failed(workspace, memory_id, revision, code, exc.details() or "")
        return stored

    def _release(self, workspace: str, memory_ids: list[str], delay: float | None = None) -> None:
        wait = self.settings.job_max_backoff_seconds if delay is None else delay
        with self._pool(workspace).connection() as conn:
            conn.execute(RELEASE, (wait, memory_ids))

    def _row_failed(
        self, workspace: str, memory_id: str, revision: int, code: grpc.StatusCode, details: str
    ) -> None:
        ROW_FAILURES.labels(code.name).inc()
        reason = f"{code.name}: {details}"[:MAX_REASON_CHARS]
        s = self.settings
        with self._pool(workspace).connection() as conn:
            row = conn.execute(
                ROW_FAILED,
                {
                    "reason": reason,
                    "max_attempts": s.job_row_max_attempts,
                    "base": s.job_row_backoff_seconds,
                    "cap": s.job_row_max_backoff_seconds,
                    "memory_id": memory_id,
                    "revision": revision,
                },
            ).fetchone()
        parked = bool(row and row[0])
        log.log(
            logging.WARNING if parked else logging.INFO,
            "memory parked: the embed service refused it" if parked else "embedding failed",
            extra={"workspace": workspace, "memory_id": memory_id, "reason": reason},
        )

    def _store(
        self,
        workspace: str,
        rows: Sequence[tuple[str, int, str, str]],
        model_id: str,
        vectors: Sequence[np.ndarray],
    ) -> int:
        if len(vectors) != len(rows):
            answered = f"{len(vectors)} vectors answered for {len(rows)} texts"
            problems = {r[0]: answered for r in rows}
        else:
            problems = {
                r[0]: problem for r, v in zip(rows, vectors, strict=True) if (problem := unfit(v))
            }
        for memory_id, revision, _title, _body in rows:
            if memory_id in problems:
                # Fails alone, as a refused row does: retried, then parked
                # with the reason; its neighbours go in.
                self._row_failed(
                    workspace,
                    memory_id,
                    revision,
                    grpc.StatusCode.INTERNAL,
                    f"the embed service answered no usable vector: {problems[memory_id]}",
                )
        by_id = {r[0]: v for r, v in zip(rows, vectors, strict=False) if r[0] not in problems}
        rows = [r for r in rows if r[0] in by_id]
        if not rows:
            return 0
        with self._pool(workspace).connection() as conn, conn.transaction():
            held = {str(r[0]) for r in conn.execute(HOLD_MEMORIES, ([r[0] for r in rows],))}
            busy = [r[0] for r in rows if r[0] not in held]
            rows = [r for r in rows if r[0] in held]
            done = conn.execute(COMPLETE, ([r[0] for r in rows], [r[1] for r in rows]))
            completed = [str(r[0]) for r in done.fetchall()]
            if completed:
                with conn.cursor() as cur:
                    cur.executemany(
                        STORE_VECTOR,
                        [
                            (memory_id, model_id, EMBED_INPUT_VERSION, binary(by_id[memory_id]))
                            for memory_id in completed
                        ],
                    )
        if busy:
            # Embedded again once the change has committed; no attempt spent.
            self._release(workspace, busy, self.settings.job_poll_seconds)
        EMBEDDED.inc(len(completed))
        return len(completed)

    def wrote(self, workspace_id: str, stored: int) -> int:
        """``stored`` memories embedded: counted toward the database's next
        analysis and vacuum, which run here when they are enough."""
        if stored:
            self.upkeep.wrote(workspace_id, stored, self._pool(workspace_id))
        return stored

    def backlog(self, workspace_id: str) -> int:
        """Rows waiting (parked ones left out); sets both gauges."""
        with self._pool(workspace_id).connection() as conn:
            row = conn.execute(BACKLOG_COUNT).fetchone()
        count, parked = (int(row[0]), int(row[1])) if row else (0, 0)
        BACKLOG.labels(workspace_id).set(count)
        PARKED.labels(workspace_id).set(parked)
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
                    if progress:
                        # The queue is empty, whoever embedded it (the running
                        # job, woken by the same rows, may take some).
                        progress(0)
                    return total
                time.sleep(self.settings.job_poll_seconds)
                continue
            total += self.wrote(workspace_id, self.process(batch))
            if progress:
                progress(self.backlog(workspace_id))
        return total

    def visit(self, workspace_id: str) -> float | None:
        """One look at a marked workspace: a batch embedded when one is due.
        Returns when to look again (monotonic), None when nothing is left to
        do (its mark is then cleared, unless a newer one stands)."""
        seq = self.control.work_seq(workspace_id)  # read before the claim
        batch = self.claim(workspace_id)
        if batch.rows:
            try:
                stored = self.process(batch)
            except EmbedUnavailable:
                # The gauges follow the queue while embed is away: the alert
                # for a stall reads a backlog that nothing embeds.
                self.backlog(workspace_id)
                raise
            self.wrote(workspace_id, stored)
            self.backlog(workspace_id)
            return time.monotonic()  # again, after the others now due
        with self._pool(workspace_id).connection() as conn:
            row = conn.execute(NEXT_DUE).fetchone()
        assert row is not None
        due_in, queued, parked = row[0], int(row[1]), int(row[2])
        BACKLOG.labels(workspace_id).set(queued)
        PARKED.labels(workspace_id).set(parked)
        if due_in is not None:
            # Rows leased, backing off or just released: looked at when due.
            return time.monotonic() + max(float(due_in), 0.05)
        if seq is not None and not self.control.clear_work(workspace_id, seq):
            return time.monotonic()  # marked again meanwhile
        if not queued and not parked:
            drop_series(workspace_id)
        return None

    def _pause(self, seconds: float) -> None:
        """Waits ``seconds`` (less when stopped), beating meanwhile."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0 and not self.stop_event.is_set():
            self.beat()
            self.stop_event.wait(min(left, self.beat_every))

    def run_forever(self) -> None:
        """A worker: takes the marked workspace due first, one batch at a
        time (services/store/infrastructure/work_marks.py); backs off while the embed
        service is unreachable and drains when it returns. A workspace whose
        database fails is backed off alone: the others go on."""
        failing: dict[str, float] = {}  # workspace -> its current backoff
        cap = self.settings.job_max_backoff_seconds
        while not self.stop_event.is_set():
            self.beat()
            workspace_id = self.queue.take(timeout=1.0)
            if workspace_id is None:
                continue
            next_at: float | None = time.monotonic()
            try:
                next_at = self.visit(workspace_id)
                failing.pop(workspace_id, None)
            except EmbedUnavailable as exc:
                log.warning(
                    "embed service unavailable; backing off",
                    extra={"code": exc.code.name, "backoff_s": cap},
                )
                self.queue.done(workspace_id, time.monotonic() + cap)
                self._pause(cap)
                continue
            except errors.NotFound:
                # Deleted meanwhile (services/store/domain/deletion.py): nothing
                # is left to embed there, and nothing to look at again.
                log.info("workspace deleted; dropped", extra={"workspace": workspace_id})
                self.upkeep.forget(workspace_id)
                drop_series(workspace_id)
                next_at = None
            except Exception:
                pause = min(max(failing.get(workspace_id, 0.0) * 2, 0.2), cap)
                failing[workspace_id] = pause
                next_at = time.monotonic() + pause
                log.exception(
                    "embedding job error in one workspace; backing it off",
                    extra={"workspace": workspace_id, "backoff_s": pause},
                )
            self.queue.done(workspace_id, next_at)
