"""Any `recallatron` command stopped by Ctrl-C or SIGTERM ends as the operator
commands built for it do (tests/integration/test_operator_stops.py): one line
on stderr naming the command and how to go on, never a traceback, and the
exit status a shell gives a command that signal ended (128 + its number)."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recallatron_cli import common, operator, tools
from recallatron_cli import main as cli

REPO = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60.0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize(
    "args",
    [["servers", "list"], ["scrub", "--workspace", "w"], ["rebuild"]],
    ids=lambda a: a[0],
)
def test_a_command_stopped_while_its_database_keeps_silent_says_so_in_one_line(
    args: list[str], sig: signal.Signals, tmp_path: Path
) -> None:
    """Stopped while it waits for a server that took its connection and never
    answers: `servers` and `scrub` ended in a traceback on Ctrl-C and without
    a word on SIGTERM; `rebuild` waited for the server's time-out."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        silent.settimeout(WAIT_SECONDS)
        env = {
            **os.environ,
            "RECALLATRON_DATABASE_URL": (
                f"postgresql://postgres:pw@127.0.0.1:{port}/postgres?connect_timeout=600"
            ),
            "RECALLATRON_APP_PASSWORD": "app-pw",
            "RECALLATRON_STATE_DIR": str(tmp_path),
            "RECALLATRON_PROGRESS": "off",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "recallatron_cli.main", *args],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            conn, _ = silent.accept()
            with conn:
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=WAIT_SECONDS)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert "Traceback" not in err, err
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert last.startswith(f"error: {args[0]} stopped"), err
    assert "again" in last, err


def test_a_client_command_stopped_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(_: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(tools, "cmd_recall", interrupted)
    try:
        status = cli.main(["recall", "herons", "--token", "t"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt left main(): a traceback")
    err = capsys.readouterr().err
    assert status == 128 + signal.SIGINT
    assert err.startswith("error: recall stopped") and err.count("\n") == 1, err


def test_a_command_s_own_stop_message_is_the_only_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that says itself what its stop left (move-workspace, export,
    import, migrate-db) is not followed by the general line."""

    def says_itself(_: argparse.Namespace) -> int:
        return common.stopped("move-workspace stopped (its last step above); run it again")

    monkeypatch.setattr(operator, "cmd_move_workspace", says_itself)
    monkeypatch.setattr(operator, "find_database", lambda: None)
    status = cli.main(["move-workspace", "w", "--to", "s"])
    err = capsys.readouterr().err
    assert status == 128 + signal.SIGINT
    assert err == "error: move-workspace stopped (its last step above); run it again\n"


# A command whose threads go on working after Ctrl-C (load's workers, a
# pool's queued calls), run as the `recallatron` program is.
STILL_WORKING = """
import sys, threading, time
from recallatron_cli import main as cli, tools

def working(_args):
    threading.Thread(target=time.sleep, args=(600,), name="worker").start()
    print("working", flush=True)
    time.sleep(600)
    return 0

tools.cmd_recall = working
sys.argv = ["recallatron", "recall", "herons", "--token", "t"]
sys.exit(cli.main())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stopped_command_ends_though_its_threads_still_work(sig: signal.Signals) -> None:
    """It said it had stopped, then the interpreter's exit waited for its
    threads (for the rest of a `load --duration`)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STILL_WORKING],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "working\n"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert err.startswith("error: recall stopped") and err.count("\n") == 1, err


# The main thread blocks SIGINT, so the kernel hands it to the worker thread:
# the interpreter still runs its handler in the main thread, but only once that
# thread runs again (a wait without end, as_completed's, never does).
_WAITS_ON_A_FUTURE = """
import signal, sys, threading
from concurrent.futures import Future
from recallatron.waits import completed
threading.Thread(target=threading.Event().wait, daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
try:
    print("waiting", flush=True)
    for _ in completed([Future()]):
        pass
except KeyboardInterrupt:
    print("stopped", flush=True)
"""


def test_a_wait_on_threads_takes_a_stop_delivered_to_a_worker_thread() -> None:
    """migrate-db waits for its migrations in the main thread; a Ctrl-C the
    kernel delivered to one of its threads left it waiting for ever (seen as
    'the command did not end after SIGINT' on a busy machine)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WAITS_ON_A_FUTURE],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.strip() == "stopped", (out, err)


# Ctrl-C while the command still imports its modules (its first ~0.2 s), made
# certain: the first import of grpc, which the command's modules need, is
# interrupted, as a Ctrl-C arriving then would interrupt it.
_INTERRUPTED_IMPORT = """
import sys

class Interrupted:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupted())
"""


@pytest.mark.parametrize(
    "program",
    [
        [sys.executable, "-m", "recallatron_cli.main"],
        [sys.executable, str(Path(sys.executable).parent / "recallatron")],
    ],
    ids=["python-m", "script"],
)
def test_a_command_stopped_while_it_starts_says_so_in_one_line(
    program: list[str], tmp_path: Path
) -> None:
    """Before main() had its handler in place a Ctrl-C ended the command in a
    traceback."""
    (tmp_path / "sitecustomize.py").write_text(_INTERRUPTED_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RECALLATRON_STATE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [*program, "servers", "list"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=WAIT_SECONDS,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (
        128 + signal.SIGINT,
        "error: recallatron stopped; run it again\n",
    )
