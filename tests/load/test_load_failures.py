"""`recallatron load` on a run whose requests failed: a class whose every
request failed has no latency to report (not a p50 of 0 ms), and a run in
which more than --max-failed-share of any class's requests failed exits 1,
naming the class, after printing its figures. No timing assertions: each run
ends when its pools are used up."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron_devkit import load
from recallatron_devkit.loadgen import QueryMix, measure


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def _run_with(fails: Callable[[str], bool]) -> Callable[[argparse.Namespace], dict[str, Any]]:
    """load.run's stand-in: a real measurement over a small mix (used up
    after 40 requests) whose recall fails where `fails` says."""
    pools = {
        "rare": [f"rare {i}" for i in range(10)],
        "common": [f"common {i}" for i in range(10)],
        "entity": [f"entity {i}" for i in range(10)],
        "question": [f"question {i}" for i in range(10)],
    }

    def recall(query: str) -> None:
        if fails(query):
            raise _Unavailable()

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
    def go(fails: Callable[[str], bool], *argv: str) -> tuple[int, str, str]:
        from recallatron_cli.main import main

        monkeypatch.setattr(load, "run", _run_with(fails))
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
