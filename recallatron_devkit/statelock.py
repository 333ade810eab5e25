"""One stack per state directory: the process running it holds a lock (flock)
on a file there, its pid inside. A second stack in the same directory would
stop the first one's Postgres (a leftover, to it) and take over its port
files and logs; it is refused before it touches anything. The kernel lets go
of the lock when its process ends, however it ends (SIGKILL included)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from recallatron.secretfiles import private_dir

LOCK = "stack.lock"


def take(state_dir: Path) -> int:
    """The lock of ``state_dir``, held through the returned descriptor until
    :func:`release`; RuntimeError naming the holder when another has it."""
    run = private_dir(state_dir / "run")
    fd = os.open(run / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        port = run / "gateway.port"
        where = f", gateway 127.0.0.1:{port.read_text().strip()}" if port.exists() else ""
        raise RuntimeError(
            f"a stack is already running in {state_dir} (pid {holder}{where}): "
            "stop it first (Ctrl-C where it runs), or give this one a state directory "
            "of its own (RECALLATRON_STATE_DIR)"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def release(fd: int) -> None:
    os.close(fd)
