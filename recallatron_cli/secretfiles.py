"""Secrets the local stack generates once and keeps in its state directory:
each a file of mode 0600, created atomically (never readable by anyone else,
not even for a moment), read back on every later start."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` with mode 0600, replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_or_create(path: Path, make: int | None = 32, prefix: str = "") -> str:
    """The secret in ``path``; a new random one (``make`` bytes, URL-safe
    text after ``prefix``) when the file does not exist yet. A file left
    readable by others is tightened to 0600."""
    if path.exists():
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return path.read_text().strip()
    value = prefix + secrets.token_urlsafe(make or 32)
    write_private(path, value)
    return value
