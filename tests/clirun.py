"""The `recallatron` command run as a child process against a test stack, as
an operator runs it (`python -m recallatron_cli.main`, the store's settings,
no progress bar): to its end (``cli``) or started to be stopped (``start``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from recallatron_devkit.stack import Stack
from tests.conftest import WAIT_SECONDS

REPO = Path(__file__).resolve().parents[1]


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "recallatron_cli.main", *args]


def _env(stack: Stack) -> dict[str, str]:
    return {**stack.env_for("store"), "RECALLATRON_PROGRESS": "off"}


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The command run to its end, its output captured."""
    return subprocess.run(
        _command(*args),
        env=_env(stack),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 2,
    )


def _ctrl_c_as_at_a_terminal() -> None:
    """In the child: SIGINT's default action back. A run started in the
    background of a non-interactive shell (a CI script's `... &`) ignores
    SIGINT, as its children do unless told otherwise, and Python installs its
    Ctrl-C handler only when SIGINT is not ignored: the command then took no
    notice of the test's SIGINT (stderr empty, never ending)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(stack: Stack, *args: str) -> subprocess.Popen[str]:
    """The command started as a user at a terminal starts it."""
    return subprocess.Popen(
        _command(*args),
        env=_env(stack),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )
