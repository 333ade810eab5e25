"""The commands `up --demo` suggests ("try: ...") run as printed, pasted into
another shell: after `make run` the virtualenv's `bin/` is on no PATH, so the
suggestion names the command by its path unless PATH finds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recallatron.secretfiles import private_dir
from recallatron_cli import main as cli
from recallatron_devkit.stack import Stack

pytestmark = pytest.mark.integration

VENV_BIN = str(Path(sys.executable).parent)


def suggested(out: str) -> list[str]:
    """The demo's suggested command lines, without their 'try:' lead."""
    lines = [line.removeprefix("try:").strip() for line in out.splitlines()]
    return [line for line in lines if line.startswith("RECALLATRON_")]


@pytest.mark.parametrize(
    "path",
    ["/usr/bin:/bin", f"{VENV_BIN}:/usr/bin:/bin"],
    ids=["virtualenv-not-on-path", "virtualenv-activated"],
)
def test_the_demo_suggests_commands_another_shell_can_run(
    stack: Stack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    monkeypatch.setenv("PATH", path)
    state = private_dir(tmp_path / "demo-state")
    cli.demo(stack.gateway, stack.admin_token, state)
    commands = suggested(capsys.readouterr().out)
    assert len(commands) == 2, commands
    # Another shell, elsewhere, with the same PATH and nothing else: the
    # stack is not at the default address (its gateway's port is the test's),
    # nor in the default state directory, so the line must say where it is.
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(tmp_path))}
    elsewhere = private_dir(tmp_path / "elsewhere")
    for command in commands:
        done = subprocess.run(
            ["sh", "-c", command],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (command, done.stderr)
        assert "standup" in done.stdout.lower(), (command, done.stdout)
