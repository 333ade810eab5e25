"""`recallatron load` on a run whose requests failed: a class whose every
request failed has no latency to report (not a p50 of 0 ms), and a run in
which more than --max-failed-share of any class's requests failed exits 1,
naming the class, after printing its figures. No timing assertions: each run
ends when its pools are used up."""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron_devkit import load
from recallatron_devkit.loadgen import QueryMix, Recorder, measure, run_closed_loop, run_open_loop


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def _run_with(
    fails: Callable[[str], bool], error: Callable[[], Exception] = _Unavailable
) -> Callable[[argparse.Namespace], dict[str, Any]]:
    """load.run's stand-in: a real measurement over a small mix (used up
    after 40 requests) whose recall fails where `fails` says, raising
    `error()`."""
    pools = {
        "rare": [f"rare {i}" for i in range(10)],
        "common": [f"common {i}" for i in range(10)],
        "entity": [f"entity {i}" for i in range(10)],
        "question": [f"question {i}" for i in range(10)],
    }

    def recall(query: str) -> None:
        if fails(query):
            raise error()

    def run(args: argparse.Namespace) -> dict[str, Any]:
        result = measure(recall, QueryMix(pools), 60.0, concurrency=2)
        result.update(
            mode="hybrid",
            memories=120,
            rerank=False,
            concurrency=2,
            rate=None,
            duration_s=60.0,
        )
        return result

    return run


@pytest.fixture
def run_load(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    def go(
        fails: Callable[[str], bool], *argv: str, error: Callable[[], Exception] = _Unavailable
    ) -> tuple[int, str, str]:
        from recallatron_cli.main import main

        monkeypatch.setattr(load, "run", _run_with(fails, error))
        code = main(["load", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return go


def test_a_run_whose_every_request_failed_reports_no_latency_and_exits_1(
    run_load: Callable[..., tuple[int, str, str]],
) -> None:
    """It printed `p50 0.0 ms ... max 0.0 ms` and every class at 0.0, as if
    recall were instant, and exited 0."""
    code, out, err = run_load(lambda query: True)
    assert code == 1, (out, err)
    assert "p50 0.0" not in out and "no latency: all 40 failed" in out, out
    for name in ("rare", "common", "entity", "question"):
        assert f"class {name}: 10 of 10 requests failed" in err, err
        assert re.search(rf"^{name} +all 10 failed +10$", out, re.M), out
    code, out, err = run_load(lambda query: True, "--json")
    result = json.loads(out)
    assert code == 1 and result["errors"] == {"UNAVAILABLE": 40}
    assert result["p50_ms"] is None and result["max_ms"] is None
    assert all(c["p50_ms"] is None for c in result["classes"].values())


def test_a_class_mostly_failing_fails_the_run_though_the_others_succeed(
    run_load: Callable[..., tuple[int, str, str]],
) -> None:
    """Most rare queries failing (7 of 10) left the run at exit 0."""
    failing = {f"rare {i}" for i in range(7)}
    code, out, err = run_load(lambda query: query in failing)
    assert code == 1, (out, err)
    assert "class rare: 7 of 10 requests failed (70.0%" in err, err
    assert "common" not in err
    # The class's figures are those of its three successes; printed still.
    assert "p50 " in out and "UNAVAILABLE: 7" in out


def test_failures_within_the_allowed_share_leave_the_run_at_exit_0(
    run_load: Callable[..., tuple[int, str, str]],
) -> None:
    one = {"rare 3"}
    code, out, err = run_load(lambda query: query in one)
    assert code == 1 and "class rare: 1 of 10 requests failed (10.0%" in err, err
    code, out, err = run_load(lambda query: query in one, "--max-failed-share", "0.1")
    assert code == 0 and err == "" and "UNAVAILABLE: 1" in out, err
    code, _out, err = run_load(lambda query: False)
    assert code == 0 and err == "", err


# -- failures that are no gRPC error ----------------------------------------------


def test_a_call_failing_with_no_grpc_error_is_counted_and_its_worker_keeps_sending() -> None:
    """A call raising anything but a gRPC error killed its closed-loop
    worker: two of three workers kept sending and the run measured a lower
    concurrency than it said. Here every later call waits until all three
    workers are in one (a generous limit, then BrokenBarrierError)."""
    all_three = threading.Barrier(3, timeout=60)

    def call(i: int) -> None:
        if i == 0:
            raise ValueError("a response the client could not read")
        all_three.wait()

    recorder = Recorder()
    by = {"even": Recorder(), "odd": Recorder()}
    run_closed_loop(
        call,
        3,
        600.0,
        recorder,
        by_class=lambda i: by["even" if i % 2 == 0 else "odd"],
        max_requests=10,
    )
    assert recorder.requests == 10 and recorder.errors == {"ValueError": 1}
    assert by["even"].errors == {"ValueError": 1} and by["even"].requests == 5
    assert by["odd"].errors == {} and by["odd"].requests == 5


def test_open_loop_counts_a_call_failing_with_no_grpc_error() -> None:
    """Open loop lost such a call silently: not a request, not a failure."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def call(i: int) -> None:
        if i % 3 == 0:
            raise KeyError(i)

    recorder = Recorder()
    by = {"even": Recorder(), "odd": Recorder()}
    run_open_loop(
        call,
        rate=10,
        duration_s=1.0,
        recorder=recorder,
        max_workers=2,
        clock=lambda: now[0],
        sleep=sleep,
        by_class=lambda i: by["even" if i % 2 == 0 else "odd"],
    )
    assert recorder.requests == 10 and recorder.errors == {"KeyError": 4}
    assert by["even"].errors == {"KeyError": 2} and by["odd"].errors == {"KeyError": 2}


def test_the_report_names_the_kind_of_a_failure_that_is_no_grpc_error(
    run_load: Callable[..., tuple[int, str, str]],
) -> None:
    failing = {f"rare {i}" for i in range(3)}
    code, out, err = run_load(lambda query: query in failing, error=lambda: RuntimeError("no"))
    assert code == 1 and "class rare: 3 of 10 requests failed (30.0%" in err, err
    assert "40 requests" in out and "errors: RuntimeError: 3" in out, out
