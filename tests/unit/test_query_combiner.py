"""The query combiner (services/embed/combining.py): a lone call runs at once
in its own thread, calls arriving while one runs go together in the next
batch (at most max_batch), each gets its own row, and a failing batch fails
its calls only."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from services.embed.combining import QueryCombiner


class _Model:
    """Records each batch; a text's vector is its length and its first letter's
    code, so every caller can tell its own row."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail_on: str | None = None

    def run(self, texts: Sequence[str]) -> tuple[str, np.ndarray]:
        self.batches.append(list(texts))
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail_on in texts:
            raise RuntimeError(f"failed on {self.fail_on}")
        return "model-1", np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)


def _queued(combiner: QueryCombiner[str], n: int) -> None:
    deadline = time.monotonic() + 10
    while len(combiner._waiting) < n:  # white box: the calls waiting behind the run
        assert time.monotonic() < deadline, "the calls never queued"
        time.sleep(0.001)


def _hold_first_batch(
    model: _Model, combiner: QueryCombiner[str], pool: ThreadPoolExecutor
) -> Future[tuple[str, np.ndarray]]:
    model.gate.clear()
    first = pool.submit(combiner.embed, "first")
    assert model.entered.wait(10)
    return first


def test_a_lone_call_runs_at_once_in_its_own_thread() -> None:
    model = _Model()
    combiner = QueryCombiner(model.run, max_batch=16)
    for text in ("alpha", "be"):
        name, vector = combiner.embed(text)
        assert name == "model-1" and vector.tolist() == [len(text), ord(text[0])]
    assert model.batches == [["alpha"], ["be"]]
    assert model.threads == [threading.current_thread().name] * 2


def _behind_a_run(model: _Model, combiner: QueryCombiner[str], texts: list[str]) -> None:
    """Holds a first call's run, sends ``texts`` meanwhile, lets it go; every
    call answers with its own text's row."""
    with ThreadPoolExecutor(len(texts) + 1) as pool:
        first = _hold_first_batch(model, combiner, pool)
        waiting = {t: pool.submit(combiner.embed, t) for t in texts}
        _queued(combiner, len(texts))
        model.gate.set()
        assert first.result(10)[1].tolist() == [5, ord("f")]
        for text, future in waiting.items():
            assert future.result(10)[1].tolist() == [len(text), ord(text[0])]


def test_calls_arriving_during_a_run_go_together_and_each_gets_its_own_row() -> None:
    model = _Model()
    texts = ["apple", "bb", "cherry", "d", "eeee"]
    _behind_a_run(model, QueryCombiner(model.run, max_batch=16), texts)
    assert model.batches[0] == ["first"]
    assert sorted(model.batches[1]) == sorted(texts) and len(model.batches) == 2


def test_no_batch_holds_more_than_max_batch() -> None:
    model = _Model()
    texts = ["a1", "b22", "c333", "d4444", "e55555"]
    _behind_a_run(model, QueryCombiner(model.run, max_batch=2), texts)
    assert [len(b) for b in model.batches] == [1, 2, 2, 1]
    assert sorted(t for b in model.batches[1:] for t in b) == sorted(texts)


def test_a_failing_batch_fails_its_calls_and_the_next_batch_runs() -> None:
    model = _Model()
    combiner = QueryCombiner(model.run, max_batch=2)
    with ThreadPoolExecutor(4) as pool:
        first = _hold_first_batch(model, combiner, pool)
        doomed = [pool.submit(combiner.embed, t) for t in ("bad", "also")]
        _queued(combiner, 2)
        later = pool.submit(combiner.embed, "later")
        _queued(combiner, 3)
        model.fail_on = "bad"
        model.gate.set()
        assert first.result(10)[1].tolist() == [5, ord("f")]
        for future in doomed:
            with pytest.raises(RuntimeError, match="failed on bad"):
                future.result(10)
        assert later.result(10)[1].tolist() == [5, ord("l")]
    # Nothing is left waiting: a new call runs at once again.
    assert combiner.embed("z")[1].tolist() == [1, ord("z")]


def test_up_to_max_runs_run_at_once_and_only_later_calls_wait() -> None:
    model = _Model()
    combiner = QueryCombiner(model.run, max_batch=16, max_runs=2)
    model.gate.clear()
    with ThreadPoolExecutor(5) as pool:
        running = [pool.submit(combiner.embed, t) for t in ("one", "two")]
        deadline = time.monotonic() + 10
        while len(model.batches) < 2:  # both run at once, neither waits
            assert time.monotonic() < deadline, model.batches
            time.sleep(0.001)
        waiting = {t: pool.submit(combiner.embed, t) for t in ("three", "four", "five")}
        _queued(combiner, 3)
        model.gate.set()
        for future, text in zip(running, ("one", "two"), strict=True):
            assert future.result(10)[1].tolist() == [len(text), ord(text[0])]
        for text, future in waiting.items():
            assert future.result(10)[1].tolist() == [len(text), ord(text[0])]
    assert sorted(map(len, model.batches[:2])) == [1, 1]
    # The first run to end takes every waiting call into one batch.
    assert sorted(model.batches[2]) == ["five", "four", "three"] and len(model.batches) == 3
