"""One ONNX run for the query embeddings that arrive while the model is busy.

Plain code (no gRPC). A single-text call runs at once while fewer than
``max_runs`` runs are going (one a core): a lone client, or two on two cores,
pay nothing for it. A call that arrives while all of them run waits, and the
calls waiting then run as one batch, led by the oldest of them. A batch costs
less CPU per text than single runs (on one ONNX thread: 2.4 ms for one query,
3.6 for two, 5.9 for four; docs/embeddings.md), so a busy service spends less
of the cores on each recall.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
from prometheus_client import Histogram

M = TypeVar("M")

BATCH_TEXTS = Histogram(
    "recallatron_embed_query_batch_texts",
    "Query embeddings per ONNX run of the combiner.",
    buckets=(1, 2, 3, 4, 6, 8, 12, 16, 32),
)


@dataclass
class _Waiter(Generic[M]):
    text: str
    done: threading.Event = field(default_factory=threading.Event)
    # Set (with done) when this waiter is to run these waiters, itself first.
    batch: list[_Waiter[M]] | None = None
    result: tuple[M, np.ndarray] | None = None
    error: BaseException | None = None


class QueryCombiner(Generic[M]):
    """Embeds one text at a time for many threads: up to ``max_runs`` runs at
    once (one a core keeps them all busy), and the calls that arrive while
    all of them run wait and go together, up to ``max_batch`` a run.

    ``run`` embeds a batch and returns the model that did it with one row per
    text; an exception it raises reaches every call of that batch."""

    def __init__(
        self,
        run: Callable[[Sequence[str]], tuple[M, np.ndarray]],
        max_batch: int,
        max_runs: int = 1,
    ) -> None:
        self._run = run
        self.max_batch = max(1, max_batch)
        self.max_runs = max(1, max_runs)
        self._lock = threading.Lock()
        self._waiting: deque[_Waiter[M]] = deque()
        # Invariant: a call waits only while max_runs runs are going.
        self._running = 0

    def embed(self, text: str) -> tuple[M, np.ndarray]:
        me: _Waiter[M] = _Waiter(text)
        with self._lock:
            if self._running < self.max_runs:
                self._running += 1
                batch: list[_Waiter[M]] | None = [me]
            else:
                self._waiting.append(me)
                batch = None
        if batch is None:
            me.done.wait()
            batch = me.batch
        if batch is not None:
            self._lead(batch)
        return self._outcome(me)

    def _lead(self, batch: list[_Waiter[M]]) -> None:
        """Runs ``batch`` and answers it, then hands the oldest waiters (as
        many as a run takes) to the first of them to run, or ends this run."""
        BATCH_TEXTS.observe(len(batch))
        try:
            model, vectors = self._run([w.text for w in batch])
        except BaseException as exc:  # every call of the batch fails alike
            for w in batch:
                w.error = exc
        else:
            for row, w in enumerate(batch):
                w.result = (model, vectors[row])
        for w in batch:
            w.batch = None
            w.done.set()
        with self._lock:
            if not self._waiting:
                self._running -= 1
                return
            n = min(self.max_batch, len(self._waiting))
            nxt = [self._waiting.popleft() for _ in range(n)]
        nxt[0].batch = nxt
        nxt[0].done.set()

    @staticmethod
    def _outcome(waiter: _Waiter[M]) -> tuple[M, np.ndarray]:
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result
