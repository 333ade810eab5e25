"""Which Postgres server an operator command works on, decided before the
store is opened: an explicit RECALLATRON_DATABASE_URL, else the local
stack's embedded server found in the state directory, else one line naming
what to set (exit 2, no traceback). No server is started here: the
running case is tests/integration/test_operator_local_stack.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recallatron_cli.main import main

MANUAL = (
    "RECALLATRON_DATABASE_URL",
    "RECALLATRON_APP_PASSWORD",
    "RECALLATRON_POSTGRES_SERVERS",
    "RECALLATRON_POSTGRES_SERVERS_DIR",
)


@pytest.fixture(autouse=True)
def no_database_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MANUAL:
        monkeypatch.delenv(name, raising=False)


def _exit_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.strip().splitlines()
    return line


@pytest.mark.parametrize(
    "args",
    [
        ["scrub", "--workspace", "w"],
        ["migrate-db"],
        ["servers", "list"],
        ["rebuild"],
        ["migrate", "--sqlite", "s", "--graph", "g", "--workspace", "w", "--owner", "o"],
    ],
)
def test_no_state_directory_and_no_url_names_the_setting(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path / "nowhere"))
    line = _exit_line(args, capsys)
    assert "RECALLATRON_DATABASE_URL" in line
    assert "recallatron up" in line


def test_a_stopped_local_stack_is_named_with_how_to_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a stopped stack leaves: a data directory with no server on it.
    (tmp_path / "pgdata").mkdir()
    (tmp_path / "pgdata" / "PG_VERSION").write_text("18\n")
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    line = _exit_line(["scrub", "--workspace", "w"], capsys)
    assert "not running" in line
    assert str(tmp_path) in line
    assert "recallatron up" in line


def test_a_stale_pid_file_is_not_a_running_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A server killed without a shutdown leaves its pid file behind.
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("18\n")
    gone = 2**22 + 1  # above pid_max's default range: no such process
    (pgdata / "postmaster.pid").write_text(f"{gone}\n{pgdata}\n1700000000\n7432\n\n")
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    line = _exit_line(["migrate-db"], capsys)
    assert "not running" in line


def test_an_explicit_url_wins_over_the_local_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recallatron_cli import operator

    (tmp_path / "pgdata").mkdir()
    (tmp_path / "pgdata" / "PG_VERSION").write_text("18\n")
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    given = "postgresql://admin@db.example:5432/postgres"
    monkeypatch.setenv("RECALLATRON_DATABASE_URL", given)
    operator.find_database()
    assert os.environ["RECALLATRON_DATABASE_URL"] == given
    assert "RECALLATRON_APP_PASSWORD" not in os.environ
