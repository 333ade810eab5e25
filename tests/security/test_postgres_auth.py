"""The embedded Postgres asks every role for its password (issue 21): over
TCP on 127.0.0.1, neither the superuser nor the app role gets in without it,
for a normal or a replication connection, from this OS user or another one
(`nobody`), who cannot read the password files either. A data directory made
with trust by an older version is secured on its next start."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import psycopg
import pytest

from recallatron_devkit.localpg import APP_ROLE, SUPERUSER, LocalPostgres, _commands, hba_is_secure
from recallatron_devkit.stack import Stack, free_port

pytestmark = pytest.mark.integration

ROLES = (SUPERUSER, APP_ROLE)
PSQL = str(_commands.POSTGRES_BIN_PATH / "psql")
AS_ROOT = os.geteuid() == 0


def connect(port: int, user: str, password: str | None, **extra: str) -> psycopg.Connection:
    params = {"host": "127.0.0.1", "port": str(port), "user": user, "dbname": "postgres"}
    # No password file either (not the stack's, not ~/.pgpass).
    params["passfile"] = "/nonexistent"
    if password is not None:
        params["password"] = password
    return psycopg.connect(**params, **extra, connect_timeout=5)  # type: ignore[arg-type]


def refused(port: int, user: str, password: str | None, **extra: str) -> str:
    with pytest.raises(psycopg.OperationalError) as info:
        connect(port, user, password, **extra).close()
    return str(info.value)


def as_nobody(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["su", "-s", "/bin/sh", "nobody", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
    )


def psql_as_nobody(port: int, user: str, password: str = "", replication: bool = False) -> str:
    conninfo = f"host=127.0.0.1 port={port} user={user} dbname=postgres connect_timeout=5"
    if replication:
        conninfo += " replication=database"
    env = f"PGPASSFILE=/nonexistent PGPASSWORD={shlex.quote(password)} " if password else ""
    done = as_nobody(
        f"{env}PGPASSFILE=/nonexistent {PSQL} -w -At {shlex.quote(conninfo)} -c 'SELECT 1'"
    )
    return f"{done.returncode}\n{done.stdout}{done.stderr}"


def test_no_role_gets_in_without_its_password(stack: Stack) -> None:
    assert stack.postgres is not None
    port = stack.postgres.port
    for user in ROLES:
        assert "no password supplied" in refused(port, user, None), user
        assert "password authentication failed" in refused(port, user, "wrong"), user
        assert "no password supplied" in refused(port, user, None, replication="database")
    # The stack's own processes get in, with the passwords from its files.
    with connect(port, SUPERUSER, stack.postgres.superuser_password) as conn:
        assert conn.execute(
            "SELECT rolpassword LIKE 'SCRAM-SHA-256$%%' FROM pg_authid WHERE rolname = %s",
            (APP_ROLE,),
        ).fetchone() == (True,)
        rules = conn.execute("SELECT DISTINCT auth_method FROM pg_hba_file_rules").fetchall()
        assert rules == [("scram-sha-256",)]
    with connect(port, APP_ROLE, stack.app_password):
        pass
    # The files with the passwords are this user's alone.
    for path in (
        stack.postgres.superuser_password_file,
        stack.postgres.app_password_file,
        stack.postgres.passfile,
    ):
        assert path.stat().st_mode & 0o777 == 0o600, path


@pytest.mark.skipif(not AS_ROOT, reason="switching to another OS user needs root")
def test_another_os_user_gets_nowhere(stack: Stack) -> None:
    assert stack.postgres is not None
    port = stack.postgres.port
    for user in ROLES:
        out = psql_as_nobody(port, user)
        assert out.startswith("2\n") and "no password supplied" in out, (user, out)
        out = psql_as_nobody(port, user, replication=True)
        assert out.startswith("2\n") and "no password supplied" in out, (user, out)
        out = psql_as_nobody(port, user, password="guess")
        assert "password authentication failed" in out, (user, out)
    # Nor can that user read the passwords.
    for path in (
        stack.postgres.superuser_password_file,
        stack.postgres.app_password_file,
        stack.postgres.passfile,
    ):
        done = as_nobody(f"cat {shlex.quote(str(path))}")
        assert done.returncode != 0 and not done.stdout, path
    # The refusals are about the password, not the network: with it, it works.
    out = psql_as_nobody(port, APP_ROLE, password=stack.app_password)
    assert out.startswith("0\n1"), out


def test_a_trust_data_directory_is_secured_on_its_next_start(tmp_path: Path) -> None:
    """As an older version left it: initdb --auth=trust, a database in it."""
    pg = LocalPostgres(tmp_path / "pgdata", free_port())
    pg._prepare()
    pg._initdb()
    hba = pg.data_dir / "pg_hba.conf"
    assert not hba_is_secure(hba.read_text())
    pg.single_user("CREATE DATABASE kept;\n")
    assert not pg.superuser_password_file.exists()
    pg.start()
    try:
        assert hba_is_secure(hba.read_text())
        for user in ROLES:
            assert "no password supplied" in refused(pg.port, user, None)
        with connect(pg.port, SUPERUSER, pg.superuser_password) as conn:
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        assert "kept" in names  # the data survived
    finally:
        pg.stop()
    # The next start keeps the same password and needs no change.
    before = hba.stat().st_mtime_ns
    pg.start()
    try:
        with connect(pg.port, SUPERUSER, pg.superuser_password):
            pass
        assert hba.stat().st_mtime_ns == before
    finally:
        pg.stop()


def scram_rounds(port: int, superuser_password: str) -> int:
    with connect(port, SUPERUSER, superuser_password) as conn:
        row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (APP_ROLE,))
        verifier = str(row.fetchone()[0])  # type: ignore[index]
    # SCRAM-SHA-256$<iterations>:<salt>$<stored key>:<server key>
    return int(verifier.split("$", 2)[1].split(":", 1)[0])


def test_the_app_roles_scram_rounds_follow_the_setting(stack: Stack) -> None:
    """The local stack generates the app role's password (256 random bits), so
    its verifier needs no key stretching: 1 round, a cheaper connect for every
    workspace just woken. A store told the default keeps Postgres's 4096."""
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    assert stack.postgres is not None
    port, superuser = stack.postgres.port, stack.postgres.superuser_password
    assert scram_rounds(port, superuser) == 1
    settings = StoreSettings(database_url=stack.postgres.url, app_password=stack.app_password)
    assert settings.app_password_scram_iterations == 4096
    for rounds in (4096, 1):  # back to the stack's own at the end
        db = Databases(settings.model_copy(update={"app_password_scram_iterations": rounds}))
        try:
            db.ensure_server(db.default_server)
        finally:
            db.close()
        assert scram_rounds(port, superuser) == rounds
        with connect(port, APP_ROLE, stack.app_password):
            pass
