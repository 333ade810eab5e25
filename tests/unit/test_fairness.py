"""The fair scheduler (recallatron/fairness.py): a busy key waits on itself,
admission refuses past a key's or sub-key's limit with a retry hint, and the
ticket travels in the context gRPC submits a call's handler from."""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future

import pytest

from recallatron.fairness import TICKET, FairExecutor, Limits, Ticket


def _submit(pool: FairExecutor, ticket: Ticket, fn) -> Future:  # type: ignore[no-untyped-def]
    """As gRPC does: the handler's context.run, the ticket set in that context."""
    ctx = contextvars.copy_context()
    ctx.run(TICKET.set, ticket)
    return pool.submit(ctx.run, fn)


def test_a_busy_key_waits_on_itself() -> None:
    pool = FairExecutor(3, Limits(concurrency=2, queue=100))
    release = threading.Event()
    try:
        busy = [_submit(pool, pool.admit("workspace:a"), release.wait) for _ in range(20)]
        other = _submit(pool, pool.admit("workspace:b"), lambda: "served")
        # Two threads hold a's calls, 18 wait without a thread; b is served.
        assert other.result(timeout=10) == "served"
        assert sum(f.running() for f in busy) == 2
    finally:
        release.set()
    assert all(f.result(timeout=10) for f in busy)
    pool.shutdown()


def test_keys_take_turns() -> None:
    pool = FairExecutor(1, Limits(concurrency=1, queue=100))
    order: list[str] = []
    gate = threading.Event()
    first = _submit(pool, pool.admit("hold"), gate.wait)
    futures = [
        _submit(pool, pool.admit(key), lambda k=key: order.append(k))
        for key in ["a", "a", "a", "b", "c"]
    ]
    gate.set()
    first.result(timeout=10)
    for f in futures:
        f.result(timeout=10)
    assert order == ["a", "b", "c", "a", "a"]
    pool.shutdown()


def test_admission_refuses_past_the_limits_with_a_hint() -> None:
    pool = FairExecutor(2, Limits(concurrency=1, queue=2, sub_limit=2))
    tickets = [pool.admit("workspace:a", "token:1") for _ in range(2)]
    assert not any(t.refused for t in tickets)
    third = pool.admit("workspace:a", "token:1")
    assert third.refused and third.retry_after > 0  # the token's limit
    assert not pool.admit("workspace:a", "token:2").refused
    fourth = pool.admit("workspace:a", "token:3")
    assert fourth.refused and fourth.retry_after > 0  # the workspace's limit
    assert not pool.admit("workspace:b", "token:4").refused
    # A refusal is answered at once, on no key's share.
    release = threading.Event()
    held = [_submit(pool, t, release.wait) for t in tickets]
    assert _submit(pool, fourth, lambda: "refused").result(timeout=10) == "refused"
    release.set()
    for f in held:
        f.result(timeout=10)
    pool.shutdown()


def test_finished_calls_free_their_place() -> None:
    pool = FairExecutor(1, Limits(concurrency=1, queue=0))
    ticket = pool.admit("k")
    assert pool.admit("k").refused
    _submit(pool, ticket, lambda: None).result(timeout=10)
    assert pool.outstanding("k") == 0
    assert not pool.admit("k").refused
    pool.shutdown()


def test_an_exception_reaches_the_future() -> None:
    pool = FairExecutor(1, Limits(concurrency=1, queue=1))

    def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        _submit(pool, pool.admit("k"), boom).result(timeout=10)
    assert pool.outstanding("k") == 0
    pool.shutdown()


def _running_soon(futures: list[Future], n: int) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + 10
    while sum(f.running() for f in futures) < n:
        assert time.monotonic() < deadline, sum(f.running() for f in futures)
        time.sleep(0.001)


def test_a_lone_key_uses_more_than_its_share_until_another_key_comes() -> None:
    """Work-conserving shares: alone, a key runs up to ``alone`` calls at once;
    once another key has a call outstanding, the first starts no new call
    until it is back within ``concurrency``, and the other is served at once;
    only ``alone_after`` seconds after the other's last call may the first
    run ``alone`` again."""
    pool = FairExecutor(10, Limits(concurrency=2, queue=100, alone=4, alone_after=0.3))
    hold = [threading.Event() for _ in range(8)]
    try:
        a = [_submit(pool, pool.admit("a"), hold[i].wait) for i in range(8)]
        _running_soon(a, 4)
        time.sleep(0.05)
        assert [f.running() for f in a] == [True] * 4 + [False] * 4  # alone: 4, not 2
        gate = threading.Event()
        b = _submit(pool, pool.admit("b"), gate.wait)
        _running_soon([b], 1)  # b is served at once
        for i in range(3):
            hold[i].set()
        _running_soon(a, 2)
        time.sleep(0.05)
        assert [f.running() for f in a] == [False] * 3 + [True] * 2 + [False] * 3  # its share
        gate.set()
        b.result(timeout=10)
        hold[3].set()  # b has just left: a stays within its share
        _running_soon(a, 2)
        time.sleep(0.05)
        assert sum(f.running() for f in a) == 2
        time.sleep(0.3)  # b's last call is alone_after ago
        hold[4].set()
        _running_soon(a, 3)  # 5, 6 and 7: alone again
        assert [f.running() for f in a][5:] == [True] * 3
    finally:
        for event in hold:
            event.set()
    assert all(f.result(timeout=10) for f in a)
    pool.shutdown()


def test_without_alone_a_key_keeps_its_share() -> None:
    pool = FairExecutor(8, Limits(concurrency=2, queue=100))
    assert pool.limits.alone == 2
    release = threading.Event()
    try:
        futures = [_submit(pool, pool.admit("a"), release.wait) for _ in range(5)]
        _running_soon(futures, 2)
        time.sleep(0.05)
        assert sum(f.running() for f in futures) == 2
    finally:
        release.set()
    assert all(f.result(timeout=10) for f in futures)
    pool.shutdown()
