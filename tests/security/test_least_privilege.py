"""Least privilege in the local stack: each process is started with the
secrets it uses and no others. The operator token is checked by the gateway
alone, so store, rank, embed and the embedding job never hold it; Postgres's
credentials reach only the processes that connect to it. Read from each
running process's own environment (/proc/PID/environ), as another local
user's process or a core dump would see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallatron_devkit.stack import DATABASE_USERS, Stack

pytestmark = pytest.mark.integration


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {key.decode(): value.decode(errors="replace") for key, value in pairs}


def test_the_operator_token_is_only_in_the_gateway(stack: Stack) -> None:
    assert stack.processes, "the stack runs no process"
    holders = set()
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} is not running"
        env = environment(process.pid)
        if env.get("RECALLATRON_ADMIN_TOKEN") or stack.admin_token in env.values():
            holders.add(name)
    assert holders == {"gateway"}, sorted(holders)


def test_database_credentials_are_only_where_postgres_is_used(stack: Stack) -> None:
    for name, process in stack.processes.items():
        env = environment(process.pid)
        held = {k for k in ("RECALLATRON_DATABASE_URL", "RECALLATRON_APP_PASSWORD") if env.get(k)}
        assert (name in DATABASE_USERS) == bool(held), (name, sorted(held))
