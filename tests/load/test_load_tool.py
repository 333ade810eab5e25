"""The load tool: its arithmetic (unit) and a short smoke run against the
test stack (shape and zero errors; no timing thresholds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recallatron_cli import synthetic
from recallatron_cli.load import Recorder, open_loop_offsets, run_open_loop


def test_percentiles_from_a_known_latency_list() -> None:
    r = Recorder()
    for ms in range(1, 1001):  # 1..1000 ms
        r.record(ms / 1000)
    s = r.summary(elapsed_s=10.0)
    # HdrHistogram keeps 3 significant digits: within 0.1%.
    assert s["p50_ms"] == pytest.approx(500, rel=1e-3)
    assert s["p95_ms"] == pytest.approx(950, rel=1e-3)
    assert s["p99_ms"] == pytest.approx(990, rel=1e-3)
    assert s["p999_ms"] == pytest.approx(999, rel=1e-3)
    assert s["max_ms"] == pytest.approx(1000, rel=1e-3)
    assert s["requests"] == 1000 and s["throughput_rps"] == 100.0 and s["errors"] == {}


def test_errors_are_counted_by_status_and_not_timed() -> None:
    r = Recorder()
    r.record(0.010)
    r.record(0.5, "UNAVAILABLE")
    r.record(0.5, "UNAVAILABLE")
    r.record(0.5, "DEADLINE_EXCEEDED")
    s = r.summary(elapsed_s=1.0)
    assert s["errors"] == {"UNAVAILABLE": 2, "DEADLINE_EXCEEDED": 1}
    assert s["requests"] == 4 and s["max_ms"] == pytest.approx(10, rel=1e-2)


def test_open_loop_schedule_is_fixed_rate() -> None:
    assert open_loop_offsets(4, 1.0) == [0.0, 0.25, 0.5, 0.75]
    assert len(open_loop_offsets(100, 2.5)) == 250
    assert open_loop_offsets(0, 5) == []


def test_open_loop_counts_from_the_intended_send_time() -> None:
    """A stall delays the clock of every later request: with a fake clock, a
    call that takes 1 s at 10 req/s makes the next requests wait for a worker,
    and their latency includes that wait."""
    now = [0.0]
    recorder = Recorder()

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def call(i: int) -> None:
        if i == 0:
            now[0] += 1.0  # the stall: the clock moves while the only worker is busy

    run_open_loop(
        call, rate=10, duration_s=0.5, recorder=recorder, max_workers=1, clock=clock, sleep=sleep
    )
    s = recorder.summary(elapsed_s=1.0)
    assert s["requests"] == 5
    # Request 0 took 1 s; the later ones waited for it, and that wait counts
    # (a closed-loop clock would have started them only after it).
    assert s["max_ms"] >= 999
    assert s["p50_ms"] >= 599


def test_synthetic_data_is_deterministic_and_varied() -> None:
    a = list(synthetic.memories(500, seed=3))
    assert a == list(synthetic.memories(500, seed=3))
    assert a != list(synthetic.memories(500, seed=4))
    assert {m.kind for m in a} == {"note", "fact", "decision", "summary"}
    assert len({m.body for m in a}) > 450
    assert any(m.derived_from for m in a)
    assert len(set(synthetic.queries(100))) > 50


@pytest.mark.integration
def test_load_smoke_run_against_the_stack(stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {"RECALLATRON_ADMIN_TOKEN": stack.admin_token}

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "recallatron_cli.main",
            "load",
            "--gateway",
            stack.gateway,
            "--memories",
            "120",
            "--concurrency",
            "2",
            "--duration",
            "2",
            "--mode",
            "hybrid",
            "--json",
            "--state-dir",
            str(tmp_path),
            "--embed-timeout",
            "300",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in (
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "throughput_rps",
        "requests",
        "errors",
        "mode",
        "memories",
    ):
        assert key in result
    assert result["errors"] == {} and result["requests"] > 0
    assert result["mode"] == "hybrid" and result["memories"] == 120
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
