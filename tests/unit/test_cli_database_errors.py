"""An operator command whose database cannot be reached says so in one line,
the server's own words with no password, instead of a traceback; and the
commands find the local stack's gateway where it listens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [["servers", "list"], ["rebuild"], ["scrub", "--workspace", "w"], ["migrate-db"]],
    ids=lambda a: a[0],
)
def test_an_unreachable_database_is_one_line_without_its_password(
    args: list[str], tmp_path: Path
) -> None:
    """Every operator command on the database ends with it (`rebuild`, built
    on the embedding job, retried its connect once a second without end)."""
    env = {
        **os.environ,
        "RECALLATRON_DATABASE_URL": "postgresql://postgres:s3cret-pw@127.0.0.1:1/postgres",
        "RECALLATRON_APP_PASSWORD": "app-s3cret",
        "RECALLATRON_STATE_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", *args],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "error: the database:" in done.stderr and "127.0.0.1" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout


def test_commands_call_the_local_stack_s_gateway_where_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up` on another gateway port (or 0) writes the port it got; the CLI
    called the default address and failed UNAVAILABLE."""
    from recallatron.client_connection import DEFAULT_GATEWAY
    from recallatron_cli.common import local_gateway

    monkeypatch.delenv("RECALLATRON_GATEWAY", raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    assert local_gateway() == DEFAULT_GATEWAY
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "gateway.port").write_text("41234\n")
    assert local_gateway() == "127.0.0.1:41234"
    monkeypatch.setenv("RECALLATRON_GATEWAY", "10.0.0.7:7400")
    assert local_gateway() == "10.0.0.7:7400"


def test_every_command_calling_a_gateway_finds_the_local_stack_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recallatron mcp` (and `python -m recallatron_mcp`) called the default
    address whatever RECALLATRON_STATE_DIR's stack listened on, where every
    other command calling the gateway finds it there; the dev kit's eval and
    load, which start a stack of their own unless given one, default to none."""
    import argparse

    from recallatron_cli.main import build_parser
    from recallatron_mcp import options

    monkeypatch.delenv("RECALLATRON_GATEWAY", raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "gateway.port").write_text("41234\n")
    defaults: dict[str, object] = {}

    def visit(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    visit(child, f"{path} {name}")
            elif "--gateway" in action.option_strings and action.default not in (
                "",
                None,
                argparse.SUPPRESS,  # `settings set`: the one given before `set`
            ):
                defaults[path] = action.default

    visit(build_parser(), "recallatron")
    standalone = argparse.ArgumentParser()
    options.add_arguments(standalone)
    visit(standalone, "python -m recallatron_mcp")
    assert "recallatron mcp" in defaults and "recallatron admin" in defaults
    assert {p: d for p, d in defaults.items() if d != "127.0.0.1:41234"} == {}
