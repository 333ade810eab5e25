"""The recall pipeline (design §5), in plain Python.

It knows nothing of gRPC: it talks to the store and the embed service through
the two small interfaces below (:class:`StorePort`, :class:`EmbedPort`), whose
adapters live in :mod:`services.rank.peers`. The steps, in order:

1. resolve the mode (the request's, else the workspace default);
2. run the arms concurrently: lexical in the store; dense = embed the bare
   query, then the store's HNSW query (both arms apply eligibility in SQL);
3. fuse with Reciprocal Rank Fusion, ranks from 1;
4. walk the fused list in rank order (up to ``walk_limit`` candidates) through
   the store's link walk; only admitted rows go on, and the store reads the
   top admitted rows (with provenance) in the same call;
5. re-rank the first ``rerank_depth`` of them with the cross-encoder;
6. count, after the walk.

Degrade, never refuse: when the dense arm cannot contribute the lexical rows
answer (in every mode) and the outcome says why; when the cross-encoder cannot
run, the fused order stands.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from recallatron.vocabulary import DEFAULT_MODE, MODES
from services.rank import metrics

log = logging.getLogger("recallatron.rank.pipeline")

# The cross-encoder reads at most a few hundred tokens; longer passages only
# cost transfer and tokenisation.
MAX_PASSAGE_CHARS = 2_000
# Kept back from the caller's deadline to build and send the answer.
ANSWER_RESERVE_SECONDS = 0.05
# Below this, a cross-encoder call cannot finish: the fused order stands.
MIN_RERANK_SECONDS = 0.05

T = TypeVar("T")


# -- what the pipeline needs from its peers -----------------------------------


@dataclass(frozen=True)
class Candidate:
    """One row an arm returned: its rank in that arm (from 1) and its score
    (ts_rank_cd for the lexical arm, cosine for the dense arm)."""

    id: str
    rank: int
    score: float


@dataclass(frozen=True)
class DenseArm:
    candidates: list[Candidate]
    # False when the workspace holds no vectors of the current model and
    # embed-input version.
    embeddings_available: bool


@dataclass(frozen=True)
class QueryVector:
    model_id: str
    values: list[float]


@dataclass(frozen=True)
class WorkspaceSettings:
    default_recall_mode: str = DEFAULT_MODE
    rerank_depth: int = 20


class Degraded(Exception):
    """A peer could not serve one part of a recall. ``kind`` is a short metric
    label (``unavailable``, ``timeout``, ``absent``, ``failed``); the message
    says why in words an operator understands."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Passage(Protocol):
    """A hydrated memory as far as the pipeline cares: its text."""

    @property
    def title(self) -> str: ...

    @property
    def body(self) -> str: ...


M = TypeVar("M", bound=Passage)
M_co = TypeVar("M_co", bound=Passage, covariant=True)


@dataclass(frozen=True)
class Walked(Generic[M_co]):
    # The admitted ids, in the order given.
    admitted: list[str]
    # The first admitted memories, by id.
    memories: Mapping[str, M_co]


class StorePort(Protocol[M_co]):
    """The store calls of one recall. ``caller`` and ``filters`` are passed
    through untouched; ``timeout`` (seconds) caps the call's own deadline when
    the recall's deadline is nearer. Errors other than the dense arm's are the
    caller's problem (a recall cannot answer without the store); the dense arm
    raises :class:`Degraded`."""

    def settings(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings: ...

    def lexical(
        self, caller: Any, query: str, limit: int, filters: Any, timeout: float | None = None
    ) -> list[Candidate]: ...

    def dense(
        self,
        caller: Any,
        vector: QueryVector,
        limit: int,
        filters: Any,
        timeout: float | None = None,
    ) -> DenseArm: ...

    def walk(
        self,
        caller: Any,
        ids: Sequence[str],
        hydrate: int,
        filters: Any,
        timeout: float | None = None,
    ) -> Walked[M_co]:
        """The permission walk over ``ids``, and the first ``hydrate``
        admitted memories (with provenance), in one snapshot: what it refuses
        (no longer visible, superseded unless ``filters`` ask for those) is
        not answered, whatever the arms saw."""
        ...


class EmbedPort(Protocol):
    """Raise :class:`Degraded` when the embed service cannot answer."""

    def embed_query(self, text: str, timeout: float | None = None) -> QueryVector: ...

    def rerank(
        self, query: str, passages: Sequence[str], timeout: float | None = None
    ) -> list[float]: ...


# -- what it answers ------------------------------------------------------------


@dataclass
class Scores:
    lexical_rank: int = 0
    lexical_score: float = 0.0
    dense_rank: int = 0
    dense_cosine: float = 0.0
    fused_score: float = 0.0
    rerank_score: float = 0.0


@dataclass
class Result(Generic[M]):
    memory: M
    scores: Scores


@dataclass(frozen=True)
class Counts:
    """All taken after the permission walk (design §5.7), so none of them ever
    counts a row the caller may not see:

    - ``lexical``: admitted rows the lexical arm returned;
    - ``dense``: admitted rows the dense arm returned;
    - ``fused``: admitted rows of the fused list, each memory once
      (``lexical + dense - fused`` rows were found by both arms);
    - ``admitted``: rows the walk admitted, all of which may be returned.

    ``fused`` and ``admitted`` count the same rows by construction: the fused
    list is always walked whole (its length is bounded below the walk limit),
    and the rows the walk refused are left out of every count."""

    lexical: int = 0
    dense: int = 0
    fused: int = 0
    admitted: int = 0


@dataclass
class Outcome(Generic[M]):
    results: list[Result[M]]
    mode: str
    dense_available: bool
    dense_unavailable_reason: str = ""
    reranked: bool = False
    rerank_unavailable_reason: str = ""
    counts: Counts = field(default_factory=Counts)


@dataclass(frozen=True)
class Request:
    caller: Any
    workspace_id: str
    query: str
    # None: the workspace default.
    mode: str | None
    limit: int
    filters: Any = None
    skip_rerank: bool = False
    # time.monotonic() by which the answer is due (the caller's deadline);
    # every call is capped to what is left of it. None: no deadline.
    deadline: float | None = None


@dataclass(frozen=True)
class PipelineConfig:
    arm_limit: int = 100
    rrf_k: int = 60
    walk_limit: int = 500
    settings_cache_seconds: float = 5.0


# -- fusion ---------------------------------------------------------------------


@dataclass
class Fused:
    id: str
    scores: Scores


def rrf(lexical: Sequence[Candidate], dense: Sequence[Candidate], k: int = 60) -> list[Fused]:
    """Reciprocal Rank Fusion (design §5.4): score = sum over the arms that
    returned the row of 1 / (k + rank), ranks from 1 as each arm gave them.

    Ties (common: rank 1 of one arm against rank 1 of the other) go to the row
    with the better single rank, then to the better lexical rank (a row the
    lexical arm found before one it did not), so the order never depends on
    memory ids."""
    by_id: dict[str, Scores] = {}
    for c in lexical:
        s = by_id.setdefault(c.id, Scores())
        s.lexical_rank, s.lexical_score = c.rank, c.score
    for c in dense:
        s = by_id.setdefault(c.id, Scores())
        s.dense_rank, s.dense_cosine = c.rank, c.score
    for s in by_id.values():
        s.fused_score = sum(1.0 / (k + r) for r in (s.lexical_rank, s.dense_rank) if r > 0)

    def key(item: tuple[str, Scores]) -> tuple[float, int, int, str]:
        memory_id, s = item
        ranks = [r for r in (s.lexical_rank, s.dense_rank) if r > 0]
        lexical = s.lexical_rank or sys.maxsize
        return (-s.fused_score, min(ranks), lexical, memory_id)

    return [Fused(i, s) for i, s in sorted(by_id.items(), key=key)]


# -- the pipeline ---------------------------------------------------------------


class _SettingsCache:
    """Workspace settings for a few seconds: read on every recall, changed
    rarely, and a stale value for seconds is harmless."""

    def __init__(self, load: Callable[[str, float | None], WorkspaceSettings], ttl: float) -> None:
        self.load = load
        self.ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, WorkspaceSettings]] = {}

    def get(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(workspace_id)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        value = self.load(workspace_id, timeout)
        with self._lock:
            self._entries[workspace_id] = (now, value)
        return value


def _timed(stage: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        metrics.STAGE_SECONDS.labels(stage).observe(time.perf_counter() - start)


@dataclass
class _DenseOutcome:
    arm: DenseArm | None
    reason: str = ""
    kind: str = ""


class Pipeline(Generic[M]):
    def __init__(
        self,
        store: StorePort[M],
        embed: EmbedPort,
        config: PipelineConfig | None = None,
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.config = config or PipelineConfig()
        if 2 * self.config.arm_limit > self.config.walk_limit:
            # The fused list must fit the walk, or rows would go unchecked
            # and the counts would depend on where the walk stopped.
            raise ValueError("arm_limit must be at most half of walk_limit")
        self.settings = _SettingsCache(store.settings, self.config.settings_cache_seconds)
        self.executor = executor or ThreadPoolExecutor(max_workers=16, thread_name_prefix="arm")
        # The embed service's reachability as last seen, to log its changes once.
        self._embed_down = False
        self._embed_lock = threading.Lock()

    @staticmethod
    def _left(request: Request) -> float | None:
        """Seconds left for peer calls before the caller's deadline, keeping a
        little back to answer; None when there is no deadline."""
        if request.deadline is None:
            return None
        return max(0.0, request.deadline - time.monotonic() - ANSWER_RESERVE_SECONDS)

    def resolve_mode(self, request: Request, settings: WorkspaceSettings) -> str:
        mode = request.mode or settings.default_recall_mode or DEFAULT_MODE
        return mode if mode in MODES else DEFAULT_MODE

    def recall(self, request: Request) -> Outcome[M]:
        start = time.perf_counter()
        settings = self.settings.get(request.workspace_id, self._left(request))
        mode = self.resolve_mode(request, settings)
        metrics.RECALLS.labels(mode).inc()

        lexical_future: Future[list[Candidate]] | None = None
        if mode in ("lexical", "hybrid"):
            lexical_future = self.executor.submit(self._lexical, request)
        dense = _DenseOutcome(None)
        if mode in ("dense", "hybrid"):
            # The dense arm runs here while the lexical arm runs in its thread.
            dense = self._dense(request)
            if dense.arm is None:
                metrics.DEGRADED.labels("dense", dense.kind).inc()
                if lexical_future is None:
                    # Degrade, never refuse: the lexical rows answer in mode dense too.
                    lexical_future = self.executor.submit(self._lexical, request)
        lexical = lexical_future.result() if lexical_future is not None else []
        dense_rows = dense.arm.candidates if dense.arm is not None else []
        metrics.ARM_CANDIDATES.labels("lexical").observe(len(lexical))
        if dense.arm is not None:
            metrics.ARM_CANDIDATES.labels("dense").observe(len(dense_rows))

        fused = rrf(lexical, dense_rows, self.config.rrf_k)[: self.config.walk_limit]
        rerank_depth = 0 if request.skip_rerank else max(0, settings.rerank_depth)
        hydrate = max(request.limit, rerank_depth)
        walked: Walked[M] = (
            _timed(
                "walk",
                lambda: self.store.walk(
                    request.caller,
                    [f.id for f in fused],
                    hydrate,
                    request.filters,
                    timeout=self._left(request),
                ),
            )
            if fused
            else Walked([], {})
        )
        admitted_set = set(walked.admitted)
        admitted = [f for f in fused if f.id in admitted_set]
        counts = Counts(
            lexical=sum(1 for f in admitted if f.scores.lexical_rank),
            dense=sum(1 for f in admitted if f.scores.dense_rank),
            fused=len(admitted),
            admitted=len(admitted),
        )
        metrics.ARM_CANDIDATES.labels("fused").observe(len(fused))
        metrics.ARM_CANDIDATES.labels("admitted").observe(len(admitted))

        head = admitted[:hydrate]
        results = [Result(walked.memories[f.id], f.scores) for f in head if f.id in walked.memories]

        reranked, rerank_reason = self._rerank(request, results, rerank_depth)
        outcome: Outcome[M] = Outcome(
            results=results[: request.limit],
            mode=mode,
            dense_available=dense.arm is not None,
            dense_unavailable_reason=dense.reason,
            reranked=reranked,
            rerank_unavailable_reason=rerank_reason,
            counts=counts,
        )
        metrics.STAGE_SECONDS.labels("recall").observe(time.perf_counter() - start)
        return outcome

    def _lexical(self, request: Request) -> list[Candidate]:
        return _timed(
            "lexical",
            lambda: self.store.lexical(
                request.caller,
                request.query,
                self.config.arm_limit,
                request.filters,
                timeout=self._left(request),
            ),
        )

    def _dense(self, request: Request) -> _DenseOutcome:
        try:
            vector = _timed(
                "embed", lambda: self.embed.embed_query(request.query, timeout=self._left(request))
            )
        except Degraded as exc:
            self._embed_reachable(False, exc.message)
            return _DenseOutcome(None, f"query embedding: {exc.message}", f"embed_{exc.kind}")
        self._embed_reachable(True)
        try:
            arm = _timed(
                "dense",
                lambda: self.store.dense(
                    request.caller,
                    vector,
                    self.config.arm_limit,
                    request.filters,
                    timeout=self._left(request),
                ),
            )
        except Degraded as exc:
            return _DenseOutcome(None, f"dense candidates: {exc.message}", f"store_{exc.kind}")
        if not arm.embeddings_available:
            return _DenseOutcome(
                None,
                f"no memory of this workspace is embedded yet with model {vector.model_id} "
                "and the current embed-input version",
                "no_embeddings",
            )
        return _DenseOutcome(arm)

    def _rerank(self, request: Request, results: list[Result[M]], depth: int) -> tuple[bool, str]:
        """Re-orders the first ``depth`` admitted rows in place by cross-encoder
        score (ties keep the fused order). Returns (reranked, why not)."""
        if request.skip_rerank:
            return False, "skipped at the caller's request"
        if depth <= 0:
            return False, "the workspace's rerank depth is 0"
        if not results:
            return False, "nothing to re-rank"
        left = self._left(request)
        if left is not None and left < MIN_RERANK_SECONDS:
            metrics.DEGRADED.labels("rerank", "no_time").inc()
            return False, "no time left for the cross-encoder within the caller's deadline"
        top = results[:depth]
        passages = [_passage(r.memory) for r in top]
        try:
            scores = _timed(
                "rerank", lambda: self.embed.rerank(request.query, passages, timeout=left)
            )
        except Degraded as exc:
            metrics.DEGRADED.labels("rerank", exc.kind).inc()
            return False, exc.message
        if len(scores) != len(top):
            metrics.DEGRADED.labels("rerank", "failed").inc()
            return False, "the cross-encoder returned a score count that does not match"
        for result, score in zip(top, scores, strict=True):
            result.scores.rerank_score = float(score)
        order = sorted(range(len(top)), key=lambda i: -top[i].scores.rerank_score)
        results[: len(top)] = [top[i] for i in order]
        return True, ""

    def _embed_reachable(self, reachable: bool, why: str = "") -> None:
        """Logs when the embed service stops or starts answering (each recall
        in between is counted in the degrade metric, not logged)."""
        with self._embed_lock:
            changed = self._embed_down == reachable
            self._embed_down = not reachable
        if changed and reachable:
            log.info("embed service answers again; the dense arm is back")
        elif changed:
            log.warning("dense arm unavailable; answering with lexical rows", extra={"why": why})


def _passage(memory: Passage) -> str:
    text = f"{memory.title}\n{memory.body}" if memory.body else memory.title
    return text[:MAX_PASSAGE_CHARS]
