"""The call scope (recallatron/deadline.py): what is left of a deadline, and
what runs when a call is abandoned (only while it is still being served)."""

from __future__ import annotations

import pytest

from recallatron import deadline, errors


def test_remaining_and_capped() -> None:
    leave = deadline.enter(deadline.Scope(10.0))
    try:
        left = deadline.remaining()
        assert left is not None and 9.0 < left <= 10.0
        assert deadline.capped(2.0) == 2.0
        assert deadline.capped(60.0) <= 10.0
    finally:
        leave()
    assert deadline.remaining() is None and deadline.capped(3.0) == 3.0


def test_no_time_left_is_deadline_exceeded() -> None:
    leave = deadline.enter(deadline.Scope(0.0))
    try:
        with pytest.raises(errors.DeadlineExceeded):
            deadline.remaining()
    finally:
        leave()


def test_grpc_without_a_deadline_is_none() -> None:
    assert deadline.Scope(9.2e18).remaining() is None


def test_abandon_runs_what_is_registered_once() -> None:
    scope = deadline.Scope(5.0)
    fired: list[str] = []
    scope.on_abandon(lambda: fired.append("a"))
    take_back = scope.on_abandon(lambda: fired.append("b"))
    take_back()
    scope.abandon()
    scope.abandon()
    assert fired == ["a"]
    # Registered after: runs at once.
    scope.on_abandon(lambda: fired.append("c"))
    assert fired == ["a", "c"]
    leave = deadline.enter(scope)
    try:
        with pytest.raises(errors.DeadlineExceeded):
            deadline.remaining()
    finally:
        leave()


def test_a_finished_call_is_not_abandoned() -> None:
    scope = deadline.Scope(5.0)
    fired: list[str] = []
    scope.on_abandon(lambda: fired.append("a"))
    scope.finish()
    scope.abandon()
    assert fired == [] and not scope.abandoned
