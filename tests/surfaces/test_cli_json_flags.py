"""--json goes after any admin subcommand, as after every tool command: a
script writes `recallatron admin create-workspace acme --json`, not only
`recallatron admin --json create-workspace acme`."""

from __future__ import annotations

import argparse

import pytest

from recallatron_cli.main import build_parser

# A subcommand's required arguments, enough to parse it.
_ARGUMENTS = {
    "create-workspace": ["acme"],
    "create-member": ["--workspace", "00000000-0000-0000-0000-000000000001", "ada"],
    "create-token": ["00000000-0000-0000-0000-000000000002"],
    "revoke-token": ["00000000-0000-0000-0000-000000000003"],
    "rotate-token": ["00000000-0000-0000-0000-000000000003"],
    "delete-workspace": ["acme", "--confirm", "acme"],
    "remove-member": ["00000000-0000-0000-0000-000000000004", "--private-memories", "erase"],
}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError(f"{parser.prog} has no subcommands")


def _admin_subcommands() -> list[str]:
    return list(_subcommands(_subcommands(build_parser())["admin"]))


@pytest.mark.parametrize("name", _admin_subcommands())
def test_json_after_every_admin_subcommand(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # --json right after a nargs="+" option would be taken as its value.
    argv = ["admin", name, "--json", *_ARGUMENTS.get(name, [])]
    if name != "remove-member":
        argv = ["admin", name, *_ARGUMENTS.get(name, []), "--json"]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{' '.join(argv)} refused: {capsys.readouterr().err}")
    assert args.json is True
