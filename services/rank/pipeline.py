"""The recall pipeline (design §5), in plain Python.

It knows nothing of gRPC: it talks to the store and the embed service through
two small interfaces (:class:`StorePort`, :class:`EmbedPort`, in
:mod:`services.rank.ports`), whose adapters live in :mod:`services.rank.peers`. The steps, in order:

1. resolve the mode (the request's, else the workspace default);
2. run the arms concurrently: lexical in the store; dense = embed the bare
   query, then the store's HNSW query (both arms apply eligibility in SQL);
3. fuse with Reciprocal Rank Fusion, ranks from 1;
4. walk the fused list in rank order (up to ``walk_limit`` candidates) through
   the store's link walk; only admitted rows go on, and the store reads the
   top admitted rows (with provenance) in the same call, and in hybrid the
   episode neighbours of the first rows, which are lifted a little;
5. re-rank the first ``rerank_depth`` of them with the cross-encoder;
6. count, after the walk.

Degrade, never refuse: when the dense arm cannot contribute the lexical rows
answer (in every mode) and the outcome says why; when the cross-encoder cannot
run, the fused order stands.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from recallatron.expiring import ExpiringCache
from recallatron.vocabulary import (
    DEFAULT_MODE,
    EPISODE_NEIGHBOUR_WEIGHT,
    EPISODE_SEED_POWER,
    MODES,
)
from services.rank import metrics
from services.rank.cross_encoder_gate import CrossEncoderGate
from services.rank.dense_outcome import DenseOutcome
from services.rank.fusion import Fused, Scores, agreement, lift_neighbours, order_page, rrf
from services.rank.ports import (
    Beside,
    Candidate,
    Degraded,
    DenseArm,
    EmbedPort,
    M,
    Passage,
    QueryVector,
    StorePort,
    Walked,
    WorkspaceSettings,
)
from services.rank.relevance import nothing_relevant

__all__ = [
    "Beside",
    "Candidate",
    "Counts",
    "Degraded",
    "DenseArm",
    "EmbedPort",
    "Fused",
    "Outcome",
    "Passage",
    "Pipeline",
    "PipelineConfig",
    "QueryVector",
    "Request",
    "Result",
    "Scores",
    "StorePort",
    "Walked",
    "WorkspaceSettings",
    "rrf",
]


log = logging.getLogger("recallatron.rank.pipeline")

# The cross-encoder reads at most a few hundred tokens; longer passages only
# cost transfer and tokenisation.
MAX_PASSAGE_CHARS = 2_000
# Kept back from the caller's deadline to build and send the answer.
ANSWER_RESERVE_SECONDS = 0.05
# Below this, a cross-encoder call cannot finish: the fused order stands.
MIN_RERANK_SECONDS = 0.05

T = TypeVar("T")


# -- what it answers ------------------------------------------------------------


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
    # No returned row judged relevant (services/rank/relevance.py).
    nothing_relevant: bool = False
    # The cards of the entities the query names, when asked for.
    entities: Sequence[Any] = ()
    # The owner's history evidence, when asked for.
    history: Sequence[Any] = ()
    # Why the cards or the history were asked for and are not there.
    entities_unavailable_reason: str = ""
    history_unavailable_reason: str = ""
    # The entities whose cards, and how many history entries, the store left
    # out to keep the answer under its size budget.
    more_entities: Sequence[Any] = ()
    history_left_out: int = 0
    # Memories the caller may see without a vector (services/rank/dense_outcome.py).
    not_embedded: int = 0
    dense_behind_reason: str = ""


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
    # Compose the whole answer (design §5): the entity cards the query names,
    # and the owner's history evidence, read beside the arms.
    entity_cards: bool = False
    include_history: bool = False
    # time.monotonic() by which the answer is due (the caller's deadline);
    # every call is capped to what is left of it. None: no deadline.
    deadline: float | None = None


@dataclass(frozen=True)
class PipelineConfig:
    arm_limit: int = 100
    rrf_k: int = 60
    walk_limit: int = 500
    settings_cache_seconds: float = 5.0
    # Hybrid only: the episode neighbours of this many first fused rows are
    # lifted (fusion.lift_neighbours); 0 turns it off.
    episode_neighbours_of: int = 2
    # After the embed service did not answer, or has no cross-encoder, the
    # cross-encoder is not asked again for this long (cross_encoder_gate.py;
    # docs/recall.md); 0 asks on every recall.
    cross_encoder_recheck_seconds: float = 10.0


# -- the pipeline ---------------------------------------------------------------


# The most workspaces whose settings one rank process keeps (about 300 bytes
# each); beyond it the oldest read are dropped first, and read again at their
# next recall. Expired entries are dropped too, so the cache holds only the
# workspaces recalled within settings_cache_seconds.
SETTINGS_CACHE_ENTRIES = 10_000


class _SettingsCache:
    """Workspace settings for a few seconds: read on every recall, changed
    rarely, and a stale value for seconds is harmless."""

    def __init__(self, load: Callable[[str, float | None], WorkspaceSettings], ttl: float) -> None:
        self.load = load
        self._entries: ExpiringCache[str, WorkspaceSettings] = ExpiringCache(
            ttl, SETTINGS_CACHE_ENTRIES, time.monotonic
        )

    def get(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings:
        hit = self._entries.get(workspace_id)
        if hit is not None:
            return hit
        # Its age counts from before the read: never reused past ttl.
        read_at = time.monotonic()
        value = self.load(workspace_id, timeout)
        self._entries.put(workspace_id, value, read_at)
        return value

    def __len__(self) -> int:
        return len(self._entries)


def _timed(stage: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        metrics.STAGE_SECONDS.labels(stage).observe(time.perf_counter() - start)


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
        self.cross_encoder = CrossEncoderGate(self.config.cross_encoder_recheck_seconds)

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
        # Beside the arms: asked first, waited for last.
        cards = (
            self.store.entity_cards(request.caller, request.query, self._left(request))
            if request.entity_cards
            else None
        )
        history = (
            self.store.history(request.caller, request.query, request.limit, self._left(request))
            if request.include_history
            else None
        )

        lexical_future: Future[list[Candidate]] | None = None
        if mode in ("lexical", "hybrid"):
            lexical_future = self.executor.submit(self._lexical, request)
        # Not asked in mode lexical: said, so it does not read as a degrade.
        dense = DenseOutcome(None, "not asked: the recall's mode is lexical")
        if mode in ("dense", "hybrid"):
            # The dense arm runs here while the lexical arm runs in its thread;
            # alone, it says which rows hold every term of the query.
            dense = self._dense(request, "" if lexical_future is not None else request.query)
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
        # Both arms answered: their first rows' episode neighbours are lifted.
        neighbours_of = (
            self.config.episode_neighbours_of if mode == "hybrid" and dense.arm is not None else 0
        )
        walked: Walked[M] = (
            _timed(
                "walk",
                lambda: self.store.walk(
                    request.caller,
                    [f.id for f in fused],
                    hydrate,
                    request.filters,
                    timeout=self._left(request),
                    neighbours_of=neighbours_of,
                ),
            )
            if fused
            else Walked([], {})
        )
        admitted_set = set(walked.admitted)
        admitted = [f for f in fused if f.id in admitted_set]
        agreement(admitted, dense.arm.floor if dense.arm is not None else 0.0)
        if walked.neighbours:
            admitted = lift_neighbours(
                admitted,
                walked.neighbours,
                EPISODE_NEIGHBOUR_WEIGHT,
                EPISODE_SEED_POWER,
                self.config.rrf_k,
            )
        admitted = order_page(admitted, request.limit)
        counts = Counts(
            lexical=sum(1 for f in admitted if f.scores.lexical_rank),
            dense=sum(1 for f in admitted if f.scores.dense_rank),
            fused=len(admitted),
            admitted=len(admitted),
        )
        metrics.ARM_CANDIDATES.labels("fused").observe(len(fused))
        metrics.ARM_CANDIDATES.labels("admitted").observe(len(admitted))

        # The first rows the store read: a row whose memory it left out (past
        # the answer's size budget, or gone since) gives its place to the next.
        results = [
            Result(walked.memories[f.id], f.scores) for f in admitted if f.id in walked.memories
        ]
        del results[hydrate:]

        reranked, rerank_reason = self._rerank(request, results, rerank_depth)
        outcome: Outcome[M] = Outcome(
            results=results[: request.limit],
            mode=mode,
            dense_available=dense.arm is not None,
            dense_unavailable_reason=dense.reason,
            reranked=reranked,
            rerank_unavailable_reason=rerank_reason,
            counts=counts,
            not_embedded=dense.not_embedded,
            dense_behind_reason=dense.behind_reason(),
        )
        outcome.nothing_relevant = nothing_relevant(
            (r.scores for r in outcome.results),
            outcome.dense_available,
            dense_floor=dense.arm.floor if dense.arm is not None else 0.0,
            not_embedded=dense.not_embedded,
        )
        if history is not None:
            got, outcome.history_unavailable_reason = _beside("history", history)
            outcome.history, outcome.history_left_out = got.items, got.left_out
        if cards is not None:
            got, outcome.entities_unavailable_reason = _beside("entity_cards", cards)
            outcome.entities, outcome.more_entities = got.items, got.more_entities
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

    def _dense(self, request: Request, words: str) -> DenseOutcome:
        try:
            vector = _timed(
                "embed", lambda: self.embed.embed_query(request.query, timeout=self._left(request))
            )
        except Degraded as exc:
            self._embed_reachable(False, exc.message)
            self.cross_encoder.embed_failed(exc)
            return DenseOutcome(None, f"query embedding: {exc.message}", f"embed_{exc.kind}")
        self._embed_reachable(True)
        self.cross_encoder.answered()
        try:
            arm = _timed(
                "dense",
                lambda: self.store.dense(
                    request.caller,
                    vector,
                    self.config.arm_limit,
                    request.filters,
                    timeout=self._left(request),
                    words=words,
                ),
            )
        except Degraded as exc:
            return DenseOutcome(None, f"dense candidates: {exc.message}", f"store_{exc.kind}")
        if not arm.embeddings_available:
            # The store looks only at the vectors the caller may see (row
            # security): another member's embedded memories must not change
            # this answer, so it speaks of the caller's memories, not the
            # workspace's.
            return DenseOutcome(
                None,
                "no memory you may see for this purpose is embedded yet with model "
                f"{vector.model_id} and the current embed-input version",
                "no_embeddings",
                arm.not_embedded,
            )
        return DenseOutcome(arm, not_embedded=arm.not_embedded)

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
        kind, why_not = self.cross_encoder.closed()
        if kind:
            # Its last answer stands: asking would wait out the deadline again.
            metrics.DEGRADED.labels("rerank", kind).inc()
            return False, why_not
        top = results[:depth]
        passages = [_passage(r.memory) for r in top]
        try:
            scores = _timed(
                "rerank", lambda: self.embed.rerank(request.query, passages, timeout=left)
            )
        except Degraded as exc:
            metrics.DEGRADED.labels("rerank", exc.kind).inc()
            self.cross_encoder.rerank_failed(exc)
            return False, exc.message
        self.cross_encoder.answered()
        if len(scores) != len(top):
            metrics.DEGRADED.labels("rerank", "failed").inc()
            return False, "the cross-encoder returned a score count that does not match"
        if not all(math.isfinite(score) for score in scores):
            # A broken model (an overflow in its graph): no order can be read
            # from NaN, and neither it nor infinity is a JSON number.
            metrics.DEGRADED.labels("rerank", "failed").inc()
            return False, "the cross-encoder returned a score that is not a finite number"
        for result, score in zip(top, scores, strict=True):
            result.scores.rerank_score = float(score)
            result.scores.reranked = True
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


def _beside(part: str, pending: Callable[[], Sequence[Any] | Beside]) -> tuple[Beside, str]:
    """A part that sits beside the ranked memories (entity cards, history):
    without it recall still answers, and says why it is missing (design §5,
    degrade, never refuse)."""
    try:
        got = pending()
    except Degraded as exc:
        metrics.DEGRADED.labels(part, exc.kind).inc()
        log.warning("%s unavailable", part, extra={"why": exc.message})
        return Beside(()), exc.message
    return (got if isinstance(got, Beside) else Beside(got)), ""


def _passage(memory: Passage) -> str:
    text = f"{memory.title}\n{memory.body}" if memory.body else memory.title
    return text[:MAX_PASSAGE_CHARS]
