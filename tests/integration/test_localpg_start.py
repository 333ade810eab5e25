"""A local Postgres that cannot start says why where it is started: a CI run
or a benchmark keeps no data directory to read server.log in afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.ports import free_port

pytestmark = pytest.mark.integration


def test_a_server_that_exits_at_start_quotes_its_own_reason(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        pg = LocalPostgres(tmp_path / "pgdata", port, secrets_dir=tmp_path / "secrets")
        with pytest.raises(RuntimeError) as failed:
            pg.start()
    message = str(failed.value)
    assert message.startswith("postgres exited with 1")
    # Postgres's own words for the port another process holds.
    assert "could not bind" in message and "Address already in use" in message, message


def test_a_stale_lock_naming_another_process_neither_signals_it_nor_stops_the_start(
    tmp_path: Path,
) -> None:
    """A server killed with its machine leaves postmaster.pid behind; after a
    reboot (or enough processes) its PID may be some other program's. The
    start must neither send that program a signal nor be refused for it."""
    pg = LocalPostgres(tmp_path / "pgdata", free_port(), secrets_dir=tmp_path / "secrets")
    pg.start()
    pg.stop()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock = pg.data_dir / "postmaster.pid"
        # As a kill -9 leaves it (postgres removes it on a clean stop), with
        # the PID of a program that is not this data directory's server.
        lock.write_text(f"{other.pid}\n{pg.data_dir}\n1700000000\n{pg.port}\n\n127.0.0.1\n")
        pg.start()
        try:
            assert other.poll() is None, "the other program was signalled"
            with psycopg.connect(pg.url, connect_timeout=5) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            pg.stop()
    finally:
        other.kill()
        other.wait()


def test_a_server_of_this_data_directory_left_running_is_stopped_first(tmp_path: Path) -> None:
    """The other side of the lock's check: a leftover server of this very
    directory (an earlier run killed before it stopped it) is shut down, its
    lock honoured, before the new one starts."""
    first = LocalPostgres(tmp_path / "pgdata", free_port(), secrets_dir=tmp_path / "secrets")
    first.start()
    try:
        assert first.process is not None
        again = LocalPostgres(first.data_dir, first.port, secrets_dir=tmp_path / "secrets")
        again.start()
        try:
            assert first.process.wait(timeout=60) == 0  # a fast shutdown, not a kill
            with psycopg.connect(again.url, connect_timeout=5) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            again.stop()
    finally:
        first.stop()


def test_a_backend_left_behind_by_a_killed_postmaster_does_not_stop_the_start(
    tmp_path: Path,
) -> None:
    """A server killed with SIGKILL may leave a backend behind (one forked as
    its postmaster died, or one waiting on a lock a killed peer held): it keeps
    the shared memory attached, and postgres refuses to start beside it. The
    start ends such leftovers of its own data directory."""
    pg = LocalPostgres(tmp_path / "pgdata", free_port(), secrets_dir=tmp_path / "secrets")
    pg.start()
    conn = psycopg.connect(pg.url, connect_timeout=5)
    backend = conn.info.backend_pid
    postmaster = int((pg.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    try:
        # Held still, the backend cannot notice its postmaster's death: as one
        # blocked on a lock whose holder was killed.
        os.kill(backend, signal.SIGSTOP)
        os.kill(postmaster, signal.SIGKILL)
        assert pg.process is not None
        pg.process.wait()
        pg.start()
        try:
            with psycopg.connect(pg.url, connect_timeout=5) as fresh:
                assert fresh.execute("SELECT 1").fetchone() == (1,)
        finally:
            pg.stop()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(backend, signal.SIGKILL)
        conn.close()
