"""The options every command calling the gateway takes (--gateway, --token,
--token-file, --json), taken before the command too: `recallatron
--token-file F recall q` is `recallatron recall q --token-file F`, as a shell
alias or a wrapper script writes it. Given in both places, the one after the
command wins; before a command that takes no such option, it is refused
naming both."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from recallatron_cli import common

# The value given before the command is kept under _BEFORE + the command's
# own dest until it is handed to the command.
_BEFORE = "before_command_"


class Parser(argparse.ArgumentParser):
    """The top-level parser: it hands the options given before the command
    to the command's own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Whole flags only: argparse would take a command's own `--to` for an
        # abbreviation of these.
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})
        group = self.add_argument_group(
            "before the command, for any command that calls the gateway (as after it)"
        )
        for flag, dest, help_ in common.GATEWAY_OPTIONS:
            kind: dict[str, Any] = common.option_kind(dest) or {"metavar": dest.upper()}
            group.add_argument(
                flag, dest=_BEFORE + dest, default=argparse.SUPPRESS, help=help_, **kind
            )

    def parse_known_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        command = self._command_parser(getattr(parsed, "cmd", None))
        for flag, dest, _ in common.GATEWAY_OPTIONS:
            if not hasattr(parsed, _BEFORE + dest):
                continue
            value = getattr(parsed, _BEFORE + dest)
            delattr(parsed, _BEFORE + dest)
            if command is None or not hasattr(parsed, dest):
                self.error(f"{flag}: `{parsed.cmd}` takes no such option")
            # The command's own value, when given after it, stands.
            if getattr(parsed, dest) == command.get_default(dest):
                setattr(parsed, dest, value)
        return parsed, rest

    def _command_parser(self, name: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                parser: argparse.ArgumentParser = action.choices[name]
                return parser
        return None
