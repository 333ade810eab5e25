"""A command's refusal of its own input or settings, before anything is sent.

It lives in the shared package so that each layer with commands (the CLI, the
dev kit's eval behind it) raises the one type the CLI's main() prints as it
prints every failure: ``error:`` and one line, then exits with ``code``."""

from __future__ import annotations

# The status argparse exits with for a bad argument.
EXIT_USAGE = 2
# The status of a command whose call was refused (any gRPC status but OK).
EXIT_REFUSED = 1


class Refused(Exception):
    """Printed by the CLI's main() as ``error: <message>``, exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
