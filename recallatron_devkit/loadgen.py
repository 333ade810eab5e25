"""The load generator behind `recallatron load` and the benchmarks: requests
sent closed loop (a fixed number of workers) or open loop (a fixed rate),
their latencies recorded in an HdrHistogram, overall and per query class, and
the query mix they draw from.

The queries are a mix of classes, sent round robin across the classes. No
query is sent twice in a run unless repeats are allowed: the run stops when a
class runs out of distinct queries, so a result or embedding cache cannot
make a figure look better than recall is.

Open loop measures each request from its intended send time, so a stall
delays every later request's clock as well and cannot hide (no coordinated
omission)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
from hdrh.histogram import HdrHistogram

from recallatron.waits import acquired, joined, slept
from recallatron_devkit import synthetic

# Microseconds, up to a day, 3 significant digits: open loop counts the wait
# for a stalled stack, minutes at an overload, and must not cut it short.
_LOWEST_US, _HIGHEST_US, _DIGITS = 1, 86_400_000_000, 3


@dataclass
class Recorder:
    """Latencies and outcomes of many concurrent calls."""

    histogram: HdrHistogram = field(
        default_factory=lambda: HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)
    )
    errors: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, latency_s: float, error: str | None = None) -> None:
        micros = min(max(int(latency_s * 1e6), _LOWEST_US), _HIGHEST_US)
        with self._lock:
            self.requests += 1
            if error is None:
                self.histogram.record_value(micros)
            else:
                self.errors[error] += 1

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        h = self.histogram

        def ms(percentile: float) -> float:
            return round(int(h.get_value_at_percentile(percentile)) / 1000.0, 3)

        return {
            "p50_ms": ms(50),
            "p95_ms": ms(95),
            "p99_ms": ms(99),
            "p999_ms": ms(99.9),
            "max_ms": round(h.get_max_value() / 1000.0, 3),
            "mean_ms": round(h.get_mean_value() / 1000.0, 3),
            "throughput_rps": round(self.requests / elapsed_s, 2) if elapsed_s > 0 else 0.0,
            "requests": self.requests,
            "errors": dict(self.errors),
            "distribution": self.distribution(),
        }

    def distribution(self) -> list[list[float]]:
        """[percentile, ms] pairs spaced evenly on the nines scale (0, 90, 99,
        99.9, ... in tenths of a decade) up to the last percentile the sample
        count resolves, then the maximum: the data of an HdrHistogram
        percentile plot. Empty without samples."""
        h = self.histogram
        count = h.get_total_count()
        if not count:
            return []
        points = []
        for step in range(NINES_STEPS + 1):
            percentile = 100.0 * (1.0 - 10.0 ** (-step / 10.0))
            # Beyond 1 - 1/count every percentile is the maximum.
            if step and (1.0 - percentile / 100.0) * count < 1.0 - 1e-9:
                break
            points.append(
                [round(percentile, 5), round(h.get_value_at_percentile(percentile) / 1000.0, 3)]
            )
        points.append([100.0, round(h.get_max_value() / 1000.0, 3)])
        return points


# Five nines (99.999%) in tenths of a decade.
NINES_STEPS = 50


class QueryMix:
    """Queries by class, sent round robin across the classes: request i is
    class i % k's (i // k)-th query, wrapping round a class's pool only when
    it is used up. Counts the queries sent and how many were repeats."""

    def __init__(self, pools: dict[str, list[str]]) -> None:
        empty = [name for name, pool in pools.items() if not pool]
        if not pools or empty:
            raise ValueError(f"no queries for class(es) {', '.join(empty) or '(none given)'}")
        self.pools = pools
        self.classes = list(pools)
        self._lock = threading.Lock()
        self._sent: set[str] = set()
        self.requests: Counter[str] = Counter()
        self.repeats: Counter[str] = Counter()

    def class_of(self, i: int) -> str:
        return self.classes[i % len(self.classes)]

    def at(self, i: int) -> str:
        pool = self.pools[self.class_of(i)]
        return pool[(i // len(self.classes)) % len(pool)]

    def capacity(self) -> int:
        """Requests that can be sent before any query repeats: class j's
        first repeat is request len(pool_j) * k + j."""
        k = len(self.classes)
        return min(len(self.pools[c]) * k + j for j, c in enumerate(self.classes))

    def take(self, i: int) -> str:
        """Request i's query, counted (compared by normal_query, as a cache
        folding case and spaces would)."""
        query = self.at(i)
        key = synthetic.normal_query(query)
        with self._lock:
            name = self.class_of(i)
            self.requests[name] += 1
            if key in self._sent:
                self.repeats[name] += 1
            self._sent.add(key)
        return query

    def reset_counts(self) -> None:
        """Forgets the counts (not what was sent: a measured query equal to a
        warm-up one is still a repeat)."""
        with self._lock:
            self.requests.clear()
            self.repeats.clear()

    def distinct(self, name: str | None = None) -> int:
        """Distinct queries sent since the counts were reset (of one class)."""
        names = self.classes if name is None else [name]
        return sum(self.requests[n] - self.repeats[n] for n in names)


def open_loop_length(rate: float, duration_s: float) -> int:
    """Requests in a constant-rate schedule."""
    if not (rate > 0 and duration_s > 0):
        return 0
    return int(rate * duration_s)


def open_loop_offsets(rate: float, duration_s: float) -> list[float]:
    """Intended send times (seconds from start) of a constant-rate schedule."""
    return [i / rate for i in range(open_loop_length(rate, duration_s))]


def _outcome(call: Callable[[], Any]) -> str | None:
    """None when the call succeeded, else its failure's kind: the gRPC status
    name, or the exception's type for anything else (a client-side error is a
    failed request too, and must not end a worker or go uncounted)."""
    try:
        call()
    except Exception as exc:
        code = getattr(exc, "code", None) if isinstance(exc, grpc.RpcError) else None
        if callable(code):
            return str(code().name)
        return type(exc).__name__
    return None


def run_closed_loop(
    call: Callable[[int], Any],
    concurrency: int,
    duration_s: float,
    recorder: Recorder,
    by_class: Callable[[int], Recorder] | None = None,
    max_requests: int | None = None,
) -> float:
    """`concurrency` workers, each sending its next request when the last
    returns, until the duration is over or max_requests were sent. Each
    latency goes to `recorder` and to by_class(i), request i's class's
    recorder. Returns the elapsed time."""
    stop_at = time.perf_counter() + duration_s
    counter = iter(range(1 << 62 if max_requests is None else max_requests))
    lock = threading.Lock()
    stopping = threading.Event()

    def worker() -> None:
        while not stopping.is_set() and time.perf_counter() < stop_at:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            error = _outcome(partial(call, i))
            latency = time.perf_counter() - start
            recorder.record(latency, error)
            if by_class is not None:
                by_class(i).record(latency, error)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    try:
        for t in threads:
            t.start()
        # Waking, so that a Ctrl-C the kernel gave a worker stops the run now.
        joined(threads)
    finally:
        # Stopped: the workers end after their call under way, not at the
        # duration's end (a benchmark's process goes on).
        stopping.set()
    return time.perf_counter() - start


def run_open_loop(
    call: Callable[[int], Any],
    rate: float,
    duration_s: float,
    recorder: Recorder,
    max_workers: int = 64,
    clock: Callable[[], float] = time.perf_counter,
    # Waking, so that a stop the kernel gave a worker is taken within a long
    # gap between sends (a low rate), not at the next send.
    sleep: Callable[[float], None] = slept,
    by_class: Callable[[int], Recorder] | None = None,
    max_requests: int | None = None,
) -> float:
    """Sends on a fixed schedule regardless of responses (at most
    max_requests of it); each latency counts from the request's intended send
    time, including any wait for a worker, and goes to `recorder` and to
    by_class(i)."""
    # Computed as sent, not listed: a long schedule at a high rate is millions.
    count = open_loop_length(rate, duration_s)
    if max_requests is not None:
        count = min(count, max_requests)
    start = clock()
    # Requests waiting for a worker, bounded so a rate the callee cannot meet
    # does not queue the whole schedule; a wait still counts from the intended
    # send time, so the latencies are those of an unbounded queue.
    queue_size = 4 * max_workers
    waiting = threading.Semaphore(queue_size)

    def send(i: int, intended: float) -> None:
        try:
            error = _outcome(lambda: call(i))
            latency = clock() - intended
            recorder.record(latency, error)
            if by_class is not None:
                by_class(i).record(latency, error)
        finally:
            waiting.release()

    pool = ThreadPoolExecutor(max_workers=max_workers)
    try:
        for i in range(count):
            intended = start + i / rate
            delay = intended - clock()
            if delay > 0:
                sleep(delay)
            # Waking, as every wait below: a stalled callee fills the queue,
            # and a Ctrl-C the kernel gave a worker must still stop the run.
            acquired(waiting)
            pool.submit(send, i, intended)
        # The calls under way done: every place in the queue given back.
        for _ in range(queue_size):
            acquired(waiting)
    except BaseException:
        # Stopped: the queued requests are dropped, the calls under way
        # left to end on their own (a thread cannot be stopped).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return clock() - start


def measure(
    recall: Callable[[str], Any],
    mix: QueryMix,
    duration_s: float,
    concurrency: int = 1,
    rate: float = 0.0,
    allow_repeats: bool = False,
    warmup: int = 0,
    max_workers: int = 64,
) -> dict[str, Any]:
    """One run over the mix, open loop at `rate` or else closed loop: up to
    `warmup` unrecorded requests first (warming connections; the measured
    queries are others), then the measured ones, overall and per class.
    Without allow_repeats the run ends early when a class's pool is used up."""
    capacity = mix.capacity()
    if not allow_repeats:
        # Warm-up must not use up the pools the measurement needs.
        warmup = min(warmup, capacity // 10)
    for i in range(warmup):
        _outcome(partial(recall, mix.take(i)))
    mix.reset_counts()
    limit = None if allow_repeats else capacity - warmup
    recorders = {name: Recorder() for name in mix.classes}
    recorder = Recorder()

    def call(i: int) -> Any:
        return recall(mix.take(warmup + i))

    def by_class(i: int) -> Recorder:
        return recorders[mix.class_of(warmup + i)]

    if rate:
        elapsed = run_open_loop(
            call,
            rate,
            duration_s,
            recorder,
            max_workers=max_workers,
            by_class=by_class,
            max_requests=limit,
        )
    else:
        elapsed = run_closed_loop(
            call, concurrency, duration_s, recorder, by_class=by_class, max_requests=limit
        )
    result = recorder.summary(elapsed)
    result["classes"] = {
        name: class_summary(r, mix.distinct(name)) for name, r in recorders.items()
    }
    result.update(
        distinct_queries=mix.distinct(),
        repeats=sum(mix.repeats.values()),
        allow_repeats=allow_repeats,
        # The pools ran out before the duration (open loop: the schedule) did.
        exhausted=limit is not None
        and recorder.requests >= limit
        and (not rate or open_loop_length(rate, duration_s) > limit),
    )
    return result


def class_summary(recorder: Recorder, distinct: int) -> dict[str, Any]:
    s = recorder.summary(0.0)
    return {
        "p50_ms": s["p50_ms"],
        "p99_ms": s["p99_ms"],
        "requests": s["requests"],
        "errors": s["errors"],
        "distinct_queries": distinct,
        "distribution": s["distribution"],
    }
