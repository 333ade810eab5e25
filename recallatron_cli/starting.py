"""The stop of a command still starting: Ctrl-C (or SIGTERM) while the
`recallatron` program imports its modules, before main() has its handler in
place, ends it as every other stop does (one line, exit 128 + the signal),
never in a traceback. Imports nothing heavy itself, so that it is in place
within the program's first milliseconds."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

# What a command stopped before it did anything says.
STOPPED_BEFORE_STARTING = "recallatron stopped; run it again"
PROGRAM = "recallatron"


def is_the_program(module_name: str) -> bool:
    """True when the process is the `recallatron` command: the CLI's module
    run as ``python -m`` (``module_name`` is ``__main__``), or the installed
    script of that name; False for a program importing the CLI (a test)."""
    if module_name == "__main__":
        return True
    script = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    return Path(script).stem == PROGRAM


@contextmanager
def stopped_while_starting(module_name: str) -> Iterator[None]:
    """Around the imports of the module ``module_name`` names: when the
    process is the command, a stop inside prints the one line and exits with
    128 + the signal; an importing program gets its KeyboardInterrupt as
    before."""
    if not is_the_program(module_name):
        yield
        return
    stopped_by = [signal.SIGINT]

    def on_sigterm(signum: int, _frame: FrameType | None) -> None:
        stopped_by[0] = signal.Signals(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    except KeyboardInterrupt:
        print(f"error: {STOPPED_BEFORE_STARTING}", file=sys.stderr, flush=True)
        raise SystemExit(128 + stopped_by[0]) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
