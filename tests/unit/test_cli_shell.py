"""The command as a shell meets it: every subcommand says what it does in
`recallatron --help` (the seven tools said nothing), and output cut short by
the reader (`recallatron ... | head`) ends quietly, as a SIGPIPE'd command
does, not in "error: Broken pipe"."""

from __future__ import annotations

import argparse
import io

import pytest

from recallatron_cli import main as cli
from recallatron_cli import tools


def test_every_subcommand_says_what_it_does() -> None:
    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helped = {c.dest: c.help for c in subparsers._choices_actions}
    assert set(helped) == set(subparsers.choices)
    assert [name for name, said in helped.items() if not said] == []


def test_every_nested_subcommand_says_what_it_does_too() -> None:
    """`recallatron admin --help` listed create-workspace, create-member,
    create-token and revoke-token with nothing beside them."""
    silent: list[str] = []

    def visit(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {c.dest: c.help for c in action._choices_actions}
                for name, child in action.choices.items():
                    if not helped.get(name):
                        silent.append(f"{path} {name}")
                    visit(child, f"{path} {name}")

    visit(cli.build_parser(), "recallatron")
    assert silent == []


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_output_cut_short_by_its_reader_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def prints(_: argparse.Namespace) -> int:
        print("a line the reader will not take")
        return 0

    monkeypatch.setattr(tools, "cmd_read", prints)
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    status = cli.main(["read", "00000000-0000-0000-0000-000000000001"])
    assert status == cli.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_every_gateway_option_says_which_gateway_it_calls() -> None:
    """Twenty-four commands listed `--gateway GATEWAY` with nothing beside it,
    so `--help` never told a newcomer what a command calls by default nor that
    RECALLATRON_GATEWAY chooses another; the same for `--json`."""
    silent: list[str] = []

    def visit(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    visit(child, f"{path} {name}")
            elif "--gateway" in action.option_strings:
                # The dev kit's eval and load start a stack of their own.
                if "RECALLATRON_GATEWAY" not in str(action.help) and path.split()[-1] not in (
                    "eval",
                    "load",
                ):
                    silent.append(f"{path} --gateway")
            elif "--json" in action.option_strings and not action.help:
                silent.append(f"{path} --json")

    visit(cli.build_parser(), "recallatron")
    assert silent == []


def test_every_repeatable_option_says_so() -> None:
    """`recallatron list --help` showed `--kind {note,...}` once, though
    `--kind note --kind fact` lists both (docs/api.md: `[--kind KIND ...]`), and
    remember's --claim, --relation, --purpose, derive's --source and 21 more
    taken many times said nothing of it."""
    silent: list[str] = []

    def visit(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    visit(child, f"{path} {name}")
            elif isinstance(
                action, argparse._AppendAction | argparse._ExtendAction
            ) and "repeatable" not in str(action.help):
                silent.append(f"{path} {action.option_strings[0]}")

    visit(cli.build_parser(), "recallatron")
    assert silent == []


def test_the_mcp_servers_options_name_their_defaults() -> None:
    """`recallatron mcp --help` named neither the stdio default of --transport
    nor RECALLATRON_MCP_LISTEN, which --listen's default is read from and no
    document named."""
    (subparsers,) = [
        a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    helped = {
        a.option_strings[0]: str(a.help) for a in subparsers.choices["mcp"]._actions if a.help
    }
    assert "RECALLATRON_MCP_LISTEN" in helped.get("--listen", "")
    assert "stdio" in helped.get("--transport", "")


@pytest.mark.parametrize("listen", ["localhost", "127.0.0.1:mcp", "127.0.0.1:99999", ""])
def test_an_mcp_listen_address_that_is_none_stops_the_start_naming_it(
    listen: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --listen (or RECALLATRON_MCP_LISTEN) without a port, or with one no
    port can be, failed with int()'s words, naming neither ('error:
    INVALID_ARGUMENT: invalid literal for int() with base 10: 'localhost''),
    or with a traceback from `python -m recallatron_mcp`."""
    from recallatron_mcp import server

    monkeypatch.setenv("RECALLATRON_TOKEN", "rc_unused")
    monkeypatch.delenv("RECALLATRON_MCP_OAUTH_ISSUER", raising=False)
    assert cli.main(["mcp", "--transport", "http", "--listen", listen]) == 2
    said = capsys.readouterr().err
    assert "--listen" in said and "RECALLATRON_MCP_LISTEN" in said and "int()" not in said
    monkeypatch.setenv("RECALLATRON_MCP_LISTEN", listen)
    with pytest.raises(SystemExit) as stopped:
        server.main(["--transport", "http"])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "--listen" in said and "RECALLATRON_MCP_LISTEN" in said and "int()" not in said
