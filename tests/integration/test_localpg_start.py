"""A local Postgres that cannot start says why where it is started: a CI run
or a benchmark keeps no data directory to read server.log in afterwards."""

from __future__ import annotations

import socket
from pathlib import Path

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
