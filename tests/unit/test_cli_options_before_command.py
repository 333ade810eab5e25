"""The options of every command that calls the gateway (--gateway, --token,
--token-file, --json) are taken before the command too, as most command-line
tools take them: `recallatron --token-file ~/.ada recall "deploy"` is the same
command as `recallatron recall "deploy" --token-file ~/.ada`."""

from __future__ import annotations

import pytest

from recallatron_cli.main import build_parser


@pytest.mark.parametrize(
    "command",
    [
        ["recall", "deploy"],
        ["remember", "a title", "the body"],
        ["whoami"],
        ["lookup", "Ada"],
        ["admin", "create-workspace", "acme"],
        ["settings"],
        ["settings", "set", "--default-recall-mode", "lexical"],
    ],
)
def test_options_before_the_command(command: list[str]) -> None:
    before = ["--gateway", "10.0.0.7:7400", "--token-file", "/tmp/ada.token", "--json"]
    args = build_parser().parse_args([*before, *command])
    assert args.gateway == "10.0.0.7:7400"
    assert args.token_file == "/tmp/ada.token"
    assert args.token == ""
    assert args.json is True


def test_the_same_option_after_the_command_wins() -> None:
    args = build_parser().parse_args(
        ["--gateway", "10.0.0.7:7400", "--token", "before", "recall", "q", "--token", "after"]
    )
    assert args.token == "after"
    assert args.gateway == "10.0.0.7:7400"


def test_left_out_before_the_command_changes_nothing() -> None:
    plain = build_parser().parse_args(["recall", "q"])
    assert plain.json is False and plain.token_file == "" and plain.token == ""


def test_before_a_command_that_does_not_take_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--token-file", "/tmp/ada.token", "up"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--token-file" in err and "`up`" in err


@pytest.mark.parametrize(
    "command",
    [
        ["admin", "create-member", "--workspace", "acme", "bob"],
        ["admin", "create-token", "00000000-0000-0000-0000-000000000002"],
        ["admin", "list-tokens"],
        ["settings", "set", "--default-recall-mode", "lexical"],
    ],
)
def test_options_after_a_subcommand_of_a_group(command: list[str]) -> None:
    """After `admin create-member ...` as after `recall ...`: the group's
    options are the subcommand's too."""
    after = ["--gateway", "10.0.0.7:7400", "--token-file", "/tmp/ada.token", "--json"]
    args = build_parser().parse_args([*command, *after])
    assert (args.gateway, args.token_file, args.json) == ("10.0.0.7:7400", "/tmp/ada.token", True)
