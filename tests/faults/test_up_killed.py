"""`recallatron up` killed by SIGKILL (no handler runs, nothing is cleaned up)
takes its embedded Postgres with it: the server is tied to `up` by a
parent-death signal (recallatron_devkit/localpg.py) and shuts down by itself,
as the services do. And the other way round: a part of the stack killed under
`up` (its Postgres, a service) stops the stack, saying which. Each on a state
directory and ports of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from recallatron_devkit.localpg import LocalPostgres
from tests.conftest import WAIT_SECONDS, free_port, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose here.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _start_up(prepared_models_dir: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    """`recallatron up` on a state directory and ports of its own: the
    process, its state directory (output in up.out) and its Postgres port."""
    state = Path(tempfile.mkdtemp(prefix="recallatron-up-killed-"))
    pg_port = free_port()
    env = {
        **os.environ,
        "RECALLATRON_STATE_DIR": str(state),
        "RECALLATRON_MODELS_DIR": str(prepared_models_dir),
        "RECALLATRON_PG_PORT": str(pg_port),
        **{f"RECALLATRON_{n}_PORT": "0" for n in ("GATEWAY", "STORE", "EMBED", "RANK")},
    }
    env.pop("RECALLATRON_DATABASE_URL", None)
    log = state / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "recallatron_cli.main", "up"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return up, state, pg_port


def _ready(up: subprocess.Popen[bytes], state: Path) -> None:
    log = state / "up.out"
    wait_for(
        lambda: "ready gateway=" in log.read_text() or up.poll() is not None,
        "recallatron up to be ready",
    )
    assert up.poll() is None, log.read_text()


def test_postgres_stops_when_up_is_killed(prepared_models_dir: Path) -> None:
    up, state, pg_port = _start_up(prepared_models_dir)
    pidfile = state / "pgdata" / "postmaster.pid"
    postgres = 0
    try:
        _ready(up, state)
        postgres = int(pidfile.read_text().splitlines()[0])
        assert _alive(postgres)
        up.send_signal(signal.SIGKILL)
        up.wait()
        wait_for(lambda: not _alive(postgres), "postgres to stop after up was killed")
        # A shutdown, not a crash: it removed its pid file on the way out.
        assert not pidfile.exists()
        assert "shutting down" in (state / "pgdata" / "server.log").read_text()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if postgres and _alive(postgres):
            # What the old code left behind: stop it, as the next `up` would.
            LocalPostgres(state / "pgdata", pg_port)._stop_leftover(timeout=WAIT_SECONDS)


def _child(parent: int, module: str) -> int:
    """The pid of ``parent``'s child running ``python -m module``."""
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().split(") ", 1)[1].split()[1])
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and module.encode() in argv:
            return int(proc.name)
    raise AssertionError(f"no {module} under {parent}")


@pytest.mark.parametrize("part", ["postgres", "rank"])
def test_up_stops_the_stack_when_a_part_of_it_is_killed(
    prepared_models_dir: Path, part: str
) -> None:
    """`up` watched its services but not its own Postgres: with the server
    killed it kept saying nothing and serving errors; and a service that died
    stopped the stack with exit status 0."""
    up, state, pg_port = _start_up(prepared_models_dir)
    log = state / "up.out"
    try:
        _ready(up, state)
        others = [_child(up.pid, f"services.{name}") for name in ("gateway", "store", "embed")]
        if part == "postgres":
            victim = int((state / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        else:
            victim = _child(up.pid, f"services.{part}")
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: up.poll() is not None, f"recallatron up to stop after {part} died")
        out = log.read_text()
        assert up.returncode == 1, out
        assert f"{part} was killed by SIGKILL; stopping\n" in out, out
        assert out.rstrip().endswith("stopped"), out
        # What else it started is stopped with it.
        assert [pid for pid in others if _alive(pid)] == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        pidfile = state / "pgdata" / "postmaster.pid"
        if pidfile.exists():
            LocalPostgres(state / "pgdata", pg_port)._stop_leftover(timeout=WAIT_SECONDS)
