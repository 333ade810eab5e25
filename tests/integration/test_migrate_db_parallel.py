"""`migrate-db --parallel N` holds up to N admin connections on a server at
once, outside the store's budget: N had no upper bound, so a large one took
the connections the store's and the embedding job's replicas are promised
(docs/servers.md, "Connection budget"). It is bounded by what the server
leaves beyond them, and a larger N is refused naming --parallel and the bound,
before anything is migrated. Driven in this process on an embedded server of
its own, with max_connections 60."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port

pytestmark = pytest.mark.integration

MAX_CONNECTIONS = 60
# The defaults on the default server: store 26 + embedding job 13
# (docs/servers.md), and this command's own control-plane pool, 4.
PROCESSES = 26 + 13
CONTROL_POOL = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    base: Path = tmp_path_factory.mktemp("migrate-parallel")
    pg = LocalPostgres(base / "pg", free_port(), base / "secrets", max_connections=MAX_CONNECTIONS)
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def settings(server: LocalPostgres, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLATRON_DATABASE_URL", server.url)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD", server.app_password)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
    for name in ("RECALLATRON_POSTGRES_SERVERS", "RECALLATRON_POSTGRES_SERVERS_DIR"):
        monkeypatch.delenv(name, raising=False)


def _reserved(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true), '0')::int"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_parallel_past_the_servers_room_is_refused_naming_it_and_the_bound(
    server: LocalPostgres, settings: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from recallatron_cli.main import main

    bound = MAX_CONNECTIONS - _reserved(server.url) - PROCESSES - CONTROL_POOL
    assert bound >= 1
    assert main(["migrate-db", "--parallel", str(bound + 1)]) == 2
    out, err = capsys.readouterr()
    assert out == "", out
    assert err.startswith("error: INVALID_ARGUMENT: parallel (--parallel): "), err
    said = re.search(r"at most (\d+) on server 'default'", err)
    assert said is not None and int(said.group(1)) == bound, err
    assert "max_connections 60" in err, err
    # Its bound itself runs.
    assert main(["migrate-db", "--parallel", str(bound)]) == 0, capsys.readouterr().err
    assert "migrations done" in capsys.readouterr().out
