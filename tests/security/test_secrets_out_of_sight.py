"""Tokens kept out of sight (issue 21): the state directory and its logs are
this user's alone (0700/0600), and so is every key, password and token in it;
`up --demo` says where its token is, never the token; an answer never echoes
a server given as something other than a server name (a URL may hold a
password); the CLI and the MCP server take tokens from the environment or a
file, and `--token` says that the command line is visible to other local users."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import uuid
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron.secretfiles import private_dir, private_log, token_from
from recallatron_cli import main as cli
from recallatron_devkit.stack import Stack, StackConfig
from tests.conftest import Team

pytestmark = pytest.mark.integration

AS_ROOT = os.geteuid() == 0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def as_nobody(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["su", "-s", "/bin/sh", "nobody", "-c", command], capture_output=True, text=True, timeout=30
    )


def test_the_state_directory_is_private(stack: Stack) -> None:
    state = stack.state_dir
    # Root runs Postgres as its own user, whose group alone may pass through.
    assert mode(state) == (0o710 if AS_ROOT else 0o700)
    for directory in (state / "logs", state / "run", state / "pgdata"):
        assert mode(directory) == 0o700, directory
    logs = [*sorted((state / "logs").iterdir()), state / "pgdata" / "server.log"]
    assert len(logs) >= 5
    secrets = ["admin-token", "internal.key", "postgres.password", "app.password", "pgpass"]
    for path in [*logs, *(state / name for name in secrets)]:
        assert mode(path) == 0o600, path
    if AS_ROOT:
        for path in (state, state / "logs"):
            done = as_nobody(f"ls {shlex.quote(str(path))}")
            assert done.returncode != 0 and not done.stdout, path
        done = as_nobody(f"cat {shlex.quote(str(state / 'logs' / 'gateway.log'))}")
        assert done.returncode != 0 and not done.stdout


def test_an_open_state_directory_is_closed_on_the_next_start(tmp_path: Path) -> None:
    state = tmp_path / "old"
    (state / "logs").mkdir(parents=True)
    state.chmod(0o755)
    old_log = state / "logs" / "store.log"
    old_log.write_text("earlier run\n")
    old_log.chmod(0o644)
    Stack(StackConfig(state_dir=state))
    assert mode(state) == 0o700
    private_dir(state / "logs")
    private_log(old_log).close()
    assert (mode(state / "logs"), mode(old_log)) == (0o700, 0o600)
    assert old_log.read_text() == "earlier run\n"  # appended to, not replaced


def test_demo_output_holds_no_token(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Standard output ends up in terminals' scrollback and CI logs: the demo
    says where its token is, never the token, when it makes it or reuses it."""
    state = private_dir(tmp_path / "demo-state")
    cli.demo(stack.gateway, stack.admin_token, state)
    first = capsys.readouterr().out
    token = (state / "demo-token").read_text()
    assert token.startswith("rct_")
    assert token not in first and "rct_" not in first, first
    assert str(state / "demo-token") in first
    assert mode(state / "demo-token") == 0o600 and mode(state / "demo.json") == 0o600
    cli.demo(stack.gateway, stack.admin_token, state)
    again = capsys.readouterr().out
    assert "reused" in again and token not in again and "rct_" not in again
    assert f"RECALLATRON_TOKEN_FILE={state / 'demo-token'}" in again


@pytest.mark.parametrize(
    "server",
    [
        "postgresql://admin:hunter2-secret@db.internal:5432/postgres",
        "postgres://u:p4ssw0rd@h/db?sslmode=require",
        "host=db.internal password=hunter2-secret user=admin",
        "Prod-Server",  # not a server name either (capitals)
        "a" * 64,  # one character too long
    ],
    ids=["url", "url-with-query", "conninfo", "capitals", "64-characters"],
)
def test_an_invalid_server_name_is_not_echoed(operator: Client, server: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        operator.create_workspace(f"t-{uuid.uuid4().hex[:12]}", server=server)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("server:") and "not a valid server name" in details, details
    assert server[:8] not in details, details
    for secret in ("hunter2", "p4ssw0rd", "db.internal"):
        assert secret not in details, details


def test_an_unknown_valid_server_name_is_echoed(operator: Client) -> None:
    with pytest.raises(grpc.RpcError) as err:
        operator.create_workspace(f"t-{uuid.uuid4().hex[:12]}", server="no-such-server")
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "'no-such-server'" in details, details


def test_the_cli_takes_tokens_from_the_environment_or_a_file(
    stack: Stack,
    team: Team,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory = team.clients["ada"].remember("Read me with a token file").memory
    token_file = tmp_path / "token"
    token_file.write_text(team.clients["ada"].token + "\n")
    token_file.chmod(0o600)
    monkeypatch.delenv("RECALLATRON_TOKEN", raising=False)
    monkeypatch.delenv("RECALLATRON_TOKEN_FILE", raising=False)
    common = ["--gateway", stack.gateway]
    assert cli.main(["read", memory.id, *common, "--token-file", str(token_file)]) == 0
    assert memory.id in capsys.readouterr().out
    monkeypatch.setenv("RECALLATRON_TOKEN_FILE", str(token_file))
    assert cli.main(["read", memory.id, *common]) == 0
    assert memory.id in capsys.readouterr().out
    monkeypatch.delenv("RECALLATRON_TOKEN_FILE")
    monkeypatch.setenv("RECALLATRON_TOKEN", team.clients["ada"].token)
    assert cli.main(["read", memory.id, *common]) == 0
    monkeypatch.delenv("RECALLATRON_TOKEN")
    assert cli.main(["read", memory.id, *common]) == 2
    assert "error: no token: set RECALLATRON_TOKEN" in capsys.readouterr().err
    # The MCP server reads its default token the same way (never an argument).
    monkeypatch.setenv("RECALLATRON_TOKEN_FILE", str(token_file))
    assert token_from() == team.clients["ada"].token
    # --token is documented as visible to other local users.
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["read"].format_help()  # type: ignore[union-attr,index]
    assert "visible to every local user" in " ".join(help_text.split())
