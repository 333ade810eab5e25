"""Open loop at a rate no stack meets: the run starts and ends without
building its whole schedule or pools first, and the waits it causes are
recorded as long as they were."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from recallatron_devkit.load import build_mix
from recallatron_devkit.loadgen import Recorder, measure, run_open_loop


def test_a_rate_far_beyond_the_stack_starts_and_stops_when_the_pools_do() -> None:
    """`--rate 200000 --duration 30` built 1.5 million queries per class (the
    question class for many minutes) before the first request, and then a
    list of its 6 million send times; a higher rate ran out of memory. Now
    the pools are bounded and the run stops when one is used up."""
    args = argparse.Namespace(
        queries=None,
        classes=None,
        pool_size=10,
        rate=200_000.0,
        duration=30.0,
        memories=200,
        seed=7,
        allow_repeats=False,
    )
    out: dict[str, Any] = {}

    def run() -> None:
        mix = build_mix(args)
        out["capacity"] = mix.capacity()
        out["result"] = measure(lambda query: None, mix, args.duration, rate=args.rate)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=180)
    assert not thread.is_alive(), "still building the run after 180 s"
    result = out["result"]
    assert result["exhausted"] and result["errors"] == {}
    assert result["requests"] == out["capacity"] == result["distinct_queries"]
    assert result["repeats"] == 0


def test_a_stall_longer_than_a_minute_is_recorded_as_long_as_it_was() -> None:
    """Open loop counts from the intended send time, so a stalled stack gives
    waits of minutes; the recorder clamped every latency to 60 s, and a
    2-minute stall read as p50 and max 60,031 ms."""
    now = [0.0]
    recorder = Recorder()

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def call(i: int) -> None:
        if i == 0:
            now[0] += 120.0  # the only worker is held for two minutes

    run_open_loop(
        call, rate=10, duration_s=0.5, recorder=recorder, max_workers=1, clock=clock, sleep=sleep
    )
    s = recorder.summary(elapsed_s=120.0)
    assert s["requests"] == 5
    assert s["max_ms"] >= 119_900
    assert s["p50_ms"] >= 119_000
