"""The embedding job's queue of marked workspaces (services/store/infrastructure/work_marks.py):
earliest due first, one worker per workspace, a mark made while a workspace
is taken brings it back at once, and a workspace handed back with nothing
left leaves the queue."""

from __future__ import annotations

import threading

from services.store.infrastructure.work_marks import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_earliest_due_first_and_not_before_it_is_due() -> None:
    clock = Clock()
    queue = WorkQueue(clock)
    queue.mark("late", at=105.0)
    queue.mark("first")
    queue.mark("second")
    assert queue.take(0) == "first"
    assert queue.take(0) == "second"
    assert queue.take(0) is None  # "late" is not due yet
    clock.now = 105.0
    assert queue.take(0) == "late"


def test_one_worker_per_workspace_and_marks_while_taken_count() -> None:
    queue = WorkQueue(Clock())
    queue.mark("ws")
    assert queue.take(0) == "ws"
    queue.mark("ws")  # a write while a worker has it
    assert queue.take(0) is None  # not handed to a second worker
    queue.done("ws", None)  # nothing left, but it was marked again
    assert queue.take(0) == "ws"
    queue.done("ws", None)
    assert queue.take(0) is None and len(queue) == 0


def test_a_mark_wakes_a_waiting_worker() -> None:
    queue = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.take(30)))
    worker.start()
    queue.mark("ws")
    worker.join(30)
    assert got == ["ws"]
