"""`recallatron load` stopped by Ctrl-C or SIGTERM stops at once, whichever of
its threads the kernel hands the signal to: the interpreter runs a signal's
handler only in the main thread, so the main thread must not wait on the
workers without waking (tests/unit/test_cli_stops.py has the rule itself)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60.0


def _stopped(script: str) -> tuple[str, str]:
    """``script`` run to its end (it stops itself with a signal to a worker
    thread): its stdout and stderr; an error if it still runs after the wait."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        return proc.communicate(timeout=WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"running {WAIT_SECONDS:.0f} s after the stop: {out!r}") from None


# The first call sends SIGINT to its own worker thread, as the kernel may;
# the run's duration is far longer than the test waits. Once the run is
# stopped, its workers must end too (a benchmark calling the generator goes
# on in the same process).
_STOPPED_IN_A_WORKER = """
import signal, sys, threading, time
from recallatron_devkit.loadgen import Recorder, run_closed_loop

def call(i):
    if i == 0:
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    time.sleep(0.01)

try:
    run_closed_loop(call, 2, 600.0, Recorder())
except KeyboardInterrupt:
    print("stopped", flush=True)
deadline = time.monotonic() + 30
while threading.active_count() > 1 and time.monotonic() < deadline:
    time.sleep(0.05)
print("threads", threading.active_count(), flush=True)
"""


def test_a_closed_loop_takes_a_stop_delivered_to_a_worker_thread() -> None:
    """The closed loop joined its workers without end: a Ctrl-C the kernel
    delivered to a worker was acted on only when --duration was over."""
    out, err = _stopped(_STOPPED_IN_A_WORKER)
    assert out.split("\n")[:2] == ["stopped", "threads 1"], (out, err)


# A stack that no longer answers: every call waits, the open loop's queue
# fills, and the first call, once the loop waits for a place in it, sends
# SIGINT to its own worker thread.
_STOPPED_IN_A_STALLED_OPEN_LOOP = """
import os, signal, threading, time
from recallatron_devkit.loadgen import Recorder, run_open_loop

stalled = threading.Event()
def call(i):
    if i == 0:
        time.sleep(1.0)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    stalled.wait(600)

try:
    run_open_loop(call, 1000.0, 600.0, Recorder(), max_workers=2)
except KeyboardInterrupt:
    print("stopped", flush=True)
os._exit(0)
"""


def test_an_open_loop_on_a_stalled_stack_takes_a_stop_delivered_to_a_worker_thread() -> None:
    """The open loop waited without end for a place in its full queue, and
    then for the calls under way: a Ctrl-C the kernel delivered to a worker
    was not acted on while the stack did not answer."""
    out, err = _stopped(_STOPPED_IN_A_STALLED_OPEN_LOOP)
    assert out == "stopped\n", (out, err)


# One request every 1,000 s: the first call, a second after it was sent,
# sends SIGINT to its own worker thread while the loop waits for the second's
# time.
_STOPPED_BETWEEN_SENDS_AT_A_LOW_RATE = """
import os, signal, threading, time
from recallatron_devkit.loadgen import Recorder, run_open_loop

def call(i):
    if i == 0:
        time.sleep(1.0)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

try:
    run_open_loop(call, 0.001, 3000.0, Recorder(), max_workers=2)
except KeyboardInterrupt:
    print("stopped", flush=True)
os._exit(0)
"""


def test_an_open_loop_at_a_low_rate_takes_a_stop_delivered_to_a_worker_thread() -> None:
    """The open loop slept the whole gap to its next send in the main thread:
    a Ctrl-C the kernel delivered to a worker was acted on only at the next
    send (at --rate 0.001, 1,000 s later)."""
    out, err = _stopped(_STOPPED_BETWEEN_SENDS_AT_A_LOW_RATE)
    assert out == "stopped\n", (out, err)
