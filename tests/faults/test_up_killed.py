"""`recallatron up` killed by SIGKILL (no handler runs, nothing is cleaned up)
takes its embedded Postgres with it: the server is tied to `up` by a
parent-death signal (recallatron_devkit/localpg.py) and shuts down by itself,
as the services do. On a state directory and ports of its own."""

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


def test_postgres_stops_when_up_is_killed(prepared_models_dir: Path) -> None:
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
    pidfile = state / "pgdata" / "postmaster.pid"
    postgres = 0
    try:
        wait_for(
            lambda: "ready gateway=" in log.read_text() or up.poll() is not None,
            "recallatron up to be ready",
        )
        assert up.poll() is None, log.read_text()
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
