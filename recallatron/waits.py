"""Waits in the main thread for a command's own threads that still take a
stop signal. The kernel may deliver Ctrl-C or SIGTERM to any thread, and the
interpreter runs its handler only in the main thread, once that thread runs
again: a wait without end (``Thread.join()``, ``as_completed``) never does,
so a stop would be acted on only when the work is over; nor does a sleep
wake for a signal delivered to another thread. Each wait here wakes the main
thread every half second. Used by the CLI (migrate-db) and the dev kit
(load's workers, and its open loop's gaps between sends)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_for_futures
from typing import TypeVar

# How often the main thread wakes to take a signal delivered elsewhere.
WAKE_SECONDS = 0.5
_T = TypeVar("_T")


def completed(futures: Iterable[Future[_T]]) -> Iterator[Future[_T]]:
    """``futures`` as each completes (as ``concurrent.futures.as_completed``),
    the main thread waking meanwhile so that a stop signal delivered to a
    worker thread still stops the caller."""
    pending = set(futures)
    while pending:
        done, pending = wait_for_futures(pending, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
        yield from done


def joined(threads: Iterable[threading.Thread]) -> None:
    """Returns once every one of ``threads`` has ended (as ``join()`` on each),
    the main thread waking meanwhile to take a stop signal."""
    for thread in threads:
        while thread.is_alive():
            thread.join(WAKE_SECONDS)


def acquired(semaphore: threading.Semaphore) -> None:
    """``semaphore`` acquired (as ``acquire()``), the main thread waking
    meanwhile to take a stop signal."""
    while not semaphore.acquire(timeout=WAKE_SECONDS):
        pass


def slept(seconds: float) -> None:
    """Returns after ``seconds`` (as ``time.sleep``), the main thread waking
    meanwhile to take a stop signal."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, WAKE_SECONDS))
