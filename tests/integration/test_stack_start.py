"""`recallatron up` starting: on a fresh state directory without prepared
models the start fails within seconds with the embed service's own reason,
instead of waiting out the start timeout; a second `up` in the state
directory of one that runs refuses and leaves it alone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack, StackConfig
from tests.conftest import WAIT_SECONDS, free_port, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_start_without_models_fails_fast_with_the_services_reason(tmp_path: Path) -> None:
    stack = Stack(
        StackConfig(
            state_dir=tmp_path / "state",
            # Never connected to: only the embed service runs, and it needs no database.
            database_url="postgresql://127.0.0.1:1/unused",
            ports={"embed": 0},
            models_dir=tmp_path / "no-models",
            services=("embed",),
            embedding_job=False,
        )
    )
    began = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        stack.start()
    # Noticed when the process exited, not at the start timeout (generous
    # margin: a slow machine is slow, not six times slower than that bound).
    assert time.monotonic() - began < stack.config.start_timeout / 2, "waited instead of failing"
    message = str(failed.value)
    assert message.startswith("embed exited with 1: bi-encoder not loaded")
    assert "recallatron prepare-models" in message
    assert "Nones" not in message
    assert stack.processes["embed"].poll() == 1


def _up(
    state: Path, models: Path, pg_port: int, out: Path, more: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`recallatron up` in ``state`` as a user starts it, services on free ports."""
    env = {
        **os.environ,
        "RECALLATRON_STATE_DIR": str(state),
        "RECALLATRON_MODELS_DIR": str(models),
        "RECALLATRON_PG_PORT": str(pg_port),
        **{f"RECALLATRON_{n}_PORT": "0" for n in ("GATEWAY", "STORE", "EMBED", "RANK")},
        **(more or {}),
    }
    env.pop("RECALLATRON_DATABASE_URL", None)
    with open(out, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "recallatron_cli.main", "up"],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_second_up_in_the_same_state_directory_leaves_the_running_stack_alone(
    tmp_path: Path, prepared_models_dir: Path
) -> None:
    state = tmp_path / "state"
    pg_port = free_port()
    first_out, second_out = tmp_path / "first.out", tmp_path / "second.out"
    first = _up(state, prepared_models_dir, pg_port, first_out)
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_for(
            lambda: "ready gateway=" in first_out.read_text() or first.poll() is not None,
            "the first up to be ready",
        )
        assert first.poll() is None, first_out.read_text()
        gateway = first_out.read_text().split("ready gateway=", 1)[1].split()[0]
        postgres = (state / "pgdata" / "postmaster.pid").read_text().splitlines()[0]
        # The same command again, say from another terminal.
        second = _up(state, prepared_models_dir, pg_port, second_out)
        wait_for(
            lambda: second.poll() is not None or "ready gateway=" in second_out.read_text(),
            "the second up to end or be ready",
        )
        said = second_out.read_text()
        assert second.wait(WAIT_SECONDS) == 1, said
        # Refused as every command refuses: one line starting "error:".
        refused = f"\nerror: could not start: a stack is already running in {state.resolve()}"
        assert refused in said, said
        assert f"pid {first.pid}" in said, said
        assert "Traceback" not in said, said
        # The first stack still runs on its own Postgres and answers.
        assert first.poll() is None, first_out.read_text()
        assert (state / "pgdata" / "postmaster.pid").read_text().splitlines()[0] == postgres
        admin = Client(gateway, (state / "admin-token").read_text().strip(), timeout=30)
        try:
            admin.create_workspace("still-serving")
        finally:
            admin.close()
        assert (state / "run" / "gateway.port").read_text().strip() == gateway.split(":")[1]
    finally:
        if second is not None:
            _stop(second)
        _stop(first)
    assert "stopped" in first_out.read_text()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RECALLATRON_PG_PORT", "{port}"),
        ("RECALLATRON_STORE_PORT", "{port}"),
        ("RECALLATRON_REVIEW_LISTEN", "127.0.0.1:{port}"),
    ],
)
def test_a_port_taken_by_another_process_is_named_with_its_setting(
    tmp_path: Path, prepared_models_dir: Path, variable: str, value: str
) -> None:
    state = tmp_path / "state"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = tmp_path / "up.out"
        up = _up(state, prepared_models_dir, free_port(), out, {variable: value.format(port=port)})
        try:
            code = up.wait(WAIT_SECONDS)
        finally:
            _stop(up)
    said = out.read_text()
    assert code == 1, said
    assert f"127.0.0.1:{port}" in said and "taken" in said and variable in said, said
    assert said.splitlines()[-1].startswith("error: could not start: "), said
    assert "Traceback" not in said and "its log ends" not in said, said
    # Refused before anything started: no server left behind, no log written.
    assert not (state / "pgdata" / "postmaster.pid").exists()
    assert not (state / "logs").exists() or not any((state / "logs").iterdir())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_up_stopped_while_it_starts_says_so_as_every_stopped_command(
    tmp_path: Path, prepared_models_dir: Path, sig: signal.Signals
) -> None:
    """Ctrl-C or SIGTERM before the stack is ready abandons the start: it
    said `error: could not start: start abandoned` and exited 1, as a start
    that failed. Its store waits here for a database that is not there, so
    the stack is never ready."""
    out = tmp_path / "up.out"
    nowhere = {"RECALLATRON_DATABASE_URL": "postgresql://postgres:pw@127.0.0.1:1/postgres"}
    up = _up(tmp_path / "state", prepared_models_dir, free_port(), out, nowhere)
    try:
        wait_for(lambda: "starting" in out.read_text() or up.poll() is not None, "up to start")
        assert up.poll() is None, out.read_text()
        up.send_signal(sig)
        code = up.wait(WAIT_SECONDS)
    finally:
        _stop(up)
    said = out.read_text()
    assert "Traceback" not in said, said
    assert code == 128 + sig, said
    assert said.strip().splitlines()[-1].startswith("error: up stopped"), said
