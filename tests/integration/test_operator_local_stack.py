"""Operator commands beside a local stack find its embedded server by
themselves. `recallatron up` runs in a state directory of its own, as `make
run` does; `scrub`, `migrate-db`, `servers` and `rebuild` then run with that
state directory and no RECALLATRON_DATABASE_URL. Once the stack is stopped
they say so and how to start it; with no state directory at all they name
the setting to give."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from recallatron_devkit.localpg import LocalPostgres
from tests.conftest import WAIT_SECONDS, free_port, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# What a shell of a new user does not have: every way of naming a server or
# its passwords by hand.
UNSET = (
    "RECALLATRON_DATABASE_URL",
    "RECALLATRON_APP_PASSWORD",
    "RECALLATRON_POSTGRES_SERVERS",
    "RECALLATRON_POSTGRES_SERVERS_DIR",
    "RECALLATRON_EMBED_TARGET",
    "RECALLATRON_INTERNAL_KEY",
    "RECALLATRON_INTERNAL_KEY_FILE",
    "RECALLATRON_ADMIN_TOKEN",
)


def _env(state: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["RECALLATRON_STATE_DIR"] = str(state)
    env.update(more)
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 2,
    )


@pytest.fixture()
def local_stack(prepared_models_dir: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """`recallatron up` on a state directory of its own, ready."""
    state = Path(tempfile.mkdtemp(prefix="recallatron-operator-"))
    pg_port = free_port()
    env = _env(
        state,
        RECALLATRON_MODELS_DIR=str(prepared_models_dir),
        RECALLATRON_PG_PORT=str(pg_port),
        **{f"RECALLATRON_{n}_PORT": "0" for n in ("GATEWAY", "STORE", "EMBED", "RANK")},
    )
    log = state / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "recallatron_cli.main", "up"],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: "ready gateway=" in log.read_text() or up.poll() is not None,
            "recallatron up to be ready",
        )
        assert up.poll() is None, log.read_text()
        yield state, up
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
        # A server left behind by a failed stop: stopped as the next `up` would.
        LocalPostgres(state / "pgdata", pg_port)._stop_leftover(timeout=WAIT_SECONDS)


def test_operator_commands_find_the_running_local_stack(
    local_stack: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    state, up = local_stack
    env = _env(state)
    slug = f"op-{uuid.uuid4().hex[:8]}"
    gateway = re.search(r"ready gateway=(\S+)", (state / "up.out").read_text())
    assert gateway is not None
    made = _cli(env, "admin", "--gateway", gateway.group(1), "create-workspace", slug)
    assert made.returncode == 0, made.stderr
    # The README's operator lines: the operator token named by the variable
    # every command reads (a member's token there would be refused).
    as_operator = {**env, "RECALLATRON_TOKEN_FILE": str(state / "admin-token")}
    listed = _cli(as_operator, "admin", "--gateway", gateway.group(1), "list-workspaces")
    assert listed.returncode == 0, listed.stderr
    workspace_id = next(x.split()[0] for x in listed.stdout.splitlines() if f"  {slug}  " in x)
    for line in (
        ("admin", "--gateway", gateway.group(1), "create-member", "--workspace", workspace_id,
         "ada", "--owner"),
        ("admin", "--gateway", gateway.group(1), "list-workspaces"),
    ):  # fmt: skip
        done = _cli(as_operator, *line)
        assert done.returncode == 0, (line, done.stderr)
    password = (state / "postgres.password").read_text().strip()
    outputs: list[str] = []

    scrub = _cli(env, "scrub", "--workspace", slug)
    outputs += [scrub.stdout, scrub.stderr]
    assert scrub.returncode == 0, scrub.stderr
    assert f"scrubbed {slug}:" in scrub.stdout
    assert "tables rewritten" in scrub.stdout

    migrate = _cli(env, "migrate-db")
    outputs += [migrate.stdout, migrate.stderr]
    assert migrate.returncode == 0, migrate.stderr
    assert "migrations done:" in migrate.stdout

    servers = _cli(env, "servers", "list")
    outputs += [servers.stdout, servers.stderr]
    assert servers.returncode == 0, servers.stderr
    assert servers.stdout.splitlines() == ["default\t1 workspaces\tanswers\tdefault"]

    # The embedding job's work too: the embed service and the internal key
    # come from the same state directory.
    rebuild = _cli(env, "rebuild", "--workspace", slug)
    outputs += [rebuild.stdout, rebuild.stderr]
    assert rebuild.returncode == 0, rebuild.stderr
    assert f"{slug}: 0 embedded" in rebuild.stdout

    for text in outputs:
        assert "Traceback" not in text
        assert password not in text
    # The commands set the app role's password again, with the rounds `up` uses.
    running = LocalPostgres.running(state / "pgdata")
    assert running is not None
    with psycopg.connect(running.url) as conn:
        row = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'recallatron_app'"
        ).fetchone()
    assert row is not None and str(row[0]).startswith("SCRAM-SHA-256$1:"), str(row[0])[:20]

    # Stopped: the command says the local stack is not running and how to start it.
    up.send_signal(signal.SIGTERM)
    up.wait(WAIT_SECONDS)
    stopped = _cli(env, "scrub", "--workspace", slug)
    assert stopped.returncode == 2
    assert "Traceback" not in stopped.stderr
    [line] = stopped.stderr.strip().splitlines()
    assert "not running" in line and "recallatron up" in line
    assert "RECALLATRON_DATABASE_URL" in line


def test_operator_commands_without_a_state_directory_name_the_setting(tmp_path: Path) -> None:
    env = _env(tmp_path / "no-state-here")
    for args in (("scrub", "--workspace", "w"), ("migrate-db",)):
        done = _cli(env, *args)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "RECALLATRON_DATABASE_URL" in line
        assert done.stdout == ""
