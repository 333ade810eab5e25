"""`recallatron load` refusing its input as every command does: `error:` and
one line from the CLI's main(), exit 2, before any stack or gateway is used."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from recallatron_devkit import load


@pytest.fixture
def no_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal must come before a stack is started or a gateway called."""

    def reached(args: argparse.Namespace) -> None:
        raise AssertionError("the stack or gateway was reached")

    monkeypatch.setattr(load, "_gateway", reached)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--classes", "rare,nope"], "unknown query class(es) nope"),
        (["--classes", "file"], "class `file` needs --queries FILE"),
        (["--queries", "/nonexistent/queries.txt"], "No such file"),
        (["--members", "2", "--member", "2"], "--member 2: the workspace has 2 members"),
        (["--member", "-1"], "--member -1: the workspace has 8 members"),
        # Each of these seeded the workspace, then reported a run of 0
        # requests with exit 0 (a memory count of 0: 'no queries for class(es) rare').
        (["--duration", "0"], "--duration 0.0: must be a number of seconds more than 0"),
        (["--duration", "-5"], "--duration -5.0: must be a number of seconds more than 0"),
        (["--duration", "nan"], "--duration nan: must be a number of seconds more than 0"),
        (["--duration", "inf"], "--duration inf: must be a number of seconds more than 0"),
        (["--concurrency", "0"], "--concurrency 0: must be at least 1"),
        (["--concurrency", "-3"], "--concurrency -3: must be at least 1"),
        (["--rate", "-10"], "--rate -10.0: must be more than 0 requests a second"),
        (["--rate", "nan"], "--rate nan: must be more than 0 requests a second"),
        (["--memories", "0"], "--memories 0: must be at least 1"),
        (["--members", "0"], "--members 0: must be at least 1"),
        (["--pool-size", "0"], "--pool-size 0: must be at least 1"),
        # Open loop whose schedule holds no request: seeded, then 0 requests.
        (
            ["--rate", "0.5", "--duration", "1"],
            "--rate 0.5 --duration 1.0: schedules no request",
        ),
        (["--max-failed-share", "2"], "--max-failed-share 2.0: must be a share from 0 to 1"),
        (["--max-failed-share", "nan"], "--max-failed-share nan: must be a share from 0 to 1"),
        # Each seeded the workspace first: a negative one then failed the run
        # ('embedding not done') unless embedding had caught up; nan waited
        # without end.
        (["--embed-timeout", "-1"], "--embed-timeout -1.0: must be a number of seconds, 0 or more"),
        (["--embed-timeout", "nan"], "--embed-timeout nan: must be a number of seconds, 0 or more"),
    ],
)
def test_bad_load_input_is_refused_with_error_and_exit_2(
    argv: list[str],
    says: str,
    no_gateway: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It ended with SystemExit('recallatron load: ...'): the bare message,
    exit 1; a bad --member only after the workspace was seeded."""
    from recallatron_cli.main import main

    code = main(["load", "--state-dir", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and says in err, err
    assert "recallatron load:" not in err


def test_a_gateway_without_an_operator_token_is_refused_before_it_is_called(
    no_gateway: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--gateway` without RECALLATRON_ADMIN_TOKEN went on to call it with no
    token (UNAUTHENTICATED, exit 1), where `recallatron eval` refuses first."""
    from recallatron_cli.main import main

    monkeypatch.delenv("RECALLATRON_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))  # no admin-token there
    code = main(["load", "--gateway", "127.0.0.1:1", "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: no operator token: "), err


def test_a_queries_file_that_is_not_utf8_is_refused_naming_queries(
    no_gateway: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only "error: 'utf-8' codec can't decode byte 0xe9 ..."."""
    from recallatron_cli.main import main

    path = tmp_path / "queries.txt"
    path.write_bytes("café prices\n".encode("latin-1"))
    code = main(["load", "--state-dir", str(tmp_path), "--queries", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: --queries {path}: not UTF-8 text"), err
