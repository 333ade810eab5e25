"""Open loop at a rate no stack meets: the run starts and ends without
building its whole schedule or pools first."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from recallatron_devkit.load import build_mix
from recallatron_devkit.loadgen import measure


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
