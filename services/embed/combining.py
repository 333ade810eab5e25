"""One ONNX run for the query embeddings that arrive while the model is busy.

Plain code (no gRPC). A single-text call runs at once when no other is
running: one client pays nothing for the batching. A call that arrives while
one runs waits for it, and then the calls waiting run as one batch, led by
the oldest of them; a batch costs less per text than single runs (measured on
one ONNX thread: 2.4 ms for one query, 3.6 for two, 5.9 for four;
docs/benchmarks.md), so a busy service keeps up with more recalls.
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
    # Set (with done) when this waiter is to run the next batch itself.
    leads: bool = False
    result: tuple[M, np.ndarray] | None = None
    error: BaseException | None = None


class QueryCombiner(Generic[M]):
    """Embeds one text at a time for many threads, combining those that wait.

    ``run`` embeds a batch and returns the model that did it with one row per
    text; an exception it raises reaches every call of that batch."""

    def __init__(
        self, run: Callable[[Sequence[str]], tuple[M, np.ndarray]], max_batch: int
    ) -> None:
        self._run = run
        self.max_batch = max(1, max_batch)
        self._lock = threading.Lock()
        self._waiting: deque[_Waiter[M]] = deque()
        # Invariant: a waiter is queued only while a batch runs.
        self._busy = False

    def embed(self, text: str) -> tuple[M, np.ndarray]:
        me: _Waiter[M] = _Waiter(text)
        with self._lock:
            self._waiting.append(me)
            leads = not self._busy
            self._busy = True
        if not leads:
            me.done.wait()
            if not me.leads:
                return self._outcome(me)
        self._lead()
        return self._outcome(me)

    def _lead(self) -> None:
        """Runs the oldest waiters (the leader first among them) as one batch,
        then hands the lead to the oldest still waiting, or ends it."""
        with self._lock:
            batch = [
                self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))
            ]
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
            w.leads = False
            w.done.set()
        with self._lock:
            if self._waiting:
                nxt = self._waiting[0]
                nxt.leads = True
                nxt.done.set()
            else:
                self._busy = False

    @staticmethod
    def _outcome(waiter: _Waiter[M]) -> tuple[M, np.ndarray]:
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result
