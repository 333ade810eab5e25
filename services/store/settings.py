from __future__ import annotations

from pathlib import Path

from pydantic import Field

from recallatron.settings import (
    MAX_SETTINGS_CACHE_SECONDS,
    STORE_ADDRESS,
    EmbedPeer,
    default_state_dir,
)


class StoreSettings(EmbedPeer):
    # Address the store's gRPC server binds.
    store_listen: str = STORE_ADDRESS
    # Admin connection to the default Postgres server (creates databases and
    # roles, runs migrations). Empty: the local embedded Postgres, whose URL
    # `recallatron up` passes in; see README.md (Configuration) and
    # docs/kubernetes.md (Secrets).
    database_url: str = ""
    app_password: str = ""
    # PBKDF2 rounds of the app role's SCRAM verifier (Postgres's own default is
    # 4096). Every new backend pays them at connect, half of its connect
    # time here (`python -m benchmarks.scram_connect`), paid by every recall
    # on a workspace just woken. Rounds slow a guess at a weak password from a stolen
    # verifier; a generated password of 256 random bits cannot be guessed at
    # any rate, so the local stack, which generates it, sets 1. Keep the
    # default for a password a person chose.
    app_password_scram_iterations: int = Field(default=4096, ge=1)
    # Named Postgres servers (docs/servers.md). The server above is named
    # default_server and holds the control plane; more come as `name=url`
    # pairs and/or as one file per name holding its URL (a mounted Secret).
    # The control plane records names only; each replica resolves them here.
    default_server: str = "default"
    postgres_servers: str = ""
    postgres_servers_dir: str = ""
    # The connection budget (services/store/infrastructure/budget.py, docs/servers.md): per
    # Postgres server, the most connections this process opens to workspace
    # databases, shared by all of them; the embedding job has its own.
    connection_budget: int = Field(default=16, ge=1)
    job_connection_budget: int = Field(default=4, ge=1)
    # Connections one workspace database may hold at once (app role, and the
    # owner role for migrations and the embedding job), within the budget.
    pool_max_size: int = Field(default=8, ge=1)
    owner_pool_max_size: int = Field(default=2, ge=1)
    # An idle connection closes after this long, so a workspace nobody uses
    # holds none; a busy one beyond the budget takes an idle one's place.
    pool_max_idle_seconds: float = Field(default=5.0, gt=0)
    # For this long after a workspace wakes up (its first connection since it
    # had none), its concurrent calls share that connection rather than open
    # one each: a new backend costs a connect and its own catalog and plan
    # caches filled from scratch. Recall over 150 workspaces in turn, p50:
    # 137-143 ms opening at once, 60-65 ms sharing (docs/benchmarks.md).
    pool_grow_after_seconds: float = Field(default=0.05, ge=0)
    # The control plane's pool (one per process, on the default server).
    control_pool_max_size: int = Field(default=4, ge=1)
    # What the start-up check counts against each server's max_connections
    # (docs/servers.md): the replicas of the store and of the embedding job,
    # and connections kept free for operators (psql, backups, migrate-db).
    store_replicas: int = Field(default=1, ge=1)
    job_replicas: int = Field(default=1, ge=1)
    connection_reserve: int = Field(default=10, ge=0)
    # A Postgres server that stops answering without closing its connections
    # (a network cut that drops packets, a host gone) ends each of them within
    # this many seconds: TCP keepalives and tcp_user_timeout on every
    # connection the store and the embedding job open, unless the server's URL
    # sets its own (infrastructure/servers.py, tcp_watch). A call on such a
    # connection then answers UNAVAILABLE instead of waiting out its deadline.
    # 0 leaves the kernel's defaults (a cut noticed after minutes).
    postgres_silence_seconds: int = Field(default=10, ge=0)
    # Seconds a caller waits for a pooled connection before UNAVAILABLE.
    pool_timeout_seconds: float = Field(default=5.0, gt=0)
    # The dense arm ranks all the vectors of a caller who may see at most this
    # many exactly (one scan, no HNSW graph), and walks the HNSW graph of their
    # purpose beyond it (services/store/domain/recall.py, dense_exact). Exact
    # answers are the nearest rows themselves, and the same after an import, a
    # restore or a `rebuild`, where a graph is built anew with random levels
    # of its own (docs/export.md). The price: about 1 us a vector on the
    # development machine (10 ms at 10,500 against 3 ms for the graph's scan;
    # recall p50 +5 ms at 10,000 memories, docs/benchmarks.md, "The exact
    # dense plan"). 0 keeps only the narrow-caller rule.
    dense_exact_rows: int = Field(default=12_000, ge=0)
    # What a killed import left (docs/export.md, "An import that was killed")
    # is removed at start and then this often, so its slug is free again
    # without a restart; an import whose process lives is never touched.
    unfinished_imports_sweep_seconds: float = Field(default=60.0, gt=0)
    # How long a workspace's record (its location and settings) is reused:
    # recall's dense_floor and expiry gate follow a settings change made
    # through another replica within it. The same variable holds rank's copy
    # of the default mode and rerank depth (docs/recall.md).
    settings_cache_seconds: float = Field(default=5.0, ge=0, le=MAX_SETTINGS_CACHE_SECONDS)
    # Per-statement limit inside Postgres (milliseconds).
    statement_timeout_ms: int = Field(default=15_000, ge=1)
    # The embed service (embed_target), used only by the embedding job.
    embed_timeout_seconds: float = Field(default=30.0, gt=0)
    state_dir: Path = default_state_dir()
    # The embedding job. It learns which workspaces have work from the
    # control plane's work marks (a notification each).
    # Memories a claim takes; one above the embed service's max_batch is cut
    # to it once a claim is refused for it (said once in the log).
    job_batch_size: int = Field(default=32, ge=1)
    job_poll_seconds: float = Field(default=0.5, gt=0)
    # It reads every mark again this often, in case a notification was missed.
    job_marks_refresh_seconds: float = Field(default=30.0, gt=0)
    # At start, the job looks once at every workspace, marked or not: rows
    # queued by writes that marked nothing (a store of a version before the
    # marks, during a rolling upgrade; a write killed between its commit and
    # its mark, so never acknowledged) are embedded all the same.
    job_sweep_on_start: bool = True
    # A claimed batch not finished within this many seconds is claimed again.
    job_lease_seconds: float = Field(default=60.0, gt=0)
    # The pause while the embed service is unreachable (and a failing
    # workspace's longest); below 0.1 s the job would retry without a pause,
    # a warning each time.
    job_max_backoff_seconds: float = Field(default=5.0, ge=0.1)
    # A memory the embed service refuses is retried alone, after a backoff
    # that doubles from job_row_backoff_seconds up to job_row_max_backoff_seconds,
    # and parked after job_row_max_attempts (design §6): GetStatus shows why.
    job_row_max_attempts: int = Field(default=5, ge=1)
    job_row_backoff_seconds: float = Field(default=1.0, ge=0)
    job_row_max_backoff_seconds: float = Field(default=300.0, ge=0)
    # Batches in flight at once, each in its own thread: the embed service runs
    # one ONNX thread per call, so two calls keep two cores busy.
    job_workers: int = Field(default=2, ge=1)
