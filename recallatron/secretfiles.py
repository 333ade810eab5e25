"""Secrets the local stack generates once and keeps in its state directory:
each a file of mode 0600, created atomically (never readable by anyone else,
not even for a moment), read back on every later start."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO


def private_dir(path: Path, traverse_gid: int | None = None) -> Path:
    """``path`` made if missing and left readable by this user only (0700).
    A directory already 0710 with group ``traverse_gid`` stays so (the
    embedded Postgres's own group, when root runs it, passes through)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    allowed = traverse_gid is not None and st.st_gid == traverse_gid
    if st.st_mode & 0o077 and not (allowed and stat.S_IMODE(st.st_mode) == 0o710):
        path.chmod(0o700)
    return path


def private_log(path: Path) -> BinaryIO:
    """A log opened for appending, readable by this user only (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


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


TOKEN_HELP = (
    "a token on the command line is visible to every local user (ps, /proc); "
    "prefer RECALLATRON_TOKEN or RECALLATRON_TOKEN_FILE / --token-file"
)


def token_from(flag: str = "", flag_file: str = "", env: str = "RECALLATRON_TOKEN") -> str:
    """A token from, in order: ``flag`` (--token), the file ``flag_file``
    (--token-file), the variable ``env``, the file named by ``env`` + _FILE."""
    if flag:
        return flag.strip()
    path = flag_file or os.environ.get(f"{env}_FILE", "")
    if not flag_file and os.environ.get(env):
        return os.environ[env].strip()
    return Path(path).read_text().strip() if path else ""
